"""How a bwrap command is started: held by bwrap until this process has put the sandbox in its
cgroups and rlimits, with no shell of ours in between; and how the drop names its user."""

from __future__ import annotations

import os
import time
from pathlib import Path

from swemill.sandbox import Bind, Limits, open_sandbox
from swemill.sandbox._hostuser import _file_name
from swemill.sandbox.cgroups import PREFIX, cgroup_support, leftover_groups

from .conftest import needs_bwrap, processes_matching

pytestmark = needs_bwrap


def _groups_of(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return {line.split(":", 2)[2] for line in lines if PREFIX in line}


def test_limits_reach_the_command_and_only_the_sandbox_enters_its_groups(tmp_path: Path) -> None:
    limits = Limits(timeout_s=20, file_size_mb=3, pids=64, memory_mb=512)
    marker = "297.2468"
    with open_sandbox(tmp_path, backend="bwrap", limits=limits) as sb:
        r = sb.exec("ulimit -c; ulimit -f; ulimit -Hf")
        assert r.ok and r.stdout.split() == ["0", "3072", "3072"], r  # bash counts KiB
        with sb.spawn(f"exec sleep {marker}") as sp:  # type: ignore[attr-defined]
            end = time.monotonic() + 10
            while not (found := processes_matching(marker)) and time.monotonic() < end:
                time.sleep(0.02)
            assert len(found) == 1
            inside, monitor = _groups_of(found[0]), _groups_of(sp.proc.pid)
            support = cgroup_support()
            if support.pids or support.memory:
                assert inside and all(f"{PREFIX}{os.getpid()}-" in g for g in inside)
            assert monitor == set()  # bwrap's own monitor process stays outside
    assert leftover_groups() == []


def test_a_bwrap_that_fails_before_its_child_reports_is_an_ordinary_failure(
        tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with open_sandbox(tmp_path, backend="bwrap", binds=[Bind(gone, "/mnt/gone")],
                      limits=Limits(timeout_s=20)) as sb:
        start = time.monotonic()
        r = sb.exec("echo never")
        assert time.monotonic() - start < 10
        assert r.exit_code != 0 and "never" not in r.stdout
        assert "gone" in r.stderr  # bwrap's own message names the missing source
    assert leftover_groups() == []


def test_the_drop_names_a_user_only_when_the_files_name_it_once(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0::/root:/bin/sh\n# note\nnobody:x:65534:65534::/:/bin/false\n"
                      "twice:x:700:700::/:/bin/false\nalias:x:700:700::/:/bin/false\n"
                      "1234:x:1234:1234::/:/bin/false\ndup:x:800:800::/:/bin/false\n"
                      "dup:x:801:801::/:/bin/false\n")
    assert _file_name(str(passwd), 65534) == "nobody"
    assert _file_name(str(passwd), 700) is None  # two names for one number
    assert _file_name(str(passwd), 1234) is None  # a numeric name would read as a number
    assert _file_name(str(passwd), 800) is None  # the name is not unique
    assert _file_name(str(passwd), 4242) is None
    assert _file_name(str(tmp_path / "missing"), 0) is None
