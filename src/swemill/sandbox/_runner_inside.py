"""The command runner that lives inside a session's sandbox (see :mod:`._runner`).

This file is run as ``python -I -S -c SOURCE FD`` by the sandbox user inside bwrap, so it
imports only the standard library (the low-level modules: the runner starts in ~30 ms) and
nothing of swemill. ``FD`` is its end of a ``SOCK_SEQPACKET`` socket pair; the host holds the
other end. No command can reach that socket: it is close-on-exec and closed in every child
before anything runs, and the runner makes itself non-dumpable, so a process of the same uid
can neither ptrace it nor open its descriptors through ``/proc``.

Messages (fields are NUL-separated bytes):

- host -> runner ``R``: ``R cwd rlimits N argv[0..N) env...`` with three descriptors (the
  command's stdin, stdout and stderr, made by the host); ``rlimits`` is ``resource=value``
  pairs joined by commas. The runner forks; the child starts a session of its own, takes the
  three descriptors, sets the rlimits (the host may not: it lacks ``CAP_SYS_RESOURCE`` over
  the sandbox uid in a container) and waits on a pipe before it runs anything.
- runner -> host ``S``: ``S pid`` with a pidfd of the child and the write end of that pipe.
  The host moves the child into the command's cgroups, then writes one byte to
  let it ``exec`` (it closes the pipe unwritten to abort; the child then exits 126).
- runner -> host ``X``: ``X status`` (the raw wait status) once the child has exited.
- host -> runner ``T``: tidy up after a command whose processes the host has all killed:
  ``/tmp`` and ``/dev/shm`` are emptied and System V IPC objects removed, so nothing a command
  leaves in memory outlives it (as when each command had a sandbox of its own). The sandbox's
  own mount points there (a bind of an environment kept under the host's ``/tmp``) and the
  directories leading to them stay, never walked (walking the sample's bound 26 MB virtual
  environment at every command cost ~18 ms of CPU a command, 8x the command; a writable
  bind would have lost its files).
- runner -> host ``E``: ``E message`` when a request could not be carried out.
"""

import _signal
import _socket
import array
import ctypes
import os
import resource
import stat
import sys

PR_SET_DUMPABLE = 4
IPC_RMID = 0
SCRATCH = ("/tmp", "/dev/shm")
SYSV = (("/proc/sysvipc/shm", "shmctl"), ("/proc/sysvipc/sem", "semctl"),
        ("/proc/sysvipc/msg", "msgctl"))
QUIET = "/dev/null"
MAX_REQUEST = 1 << 18  # the host sends less (see _runner.MAX_REQUEST)


def send(sock: _socket.socket, data: bytes, fds: list[int] | tuple[()] = ()) -> None:
    anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
    sock.sendmsg([data], anc if fds else [])


def receive(sock: _socket.socket) -> tuple[bytes, list[int]]:
    data, anc, _, _ = sock.recvmsg(MAX_REQUEST, _socket.CMSG_SPACE(3 * 4))
    fds = array.array("i")
    for level, kind, raw in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(raw[:len(raw) - len(raw) % fds.itemsize])
    return data, list(fds)


def child(fds: list[int], go_r: int, cwd: bytes, rlimits: bytes, argv: list[bytes],
          env: dict[bytes, bytes]) -> None:
    """In the forked child: take the command's descriptors, wait for the host, exec."""
    code = 126
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, go_r)
        os.closerange(go_r + 1, 1 << 20)  # the socket and everything else of the runner
        for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; a command must not
            _signal.signal(sig, _signal.SIG_DFL)
        for pair in filter(None, rlimits.split(b",")):
            res, value = map(int, pair.split(b"="))
            hard = resource.getrlimit(res)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (value, value))
        if os.read(go_r, 1) != b"g":
            os._exit(126)  # the host aborted the start
        os.close(go_r)
        os.chdir(cwd)
        code = 127
        execvpe(argv, env)
    except BaseException as exc:  # report like a shell would, then leave without cleanup
        try:
            name = argv[0].decode(errors="replace") if argv else ""
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            os.write(2, f"swemill-runner: {name}: {why}\n".encode())
        finally:
            os._exit(code)


def execvpe(argv: list[bytes], env: dict[bytes, bytes]) -> None:
    """``os.execvpe`` without its warnings machinery: in a forked child every module import
    and object touched costs copied pages (measured: ~1.3 ms of CPU a command)."""
    if b"/" in argv[0]:
        os.execve(argv[0], argv, env)
    denied: OSError | None = None
    for where in env.get(b"PATH", b"/usr/bin:/bin").split(b":"):
        try:
            os.execve((where or b".") + b"/" + argv[0], argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:  # as execvp: remembered, the search goes on
            denied = exc
    raise denied or FileNotFoundError(2, "No such file or directory")


def start(sock: _socket.socket, data: bytes, fds: list[int]) -> None:
    """Carry out an ``R`` request: fork the command, hand its pidfd to the host, wait."""
    fields = data[1:].split(b"\0")
    cwd, rlimits, n = fields[0], fields[1], int(fields[2])
    argv = fields[3:3 + n]
    env = dict(kv.split(b"=", 1) for kv in fields[3 + n:] if b"=" in kv)
    if len(fds) != 3 or not argv:
        for fd in fds:
            os.close(fd)
        send(sock, b"Ebad request")
        return
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(fds, go_r, cwd, rlimits, argv, env)
    os.close(go_r)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    try:
        send(sock, b"S%d" % pid, [pidfd, go_w])
    finally:
        os.close(pidfd)
        os.close(go_w)
    _, status = os.waitpid(pid, 0)
    send(sock, b"X%d" % status)


def shell(*argv: str) -> int:
    """Run a system tool quietly and wait for it."""
    actions = [(os.POSIX_SPAWN_OPEN, fd, QUIET, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        pid = os.posix_spawnp(argv[0], argv, {"PATH": "/usr/bin:/bin"}, file_actions=actions)
    except OSError:
        return 1
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def tidy(libc: ctypes.CDLL, kept: dict[str, bool]) -> None:
    """Empty the scratch directories and remove System V IPC objects (see the docstring).
    ``kept``: the sandbox's mount points in them (True) and the directories leading there
    (False), which stay: a bind is never walked or emptied."""
    left = [p for top in SCRATCH for p in _doomed(top, kept)]
    if left and shell("rm", "-rf", "--one-file-system", "--", *left) != 0:
        # a directory the command made unreadable or unwritable: its owner can reopen it
        # (symbolic links are left out: chmod would follow them)
        dirs = [p for p in left if stat.S_ISDIR(_mode(p))]
        if dirs:
            shell("chmod", "-R", "u+rwx", "--", *dirs)
        shell("rm", "-rf", "--one-file-system", "--", *left)
    for table, call in SYSV:
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            ident = int(row.split()[1])
            if call == "semctl":
                libc.semctl(ident, 0, IPC_RMID)
            else:
                getattr(libc, call)(ident, IPC_RMID, None)


def _doomed(top: str, kept: dict[str, bool]) -> list[str]:
    """What a command left under ``top``: every entry but kept ones, looked into where they
    only lead to a mount point."""
    found = []
    for name in _names(top):
        path = top + "/" + name
        if path not in kept:
            found.append(path)
        elif not kept[path]:
            found.extend(_doomed(path, kept))
    return found


def _unescape(field: bytes) -> str:
    """A mount point as ``/proc/self/mountinfo`` writes it (octal escapes such as ``\\040``)."""
    head, *rest = field.split(b"\\")
    raw = head + b"".join(bytes([int(part[:3], 8)]) + part[3:] for part in rest)
    return os.fsdecode(raw)


def mounts_in_scratch() -> dict[str, bool]:
    """The mount points under the scratch directories (True) and the directories between
    them and a scratch directory (False), as the sandbox was built."""
    kept: dict[str, bool] = {}
    with open("/proc/self/mountinfo", "rb") as fh:
        points = [_unescape(line.split()[4]) for line in fh if len(line.split()) > 4]
    for point in points:
        top = next((t for t in SCRATCH if point.startswith(t + "/")), None)
        if top is None:
            continue
        kept[point] = True
        parent = os.path.dirname(point)
        while parent != top:
            kept.setdefault(parent, False)
            parent = os.path.dirname(parent)
    return kept


def _names(top: str) -> list[str]:
    try:
        return os.listdir(top)
    except OSError:
        return []


def _mode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def main() -> None:
    sock = _socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(sock.fileno(), False)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        send(sock, b"Ecannot make the runner non-dumpable")
        return
    kept = mounts_in_scratch()
    send(sock, b"Sready")
    while True:
        data, fds = receive(sock)
        if not data:
            return  # the host closed its end: the session is over
        if data[:1] == b"R":
            start(sock, data, fds)
            continue
        for fd in fds:
            os.close(fd)
        if data[:1] == b"T":
            tidy(libc, kept)


if __name__ == "__main__":
    main()
