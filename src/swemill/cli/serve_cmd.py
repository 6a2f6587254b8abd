"""``swemill serve --tasks RUN_ID --out ROOT``: a run's tasks as live RL environments over HTTP."""

from __future__ import annotations

from typing import Annotated

import typer

from swemill.cli._common import console, fail
from swemill.cli.options import Out


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        tasks: Annotated[str, typer.Option("--tasks", help="Run id whose tasks are in --out.")],
        out: Out,
        host: Annotated[str, typer.Option(
            "--host", help="Address to bind; beyond loopback a --token is required.")]
        = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8765,
        max_sessions: Annotated[int, typer.Option(
            "--max-sessions", min=1, help="Open sessions at once; more get 429 + Retry-After.")]
        = 32,
        max_steps: Annotated[int, typer.Option(
            "--max-steps", min=1, help="Steps per episode; the last one is graded.")] = 50,
        idle_timeout: Annotated[float, typer.Option(
            "--idle-timeout", min=1.0, help="Close a session idle this many seconds.")] = 600.0,
        token: Annotated[str | None, typer.Option(
            "--token", envvar="SWEMILL_SERVE_TOKEN",
            help="Bearer token required on every request (required off loopback).")] = None,
        backend: Annotated[str, typer.Option(
            "--backend", help="Sandbox backend: auto, bwrap, local.")] = "auto",
        test_timeout: Annotated[float, typer.Option(
            "--test-timeout", min=1.0, help="Seconds per test run (run_tests and grading).")]
        = 900.0,
        test_nice: Annotated[int, typer.Option(
            "--test-nice", min=0, max=19, help="Niceness of test runs (run_tests and "
            "grading) and of their scheduling autogroups: the policy's other commands go "
            "first (0: none).")] = 10,
        grading_servers: Annotated[int | None, typer.Option(
            "--grading-servers", min=1, help="Warm grading servers per task at most, started "
            "as gradings wait for one (default: one per core).")] = None,
        cold_grading: Annotated[bool, typer.Option(
            "--cold-grading", help="Grade in a fresh sandbox each time, not through warm "
            "grading servers.")] = False,
        cold_tests: Annotated[bool, typer.Option(
            "--cold-tests", help="Run the policy's run_tests in the session's own sandbox, "
            "not in a fork of a warm grading server.")] = False,
        step_sandbox: Annotated[bool, typer.Option(
            "--sandbox-per-command", help="Run every command in a new sandbox, not in one "
            "long-lived sandbox per session.")] = False,
        spare_sessions: Annotated[int, typer.Option(
            "--spare-sessions", min=0, help="Spare sessions kept ready per task that has been "
            "reset (forked, their command runner started), so that a reset's first command "
            "does not wait for one; 0: none.")] = 1,
    ) -> None:
        """Serve a run's tasks as RL environments: POST /sessions, /sessions/{id}/step, ..."""
        from swemill.agent.env import EnvConfig
        from swemill.core.errors import SwemillError
        from swemill.store import Store

        try:
            import uvicorn

            from swemill.envs.env_pool import EnvPool
            from swemill.envs.server import ServeConfig, check_bind, create_app
        except ImportError as exc:
            fail(f"swemill serve needs the 'serve' extra (pip install 'swemill[serve]'): {exc}")
        config = ServeConfig(host=host, port=port, max_sessions=max_sessions,
                             max_steps=max_steps, idle_timeout_s=idle_timeout, token=token,
                             reap_every_s=max(0.5, min(5.0, idle_timeout / 2)))
        try:
            check_bind(config)
            store = Store.open(out)
            pool = EnvPool.of_run(store, tasks, EnvConfig(backend=backend, lint=False,
                                                          test_timeout_s=test_timeout,
                                                          warm_grading=not cold_grading,
                                                          warm_tests=not cold_tests,
                                                          test_nice=test_nice,
                                                          grading_servers=grading_servers,
                                                          session_runner=not step_sandbox),
                                  spares=spare_sessions)
        except SwemillError as exc:
            fail(str(exc))
        app = create_app(pool, config)
        console.print(f"serving {len(pool.tasks)} tasks of run {tasks} at "
                      f"http://{host}:{port} (max {max_sessions} sessions)", highlight=False)
        uvicorn.run(app, host=host, port=port, log_level="warning")
