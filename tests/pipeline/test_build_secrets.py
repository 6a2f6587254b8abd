"""Secrets planted in a built run's tool outputs and messages never reach the Parquet; the
sample repository's own code gives the false-positive count (printed, and bounded)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from swemill.core.records import (
    Golden,
    Message,
    PreferencePair,
    Task,
    TextBlock,
    ToolResultBlock,
    Trajectory,
)
from swemill.corpus.assemble import admit
from swemill.corpus.redact import scrub
from swemill.repo.sample import sample_path
from swemill.store import Store

pytestmark = pytest.mark.slow


def _planted() -> list[tuple[str, str, str]]:
    """The corpus tests' planted secrets: (kind, secret, the text that carries it)."""
    path = Path(__file__).resolve().parents[1] / "corpus" / "test_scrub.py"
    spec = importlib.util.spec_from_file_location("_planted_secrets", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.PLANTED)


def _plant(msgs: list[Message], text: str, where: int) -> list[Message]:
    """Put ``text`` into a tool result (even ``where``) or into the task message (odd)."""
    out = [m.model_copy(deep=True) for m in msgs]
    if where % 2 == 0:
        for m in reversed(out):
            results = [b for b in m.content if isinstance(b, ToolResultBlock)]
            if results:
                results[0].content += "\n" + text
                return out
    user = next(m for m in out if m.role == "user")
    user.content.append(TextBlock(text=text))
    return out


def test_planted_secrets_are_all_redacted_in_the_parquet(sample_build, cli,
                                                         tmp_path: Path) -> None:
    planted = _planted()
    assert len(planted) >= 50 and len({k for k, _, _ in planted}) >= 10
    src = Store.open(str(sample_build.root))
    run = sample_build.run_id
    trajs = [t for t in src.read_records("trajectories", run, Trajectory) if admit(t) is None]
    pairs = src.read_records("pairs", run, PreferencePair)
    assert trajs and pairs
    for i, (_, _, text) in enumerate(planted):  # round-robin over SFT rows and DPO prompts
        if i % 3 == 2:
            p = pairs[i % len(pairs)]
            pairs[i % len(pairs)] = p.model_copy(update={"prompt": _plant(p.prompt, text, i)})
        else:
            t = trajs[i % len(trajs)]
            trajs[i % len(trajs)] = t.model_copy(update={"messages": _plant(t.messages, text, i)})
    dst = Store.open(str(tmp_path / "planted"))
    dst.write_records("tasks", "planted", "00000", src.read_records("tasks", run, Task))
    dst.write_records("golden", "planted", "00000", src.read_records("golden", run, Golden))
    dst.write_records("trajectories", "planted", "00000", trajs)
    dst.write_records("pairs", "planted", "00000", pairs)

    # Without dedup every planted row is kept, so every secret went through the scrub.
    proc = cli.run("corpus", "--run", "planted", "--out", dst.url, "--json", "--holdout", "0.3",
                   "--no-dedup")
    assert proc.returncode == 0, proc.stderr
    counts = dst.read_manifest("planted").counts
    assert counts["corpus.sft"]["out"] == len(trajs) and counts["corpus.dpo"]["out"] == len(pairs)
    text = "\n".join(json.dumps(pq.read_table(p).to_pylist(), default=str)
                     for p in (tmp_path / "planted" / "corpus").rglob("part-*.parquet"))
    leaked = [(kind, secret) for kind, secret, _ in planted
              if secret in text or json.dumps(secret)[1:-1] in text]
    assert leaked == []
    kinds = {kind for kind, _, _ in planted}
    assert all(f"<REDACTED:{kind}>" in text for kind in kinds)
    assert sum(counts["corpus.scrub"].values()) >= len(planted)


def test_false_positives_on_the_sample_repository(sample_build) -> None:
    """Reported two ways: redactions in the sample build (nothing was planted there, so each is
    a false positive) and redactions when the sample's source files themselves are scrubbed."""
    built = json.loads((sample_build.root / "manifests" /
                        f"run_id={sample_build.run_id}.json").read_text())
    in_build = sum(built["counts"].get("corpus.scrub", {}).values())
    files = sorted(p for p in sample_path().rglob("*") if p.is_file() and p.suffix in
                   (".py", ".toml", ".cfg", ".md", ".txt"))
    lines = hits = 0
    for path in files:
        body = path.read_text(encoding="utf-8", errors="replace")
        lines += body.count("\n")
        hits += scrub(body).redacted
    print(f"scrub false positives on the sample repository: {in_build} in the build's rows, "
          f"{hits} in {lines} lines of {len(files)} source files")
    assert lines > 500
    assert hits <= 1 and in_build <= 1
