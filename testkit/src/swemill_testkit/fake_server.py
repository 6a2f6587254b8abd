"""A scripted model server on loopback, for tests and demos: real HTTP, no network.

It speaks the OpenAI chat-completions API (``POST /v1/chat/completions``) and the Anthropic
Messages API (``POST /v1/messages``). What it answers is a *script*: a list of steps taken in
order (tool calls, text, malformed arguments, HTTP errors with ``Retry-After``, delays), or a
callable that picks the step from the request. Every request is recorded for assertions::

    with FakeOpenAIServer([errors_then(2), tool_reply("submit")]) as srv:
        policy = policy_from_spec(f"openai:fake@{srv.base_url}")

From a shell: ``python -m swemill_testkit.fake_server --script steps.json --port 8000``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from swemill_testkit.fake_wire import anthropic_body, openai_body

__all__ = [
    "FakeToolCall",
    "FakeReply",
    "FakeError",
    "Step",
    "RecordedRequest",
    "FakeOpenAIServer",
    "tool_reply",
    "text_reply",
    "errors_then",
    "step_from_dict",
]


@dataclass(slots=True)
class FakeToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """A dict is sent as JSON; a string is sent verbatim (so it can be malformed)."""
    id: str | None = None


@dataclass(slots=True)
class FakeReply:
    text: str | None = None
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    prompt_tokens: int | None = None
    """Defaults to the request body's size / 4."""
    completion_tokens: int | None = None
    """Defaults to the reply's size / 4."""
    cost: float | None = None
    """Reported as ``usage.cost``; when None, computed from the server's prices if it has any."""
    delay_s: float = 0.0
    finish_reason: str | None = None


@dataclass(slots=True)
class FakeError:
    status: int = 500
    message: str = "fake server error"
    retry_after: float | None = None
    delay_s: float = 0.0


Step = FakeReply | FakeError
Script = Sequence[Step] | Callable[[dict[str, Any]], Step]


@dataclass(slots=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def tool_reply(name: str, arguments: dict[str, Any] | str | None = None, **kw: Any) -> FakeReply:
    args: dict[str, Any] | str = {} if arguments is None else arguments
    return FakeReply(tool_calls=[FakeToolCall(name, args)], **kw)


def text_reply(text: str, **kw: Any) -> FakeReply:
    return FakeReply(text=text, **kw)


def errors_then(k: int, status: int = 500, **kw: Any) -> list[Step]:
    """``k`` HTTP errors in a row (put the success after them in the script)."""
    return [FakeError(status=status, **kw) for _ in range(k)]


def step_from_dict(d: dict[str, Any]) -> Step:
    """A step from JSON: ``{"text"}``, ``{"tool_calls": [{"name", "arguments"}]}``,
    ``{"error": 500, "message", "retry_after"}``; ``usage``, ``cost``, ``delay_s`` optional."""
    if "error" in d:
        return FakeError(status=int(d["error"]), message=d.get("message", "fake server error"),
                         retry_after=d.get("retry_after"), delay_s=float(d.get("delay_s", 0)))
    usage = d.get("usage") or {}
    calls = [FakeToolCall(c["name"], c.get("arguments", {}), c.get("id"))
             for c in d.get("tool_calls", [])]
    return FakeReply(text=d.get("text"), tool_calls=calls,
                     prompt_tokens=usage.get("prompt_tokens"),
                     completion_tokens=usage.get("completion_tokens"),
                     cost=d.get("cost", usage.get("cost")), delay_s=float(d.get("delay_s", 0)))


class FakeOpenAIServer:
    """A ThreadingHTTPServer on 127.0.0.1 (port 0 = any free port) answering from a script.

    ``price_in``/``price_out`` ($ per million tokens) make it report ``usage.cost`` for steps
    that give none, like OpenRouter does. When a list script runs out the server answers 400
    ``script exhausted`` (or repeats its last step with ``repeat_last=True``)."""

    def __init__(self, script: Script, *, port: int = 0, price_in: float | None = None,
                 price_out: float | None = None, repeat_last: bool = False) -> None:
        self._script = script
        self._index = 0
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.price = (price_in, price_out) if price_in is not None else None
        self.repeat_last = repeat_last
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The bare origin, which is what the Anthropic SDK's ``base_url`` wants."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAIServer:
        # A short poll interval keeps close() fast (shutdown waits for one poll).
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True, name=f"fake-model-server:{self.port}")
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_step(self, request: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(RecordedRequest(request["path"], request["headers"],
                                                 request["body"]))
            if callable(self._script):
                return self._script(request)
            steps = self._script
            if self._index < len(steps):
                self._index += 1
                return steps[self._index - 1]
            if self.repeat_last and steps:
                return steps[-1]
            return FakeError(status=400, message="fake server: script exhausted")

    def cost_for(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price is None:
            return None
        p_in, p_out = self.price
        return (prompt_tokens * p_in + completion_tokens * (p_out or 0.0)) / 1_000_000


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle on, a keep-alive client waits
        # ~40 ms for the delayed ACK on every call.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            return  # keep test output clean

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "request body is not JSON"}})
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            kind = "anthropic" if path.endswith("/messages") else "openai"
            if not path.endswith(("/chat/completions", "/messages")):
                self._send(404, {"error": {"message": f"no route {path}"}})
                return
            request = {"path": path, "headers": dict(self.headers.items()), "body": body}
            step = server.next_step(request)
            if step.delay_s:
                time.sleep(step.delay_s)
            if isinstance(step, FakeError):
                self._send_error(step, kind)
                return
            render = anthropic_body if kind == "anthropic" else openai_body
            self._send(200, render(step, body, len(raw), server.cost_for))

        def _send_error(self, step: FakeError, kind: str) -> None:
            if kind == "anthropic":
                payload: dict[str, Any] = {
                    "type": "error", "error": {"type": "api_error", "message": step.message}}
            else:
                payload = {"error": {"message": step.message, "type": "fake_error",
                                     "code": step.status}}
            headers = {}
            if step.retry_after is not None:
                headers["Retry-After"] = f"{step.retry_after:g}"
            self._send(step.status, payload, headers)

        def _send(self, status: int, payload: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing left to tell it

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI/Anthropic-compatible server")
    parser.add_argument("--script", required=True, help="JSON file: a list of steps")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--repeat-last", action="store_true")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as f:
        steps = [step_from_dict(d) for d in json.load(f)]
    srv = FakeOpenAIServer(steps, port=args.port, repeat_last=args.repeat_last)
    print(f"fake model server at {srv.base_url}", flush=True)
    try:
        srv._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()


if __name__ == "__main__":
    main()
