"""Secrets in session logs are redacted before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from swemill.store import Store
from swemill.traces.fake_sessions import SessionWriter, text, tool_use
from swemill.traces.ingest import ingest

GH = "ghp_" + "1234567890abcdefghijABCDEFGHIJ123456"
OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def test_secrets_in_text_tool_args_results_and_summaries_are_redacted(tmp_path: Path) -> None:
    w = SessionWriter("secret", "/home/dev/proj")
    w.user(f"my token is {GH}, please configure the client")
    w.assistant([text("I will write it to .env"),
                 tool_use("t1", "Bash", {"command": f"echo OPENAI_API_KEY={OPENAI} >> .env"})],
                {"output_tokens": 9})
    w.tool_result("t1", f"OPENAI_API_KEY={OPENAI}\nGITHUB_TOKEN={GH}")
    w.assistant([text("Done.")], {"output_tokens": 2})
    w.raw({"type": "summary", "summary": f"Set up key {GH}", "leafUuid": w.head})
    session = w.write(tmp_path / "in" / "secret.jsonl")

    store = Store.open(str(tmp_path / "store"))
    result = ingest([session.parent], store, run_id="s1")
    assert result.counts.scrubbed == {"github_token": 3, "openai_key": 2}
    # Nothing under the store root holds the secrets: Parquet parts read back (they are
    # compressed, so their bytes prove nothing) and every other file as written.
    for f in (tmp_path / "store").rglob("*"):
        if not f.is_file():
            continue
        if f.suffix == ".parquet":
            data = json.dumps(pq.read_table(f).to_pylist(), default=str).encode()
        else:
            data = f.read_bytes()
        assert GH.encode() not in data and OPENAI.encode() not in data, f
    from swemill.traces.load import load_states

    states = load_states(store, "s1")
    assert states[0].actions[0].args["command"] == (
        "echo OPENAI_API_KEY=<REDACTED:openai_key> >> .env")
    assert "<REDACTED:github_token>" in states[1].messages[0].text
    manifest = store.read_manifest("s1")
    assert manifest.counts["traces"]["scrubbed.github_token"] == 3
