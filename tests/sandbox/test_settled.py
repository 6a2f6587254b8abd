"""The sweep after a command over a plain tree reuses unchanged directories' listings: it must
still see every set-id bit and measure every byte, as the descriptor-relative sweep does."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox._hostuser import sweep
from swemill.sandbox._settled import RACY_NS, SettledSweep

from .conftest import needs_bwrap
from .test_host_privilege import _set_id_files


def _tree(root: Path) -> Path:
    for i in range(12):
        d = root / f"pkg{i % 3}" / f"sub{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i}.py").write_bytes(b"x" * (i * 1500))
    return root


def _settle() -> None:
    time.sleep(RACY_NS / 1e9 * 1.5)  # listings taken from now on may be kept


def _agrees(settled: SettledSweep, root: Path) -> tuple[int, bool]:
    used, special = settled()
    assert used == sweep(root)  # sweep() also clears what it finds, so it runs second
    return used, special


def test_cached_listings_still_see_every_change(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    settled = SettledSweep(root)
    assert _agrees(settled, root)[1] is False  # young directories: nothing kept yet
    _settle()
    base = _agrees(settled, root)[0]  # listings kept now
    assert settled() == (base, False)

    (root / "pkg1" / "sub0" / "m4.py").chmod(0o4755)  # the file changes, not its directory
    assert settled()[1] is True
    sweep(root)
    assert settled() == (base, False)

    (root / "pkg2" / "sub1" / "new.bin").write_bytes(b"y" * 70_000)  # an entry in a kept dir
    grown = _agrees(settled, root)[0]
    assert grown > base

    os.rename(root / "pkg0" / "sub0", tmp_path / "moved")  # a kept directory goes away
    (root / "pkg0" / "sub0").symlink_to("/usr/bin")  # and a link to the host takes its name
    assert _agrees(settled, root)[0] < grown

    (root / "pkg0" / "sub0").unlink()
    os.rename(tmp_path / "moved", root / "pkg0" / "sub0")  # back, same inode, new ctime
    (root / "pkg0" / "sub0" / "m0.py").chmod(0o2755)
    assert settled()[1] is True  # the moved-back directory is listed afresh


@needs_bwrap
def test_commands_in_a_plain_tree_leave_no_set_id_bit_and_meet_the_cap(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "ws")
    with open_sandbox(ws, backend="bwrap", limits=Limits(timeout_s=20, disk_mb=2)) as sb:
        assert sb.exec("true").ok
        _settle()
        assert sb.exec("true").ok  # the final sweep keeps its listings
        r = sb.exec("chmod 4755 pkg1/sub0/m4.py && chmod 2755 pkg2/sub1 && "
                    "stat -c %A pkg1/sub0/m4.py")
        assert r.ok and r.stdout.startswith("-rws"), r
        assert _set_id_files(ws) == []
        _settle()
        assert sb.exec("true").ok
        r = sb.exec("head -c 3000000 /dev/zero > pkg0/sub1/big")  # into a kept directory
        assert r.killed_reason == "disk" and not r.ok
    mode = (ws / "pkg2" / "sub1").stat().st_mode
    assert not mode & (stat.S_ISUID | stat.S_ISGID)
