"""A venv lent to the sandbox never runs the sandbox's code on the host afterwards.

The project's own install (and the backend's answer to what it needs) runs inside the
sandbox with the venv being built lent writable; afterwards the host's uv installs the
dependencies into that same venv, and uv runs the venv's interpreter to learn its markers. So
whatever the sandbox user left there that the interpreter runs at start-up would run on the
host, as the caller (root, in a container): a ``bin/python`` replaced by a script, a changed
``pyvenv.cfg`` (its ``home`` says where the standard library is), a ``.pth`` file with an
``import`` line or a ``sitecustomize``/``usercustomize`` module in ``site-packages``.

Before such a step, :func:`seal` notes the interpreter links and ``pyvenv.cfg`` as ``uv venv``
made them; after it, :func:`restore` puts them back whatever was done to them, and moves the
start-up files (``held``) out of the venv, to a folder beside it; :func:`release` puts those
back once the host is done running uv there (a development-mode install's ``.pth`` is one).
After that the venv's interpreter runs only in the sandbox.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["START_HOOKS", "Seal", "release", "restore", "seal"]

START_HOOKS = frozenset({"sitecustomize", "usercustomize"})
"""The modules an interpreter imports at start-up by themselves."""


@dataclass(frozen=True, slots=True)
class Seal:
    """The venv's interpreter links (``bin/python*`` -> target) and ``pyvenv.cfg``."""

    links: dict[str, str]
    cfg: bytes | None


def held_dir(venv: Path) -> Path:
    return venv.parent / f".{venv.name}-held-startup"


def seal(venv: Path) -> Seal:
    links = {p.name: os.readlink(p) for p in (venv / "bin").glob("python*") if p.is_symlink()}
    cfg = venv / "pyvenv.cfg"
    return Seal(links, cfg.read_bytes() if cfg.is_file() else None)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _runs_at_startup(entry: Path) -> bool:
    """A start-up hook module, or a ``.pth`` file with an ``import`` line (a link or folder
    named ``.pth`` is moved too: nothing in it is the venv's to keep)."""
    if entry.name.split(".")[0] in START_HOOKS:
        return True
    if entry.suffix != ".pth":
        return False
    if entry.is_symlink() or not entry.is_file():
        return True
    with open(entry, "rb") as fh:
        return any(line.startswith((b"import ", b"import\t")) for line in fh)


def restore(venv: Path, sealed: Seal, *, hold: bool = True) -> list[str]:
    """Undo what the sandbox did to the interpreter links and ``pyvenv.cfg``, and (``hold``)
    move start-up files out of ``site-packages``; returns what it changed or moved."""
    changed: list[str] = []
    bin_dir = venv / "bin"
    for path in bin_dir.glob("python*"):
        if path.name not in sealed.links:
            _remove(path)
            changed.append(f"bin/{path.name} (new)")
    for name, target in sealed.links.items():
        path = bin_dir / name
        if path.is_symlink() and os.readlink(path) == target:
            continue
        _remove(path)
        path.symlink_to(target)
        changed.append(f"bin/{name}")
    cfg = venv / "pyvenv.cfg"
    if sealed.cfg is not None and (cfg.is_symlink() or not cfg.is_file()
                                   or cfg.read_bytes() != sealed.cfg):
        _remove(cfg)
        cfg.write_bytes(sealed.cfg)
        changed.append("pyvenv.cfg")
    if hold:
        for site in venv.glob("lib/python*/site-packages"):
            for entry in [*site.iterdir(), *site.glob("__pycache__/*")]:
                if _runs_at_startup(entry):
                    dest = held_dir(venv) / entry.relative_to(venv)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    _remove(dest)
                    os.rename(entry, dest)
                    changed.append(f"held {entry.relative_to(venv)}")
    return changed


def release(venv: Path) -> list[str]:
    """Put back the start-up files :func:`restore` held; the host runs nothing there after."""
    held = held_dir(venv)
    back: list[str] = []
    for site in held.glob("lib/python*/site-packages"):
        cache = site / "__pycache__"
        for entry in [*site.iterdir(), *(cache.iterdir() if cache.is_dir() else [])]:
            if entry == cache:
                continue
            dest = venv / entry.relative_to(held)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _remove(dest)
            os.rename(entry, dest)
            back.append(str(entry.relative_to(held)))
    shutil.rmtree(held, ignore_errors=True)
    return back
