"""Shadow checks catch what the head image's proof does not foresee. Regression class: a
module that keeps its own source text from import time (``TEXT = open(__file__).read()``)
sees head's text in the image after a body-only edit, while a fresh interpreter sees the
edited one; hot-patching proves the swapped code exact, not the module's view of its file.
Here a real warm server serves such an edit from its image, the ordinary run (a fresh pytest
session in a fork of the server, as the worker's shadow check runs it) disagrees, and the
shadow check records the mismatch and turns the image off; agreeing runs pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.validate.inside_server import ARGS

from swemill.validate.inside.protocol import Flags
from swemill.validate.shadow import Shadow
from swemill.validate.warm import WarmResult, WarmWorker, server_argv

LIB = 'TEXT = open(__file__).read()\n\n\ndef answer():\n    return 1\n'
TESTS = ('import lib\n\n\ndef test_text():\n    assert "return 1" in lib.TEXT\n\n\n'
         'def test_answer():\n    assert lib.answer() >= 1\n')


def test_a_disagreeing_ordinary_run_turns_the_image_off(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "test_lib.py").write_text(TESTS)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen(server_argv(sys.executable, str(tmp_path), isolated=False,
                                        flags=Flags()),
                            cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    warm = WarmWorker(proc)
    ids = ["test_lib.py::test_text", "test_lib.py::test_answer"]
    shadow = Shadow(every=2)
    try:
        assert warm.start_image(ARGS, 60).ready
        head = warm.run_image(ids, [], 60)
        assert shadow.due(head)  # the first image run is always checked
        assert shadow.compare(ids, head, warm.run([*ARGS, *ids], 60))
        assert not shadow.due(head)  # then one in two

        (tmp_path / "lib.py").write_text(LIB.replace("return 1", "return 2"))
        served = warm.run_image(ids, ["lib.py"], 60)
        cold = warm.run([*ARGS, *ids], 60)
    finally:
        warm.close()
    assert served.unservable is None and served.hotpatched == 1
    assert served.outcomes == dict.fromkeys(ids, "passed")  # the image's stale TEXT
    assert cold.outcomes == {ids[0]: "failed", ids[1]: "passed"}
    assert shadow.due(served)
    assert not shadow.compare(ids, served, cold)
    assert shadow.image_off and shadow.stats.mismatches == 1 and shadow.stats.checks == 2
    assert shadow.stats.details == [
        "test_lib.py::test_text: image passed, ordinary failed (+1 more)"]


def test_a_timed_out_run_proves_nothing_either_way() -> None:
    ok = WarmResult(exit_code=0, timed_out=False, outcomes={"t::a": "passed"})
    late = WarmResult(exit_code=-9, timed_out=True, outcomes={})
    shadow = Shadow(every=1)
    assert not shadow.due(late)
    assert shadow.due(ok) and shadow.compare(["t::a"], ok, late)
    assert shadow.stats.inconclusive == 1 and shadow.stats.checks == 0 and not shadow.image_off
    assert not Shadow(every=0).due(ok)
