"""Secrets in session logs are redacted before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from swemill.store import Store
from swemill.traces.ingest import ingest
from swemill_testkit.fake_sessions import SessionWriter, text, tool_use

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


def _contact_session(root: Path) -> Path:
    w = SessionWriter("contact", "/home/dev/proj")
    w.user("the staging box is 10.20.30.40; mail ops-lead@corp-mail.io if it is down")
    w.assistant([text("I will ping 10.20.30.40 and write to ops-lead@corp-mail.io.")],
                {"output_tokens": 9})
    return w.write(root / "in" / "contact.jsonl")


def test_scrub_keep_leaves_chosen_pii_through_ingest_and_corpus(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from swemill.cli.main import app
    from swemill.traces.load import load_trajectories

    session, runner = _contact_session(tmp_path), CliRunner()
    for run, keep in (("kept", ["--scrub-keep", "email"]), ("plain", [])):
        out = str(tmp_path / run)
        r = runner.invoke(app, ["traces", "ingest", str(session), "--out", out, "--run-id", run,
                                *keep])
        assert r.exit_code == 0, r.output
        r = runner.invoke(app, ["corpus", "--run", run, "--out", out, "--holdout", "0", *keep])
        assert r.exit_code == 0, r.output
    kept, plain = Store.open(str(tmp_path / "kept")), Store.open(str(tmp_path / "plain"))
    text_of = [m.text for m in load_trajectories(kept, "kept")[0].messages]
    assert any("ops-lead@corp-mail.io" in t for t in text_of)
    assert not any("10.20.30.40" in t for t in text_of)  # only what was named is kept
    rows = json.dumps(pq.read_table(tmp_path / "kept" / "corpus" / "sft").to_pylist())
    assert "ops-lead@corp-mail.io" in rows and "10.20.30.40" not in rows
    assert "<REDACTED:ipv4>" in rows
    plain_rows = json.dumps(pq.read_table(tmp_path / "plain" / "corpus" / "sft").to_pylist())
    assert "ops-lead@corp-mail.io" not in plain_rows and "<REDACTED:email>" in plain_rows
    assert kept.read_manifest("kept").metadata["scrub_keep"] == ["email"]
    assert "scrub_keep" not in plain.read_manifest("plain").metadata
    assert kept.read_manifest("kept").counts["traces"].get("scrubbed.email", 0) == 0
    assert plain.read_manifest("plain").counts["traces"]["scrubbed.email"] == 2


def test_scrub_keep_refuses_secrets_with_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from swemill.cli.main import app

    r = CliRunner().invoke(app, ["traces", "ingest", str(_contact_session(tmp_path)), "--out",
                                 str(tmp_path / "o"), "--scrub-keep", "email,github_token"])
    assert r.exit_code == 2
    assert "'github_token' cannot be kept" in r.output and "secrets are always" in r.output
    assert not (tmp_path / "o").exists()
