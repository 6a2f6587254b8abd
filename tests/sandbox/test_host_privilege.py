"""Sandboxed code holds no host privilege: judged from the host, through the CLI a user runs.

Each test is one hole the sandbox once had: files written inside owned by host root, global
sysctls writable, ``/etc/shadow`` readable, a setuid file left on the host disk, no cap on
what a workspace may hold.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox._hostuser import DEFAULT_UID, sandbox_uid
from swemill.sandbox.fork import overlay_usable

from .conftest import needs_bwrap

SWEMILL = str(Path(sys.executable).with_name("swemill"))
pytestmark = needs_bwrap


def _cli(ws: Path, script: str, *opts: str, timeout: float = 60) -> dict[str, object]:
    p = subprocess.run([SWEMILL, "sandbox", "run", "--json", "--workspace", str(ws), *opts,
                        "--", "bash", "-c", script], capture_output=True, text=True,
                       timeout=timeout)
    out: dict[str, object] = json.loads(p.stdout)
    return out


def test_files_written_inside_are_not_owned_by_host_root(tmp_path: Path) -> None:
    out = _cli(tmp_path, "echo x > made; mkdir dir; echo y > dir/inner; id -u")
    assert out["exit_code"] == 0, out
    for rel in ("made", "dir", "dir/inner"):
        owner = (tmp_path / rel).lstat().st_uid
        assert owner != 0, f"{rel} is owned by host root"
        if os.geteuid() == 0:
            assert owner == DEFAULT_UID
        else:
            assert owner == os.geteuid()


def test_no_global_sysctl_is_writable(tmp_path: Path) -> None:
    # each readable knob gets its own current value back: harmless even if a write went through
    script = ("n=0; for f in $(find /proc/sys -type f 2>/dev/null); do "
              "v=$(cat \"$f\" 2>/dev/null) || continue; "
              "if printf '%s\\n' \"$v\" 2>/dev/null > \"$f\"; then echo \"written: $f\"; fi; "
              "n=$((n+1)); done; echo \"checked $n\"")
    out = _cli(tmp_path, script)
    stdout = str(out["stdout"])
    assert "written:" not in stdout, stdout[:2000]
    assert int(stdout.split("checked ")[-1]) > 100  # the loop really ran over /proc/sys


def test_shadow_is_unreadable(tmp_path: Path) -> None:
    if not Path("/etc/shadow").exists():
        pytest.skip("no /etc/shadow on this host")
    out = _cli(tmp_path, "cat /etc/shadow")
    assert out["exit_code"] != 0 and out["stdout"] == ""
    assert "Permission denied" in str(out["stderr"])


def _set_id_files(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


SET_ID_SCRIPT = ("cp /bin/true t; chmod 4755 t; cp /bin/true g; chmod 2755 g; mkdir d; "
                 "chmod 2775 d; python3 -c \"import os; os.close(os.open('o', "
                 "os.O_CREAT | os.O_WRONLY, 0o6755))\"; ls -l t g o; ls -ld d")


def test_set_id_bits_set_inside_never_reach_the_host(tmp_path: Path) -> None:
    out = _cli(tmp_path, SET_ID_SCRIPT)
    assert out["exit_code"] == 0, out
    assert "-rws" in str(out["stdout"])  # the bit was really set inside
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "g", "o", "t"]
    assert _set_id_files(tmp_path) == []


def test_set_id_bits_in_a_fork_never_reach_its_layers(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open_sandbox(ws, backend="bwrap") as sb, sb.fork() as child:
        assert child.exec(SET_ID_SCRIPT).exit_code == 0
        assert _set_id_files(child.workspace) == []
        with child.fork() as grandchild:  # the upper was frozen into a shared layer
            assert grandchild.exec("test -u t || test -g g").exit_code != 0


def test_a_long_running_process_leaves_no_set_id_file(tmp_path: Path) -> None:
    with open_sandbox(tmp_path, backend="bwrap") as sb, \
            sb.spawn("cp /bin/true t; chmod 4755 t; echo ready; exec cat") as proc:
        assert proc.proc.stdout is not None and proc.proc.stdout.readline() == b"ready\n"
    assert _set_id_files(tmp_path) == []


@pytest.mark.skipif(sandbox_uid() is None, reason="only root drops to the sandbox uid")
def test_host_writes_are_handed_to_the_sandbox_user(tmp_path: Path) -> None:
    """Files the host (root) puts in a workspace or a fork stay writable inside."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "old.txt").write_text("old\n")
    with open_sandbox(ws, backend="bwrap") as sb:
        sb.write_file("new/made.txt", "new\n")
        (sb.workspace / "by_path.txt").write_text("path\n")
        assert sb.exec("echo more >> old.txt && echo more >> new/made.txt && "
                       "echo more >> by_path.txt && touch new/x").ok
        with sb.fork() as child:
            (child.workspace / "host.txt").write_text("host\n")
            assert child.exec("echo more >> host.txt && echo more >> old.txt").ok
            with child.fork() as grandchild:  # host.txt now sits in a frozen layer
                assert grandchild.exec("echo more >> host.txt && rm old.txt").ok


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_writer_is_killed_at_the_disk_cap(tmp_path: Path) -> None:
    """A writer that would stop itself at 300 MB (or after 20 s) is killed near 50 MB. It
    pauses between files, so a loaded machine's slower polls still see it cross the cap (a
    writer done before the first poll is only caught by the final check, after the fact)."""
    writer = ("i=0; while [ $i -lt 30 ] && [ $SECONDS -lt 20 ]; do "
              "head -c 10000000 /dev/zero > f$i; i=$((i+1)); sleep 0.1; done; echo finished")
    out = _cli(tmp_path, writer, "--disk-mb", "50", timeout=90)
    assert out["killed_reason"] == "disk", out
    assert "finished" not in str(out["stdout"])
    used = sum(p.stat().st_blocks * 512 for p in tmp_path.iterdir())
    assert used < 150 << 20, f"{used >> 20} MB landed past a 50 MB cap"


@pytest.mark.skipif(not overlay_usable(), reason="a fork is a full copy without overlayfs")
def test_the_disk_cap_counts_a_forks_own_writes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big").write_bytes(b"x" * (3 << 20))  # the snapshot's size is not the fork's
    with open_sandbox(ws, backend="bwrap", limits=Limits(disk_mb=2)) as sb, sb.fork() as child:
        assert child.exec("head -c 1000000 /dev/zero > one").ok
        r = child.exec("head -c 3000000 /dev/zero > two")
        assert r.killed_reason == "disk" and not r.ok


@pytest.mark.skipif(sandbox_uid() is None, reason="only root drops to the sandbox uid")
def test_host_git_keeps_working_and_its_config_stays_out_of_reach(tmp_path: Path) -> None:
    """Host-side git (as root) runs in workspaces; their ``.git`` must not be the sandbox's."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(ws)], check=True)
    (ws / "a.txt").write_text("a\n")
    subprocess.run([*git, "-C", str(ws), "add", "a.txt"], check=True)
    subprocess.run([*git, "-C", str(ws), "commit", "-qm", "a"], check=True)
    with open_sandbox(ws, backend="bwrap") as sb, sb.fork() as child:
        for box in (sb, child):
            r = box.exec("echo changed > a.txt; echo new > b.txt; "
                         "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; "
                         "mv .git moved || rm -rf .git")
            assert "Permission denied" in r.stderr
            status = subprocess.run(["git", "-C", str(box.workspace), "status", "--short"],
                                    capture_output=True, text=True)
            assert status.returncode == 0, status.stderr
            assert status.stdout.split() == ["M", "a.txt", "??", "b.txt"]
            assert "fsmonitor" not in (box.workspace / ".git" / "config").read_text()
            # git inside reads the root-owned repository (agents run git status / diff)
            inside = box.exec("git status --short && git diff --stat && git ls-files")
            assert inside.exit_code == 0, inside.stderr
            assert "a.txt | 2 +-" in inside.stdout and "?? b.txt" in inside.stdout


def test_unreadable_directories_do_not_break_the_sweep(tmp_path: Path) -> None:
    with open_sandbox(tmp_path, backend="bwrap") as sb:
        r = sb.exec("mkdir -p a/b c && cp /bin/true a/b/t && chmod 4755 a/b/t && "
                    "chmod 000 a && chmod 400 c && echo done")
        assert r.ok and r.stdout == "done\n", r
        assert sb.exec("chmod 755 a c").ok
    if os.geteuid() == 0:  # root sees through the modes: the bit was cleared
        assert _set_id_files(tmp_path) == []


_STATUS = ("grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "
           "/proc/self/status")


def _status(text: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


@pytest.mark.parametrize("dropper", ["compiled", "setpriv"])
def test_the_dropped_command_holds_no_privilege_left(tmp_path: Path, dropper: str) -> None:
    """As root both droppers (the compiled one and the setpriv fallback) leave the command
    the sandbox uid, no group, no capability in any set, and no way to gain one."""
    if os.geteuid() != 0:
        pytest.skip("only root drops privileges (an ordinary user is mapped to itself)")
    if dropper == "compiled" and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: swemill uses setpriv")
    env = {**os.environ, "SWEMILL_DROPPER": "setpriv" if dropper == "setpriv" else ""}
    p = subprocess.run([SWEMILL, "sandbox", "run", "--json", "--workspace", str(tmp_path), "--",
                        "bash", "-c", f"{_STATUS}; ls /opt/swemill 2>&1; true"],
                       capture_output=True, text=True, timeout=60, env=env)
    out = json.loads(p.stdout)
    assert out["exit_code"] == 0, out
    status = _status(str(out["stdout"]))
    uid = str(sandbox_uid())
    assert status["Uid"].split() == [uid] * 4 and status["Gid"].split() == [uid] * 4
    assert status["Groups"] == ""
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"] == "1"
    assert ("drop" in str(out["stdout"])) == (dropper == "compiled")


def test_the_dropper_is_not_taken_from_a_cache_others_can_write(tmp_path: Path) -> None:
    """A cache directory another user could write to (no sticky bit) would let them swap the
    program that runs as root in every sandbox: swemill falls back to setpriv instead."""
    if os.geteuid() != 0:
        pytest.skip("the dropper is only used as root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code = ("from swemill.sandbox._dropper import dropper; "
            "from swemill.sandbox._hostuser import drop_argv; print(dropper(), drop_argv()[0])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SWEMILL_CACHE": str(shared / "cache")})
    assert p.returncode == 0, p.stderr
    found, prefix = p.stdout.split()
    assert found == "None" and prefix.endswith("setpriv")
    private = tmp_path / "private"  # the same under a directory only root can write: compiled
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SWEMILL_CACHE": str(private)})
    assert p.returncode == 0, p.stderr
    found, prefix = p.stdout.split()
    if shutil.which("cc") or shutil.which("gcc"):
        assert found.startswith(str(private / "bin")) and prefix == "/opt/swemill/drop"
        assert not Path(found).stat().st_mode & 0o022
