"""Resolve a SOURCE (``sample``, a directory, a git URL, ``pypi:NAME==VER``) to a working copy.

Every working copy is a git repository in the cache, so later stages (pr-mirror, scrub) can
rely on git. Working copies are cached by content (directory hash, URL + ref, or the sdist's
verified sha256) and a second resolve of the same source needs no network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from swemill.core.errors import ConfigError, SourceError
from swemill.core.git import git as run_git_checked
from swemill.repo.cache import atomic_dir, cache_root, entry_lock, slugify, tree_hash
from swemill.repo.pypi import fetch_sdist, normalize_name

__all__ = ["ResolvedSource", "SourceKind", "resolve_source", "git_commit_all", "is_portable",
           "require_portable", "source_date"]

SourceKind = Literal["sample", "local", "git", "pypi"]

# A fixed identity and date make the commit of an unpacked sdist the same on every machine.
_COPY_IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".tox", ".nox", ".venv"
)
_GIT_URL = re.compile(r"^(https?://|git://|ssh://|file://|git@[^:]+:)")


@dataclass(slots=True, frozen=True)
class ResolvedSource:
    """A source's working copy in the cache."""

    spec: str
    path: Path
    repo: str
    """Normalised name: ``toolz`` for PyPI, ``owner/name`` for git URLs, the dir name else."""
    commit: str
    """``git rev-parse HEAD`` of the working copy."""
    kind: SourceKind
    from_cache: bool = False
    """True when the working copy was already in the cache (nothing fetched or copied)."""


def is_portable(spec: str) -> bool:
    """Whether another machine can fetch ``spec`` by itself: ``sample``, ``pypi:`` and git
    URLs can; a local directory (or a ``file://`` URL) exists only where it was given."""
    spec = spec.strip()
    return (spec == "sample" or spec.startswith("pypi:")
            or (bool(_GIT_URL.match(spec)) and not spec.startswith("file://")))


def require_portable(spec: str, what: str) -> None:
    """A :class:`ConfigError` naming ``what`` unless another machine can fetch ``spec``."""
    if not is_portable(spec):
        raise ConfigError(f"{what}: AWS Batch workers cannot fetch {spec!r} (a local directory "
                          "exists only here): give a git URL, pypi:NAME==VERSION or sample")


def resolve_source(spec: str, *, cache: Path | None = None) -> ResolvedSource:
    """Resolve ``spec`` to a cached git working copy, fetching or copying it if needed."""
    root = cache_root(cache)
    spec = spec.strip()
    if not spec:
        raise SourceError("empty source: give a directory, a git URL, pypi:NAME==VER or 'sample'")
    if spec == "sample":
        return _resolve_sample(root)
    if spec.startswith("pypi:"):
        return _resolve_pypi(spec, root)
    if _GIT_URL.match(spec) or _is_bare_repository(Path(spec).expanduser()):
        return _resolve_git(spec, root)
    return _resolve_local(spec, root)


def _is_bare_repository(path: Path) -> bool:
    """A bare git repository (``git clone --bare``, a mirror): its files are git's own, not
    a working tree, so it is cloned like a git URL rather than copied."""
    if not ((path / "HEAD").is_file() and (path / "objects").is_dir()
            and (path / "refs").is_dir()):
        return False
    try:
        return git(["rev-parse", "--is-bare-repository"], path) == "true"
    except SourceError:
        return False


def git(args: list[str], cwd: Path, *, timeout: float = 600) -> str:
    """:func:`swemill.core.git.git` whose failure is a one-line :class:`SourceError`."""
    return run_git_checked(args, cwd, error=SourceError, timeout=timeout)


def git_commit_all(path: Path, message: str, *, ignored: bool = False) -> str:
    """Make ``path`` a git repository if needed, commit everything, return HEAD.
    ``ignored``: files the tree's own ``.gitignore`` names are committed too."""
    if not (path / ".git").exists():
        git(["init", "-q", "-b", "main"], path)
    git(["add", "-A", *(["-f"] if ignored else [])], path)
    if git(["status", "--porcelain"], path) or not _has_head(path):
        git(["commit", "-q", "--allow-empty", "-m", message], path)
    return git(["rev-parse", "HEAD"], path)


def _has_head(path: Path) -> bool:
    try:
        git(["rev-parse", "--verify", "-q", "HEAD"], path)
    except SourceError:
        return False
    return True


def _cached(spec: str, final: Path, repo: str, kind: SourceKind) -> ResolvedSource:
    commit = git(["rev-parse", "HEAD"], final)
    return ResolvedSource(spec, final, repo, commit, kind, from_cache=True)


def _resolve_pypi(spec: str, root: Path) -> ResolvedSource:
    m = re.fullmatch(r"pypi:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)", spec)
    if not m:
        raise SourceError(f"bad PyPI source {spec!r}: expected pypi:NAME==VERSION")
    name, version = normalize_name(m.group(1)), m.group(2)
    final = root / "sources" / "pypi" / f"{name}-{version}"
    with entry_lock(root, f"pypi-{name}-{version}"):
        if (final / ".git").is_dir():
            return _cached(spec, final, name, "pypi")
        with atomic_dir(final) as tmp:
            fetch_sdist(name, version, tmp)
            # everything the sdist ships is the project, also what its .gitignore names (built
            # locale catalogues, a generated _version.py): left out of the commit, it was
            # missing from every task's snapshot while the baseline's tests had it
            commit = git_commit_all(tmp, f"{name} {version} (sdist from PyPI)", ignored=True)
    return ResolvedSource(spec, final, name, commit, "pypi")


def _split_ref(spec: str) -> tuple[str, str | None]:
    head, sep, tail = spec.rpartition("@")
    if sep and head and tail and "/" not in tail and ":" not in tail and "/" in head:
        return head, tail
    return spec, None


def repo_name_from_url(url: str) -> str:
    """``https://github.com/Owner/Name.git`` -> ``owner/name``."""
    path = re.sub(r"^[a-z+]+://[^/]*/|^git@[^:]+:", "", url.rstrip("/"))
    path = re.sub(r"\.git$", "", path)
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:]).lower() if parts else "repo"


def is_local_url(url: str) -> bool:
    """Whether a git URL names a path on this machine (``/srv/mirror/x.git``, ``file://``):
    its directories say nothing of the repository's owner or name."""
    return url.startswith("file://") or not re.match(
        r"^[a-z][a-z0-9+.-]*://|^[^/:@]+@[^:/]+:", url)


def _tree_name(url: str, tree: Path, fallback: str) -> str:
    """``owner/name`` from a remote URL; for no remote or one that is a local path, the
    project's metadata name in ``tree`` (never the path's directories), else ``fallback``."""
    if url and not is_local_url(url):
        return repo_name_from_url(url)
    name = _metadata_name(tree)
    return normalize_name(name) if name else fallback


def _clone_name(url: str, tree: Path) -> str:
    return _tree_name(url, tree, repo_name_from_url(url).rsplit("/", 1)[-1])


def _resolve_git(spec: str, root: Path) -> ResolvedSource:
    url, ref = _split_ref(spec)
    local = is_local_url(url)
    name = "" if local else repo_name_from_url(url)  # a local clone's is read from its files
    key = hashlib.sha256(f"{url}\0{ref or ''}".encode()).hexdigest()[:16]
    final = root / "sources" / "git" / f"{slugify(name) if name else 'local'}-{key}"
    with entry_lock(root, f"git-{key}"):
        if (final / ".git").is_dir():
            return _cached(spec, final, name or _clone_name(url, final), "git")
        with atomic_dir(final) as tmp:
            try:
                git(["clone", "-q", "--no-hardlinks", url, str(tmp / "w")], root)
            except SourceError as exc:
                raise SourceError(f"cannot clone {url}: {exc}") from None
            work = tmp / "w"
            if ref:
                git(["checkout", "-q", ref], work)
            for child in work.iterdir():
                child.rename(tmp / child.name)
            work.rmdir()
            commit = git(["rev-parse", "HEAD"], tmp)
            name = name or _clone_name(url, tmp)
    return ResolvedSource(spec, final, name, commit, "git")


def _metadata_name(path: Path) -> str | None:
    """The project's own name: ``[project]`` / ``[tool.poetry]`` in pyproject.toml, then
    ``[metadata]`` in setup.cfg, then a literal ``name=`` in setup.py."""
    import configparser
    import tomllib

    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        data = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))
        for table in (data.get("project"), data.get("tool", {}).get("poetry")):
            if isinstance(table, dict) and isinstance(table.get("name"), str):
                return table["name"]
    cfg = configparser.ConfigParser(interpolation=None)
    with contextlib.suppress(OSError, configparser.Error, UnicodeDecodeError):
        cfg.read(path / "setup.cfg", encoding="utf-8")
        if cfg.has_option("metadata", "name"):
            return cfg.get("metadata", "name").strip() or None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        m = re.search(r"""\bname\s*=\s*["']([A-Za-z0-9._-]+)["']""",
                      (path / "setup.py").read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    return None


def _local_name(path: Path) -> str:
    """``owner/name`` from the git remote (not a local path's directories), else the
    project's metadata name, else the directory's name."""
    url = ""
    if (path / ".git").exists():
        with contextlib.suppress(SourceError):
            url = git(["config", "--get", "remote.origin.url"], path)
    return _tree_name(url, path, path.name.lower() or "repo")


def _resolve_local(spec: str, root: Path, kind: SourceKind = "local") -> ResolvedSource:
    src = Path(spec).expanduser()
    if not src.exists():
        raise SourceError(f"no such directory: {spec}")
    if not src.is_dir():
        raise SourceError(f"not a directory: {spec}")
    src = src.resolve()
    name = _local_name(src)
    head = git(["rev-parse", "HEAD"], src) if _has_head(src) else ""
    key = hashlib.sha256(f"{tree_hash(src)}\0{head}".encode()).hexdigest()[:16]
    final = root / "sources" / kind / f"{slugify(name)}-{key}"
    with entry_lock(root, f"{kind}-{key}"):
        if (final / ".git").is_dir():
            return _cached(spec, final, name, kind)
        with atomic_dir(final) as tmp:
            shutil.copytree(src, tmp, symlinks=True, ignore=_COPY_IGNORE, dirs_exist_ok=True)
            # Uncommitted edits become one snapshot commit so the commit names the content.
            commit = git_commit_all(tmp, f"{name}: working tree snapshot")
    return ResolvedSource(spec, final, name, commit, kind)


_FIXED_DATE = 946684800  # GIT_ENV's commit date: a commit swemill made, not the project
_EPOCH_1980 = 315532800  # zip's earliest date: an older mtime was never set by anyone


def source_date(path: Path) -> datetime | None:
    """When the working copy at ``path`` was made: its newest commit's date, or for a tree
    swemill committed itself (an unpacked sdist, a local snapshot) the newest file's mtime,
    which an sdist's archive keeps from the day it was built."""
    with contextlib.suppress(SourceError):
        for stamp in git(["log", "--max-count=20", "--format=%ct", "HEAD"], path).split():
            if int(stamp) != _FIXED_DATE:
                return datetime.fromtimestamp(int(stamp), UTC)
    newest = 0.0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
    return datetime.fromtimestamp(newest, UTC) if newest > _EPOCH_1980 else None


def _resolve_sample(root: Path) -> ResolvedSource:
    """The bundled sample, with its short history of fixes (pr-mirror reads it)."""
    try:
        from swemill.repo.sample import SAMPLE_REPO, materialize_sample, sample_files
    except ImportError as exc:
        raise SourceError("the bundled sample repository is not part of this install") from exc
    content = json.dumps(sample_files(), sort_keys=True).encode()
    key = hashlib.sha256(content).hexdigest()[:16]
    final = root / "sources" / "sample" / f"sample-{key}"
    with entry_lock(root, f"sample-{key}"):
        if (final / ".git").is_dir():
            return _cached("sample", final, SAMPLE_REPO, "sample")
        with atomic_dir(final) as tmp:
            materialize_sample(tmp, history=True)
            commit = git(["rev-parse", "HEAD"], tmp)
    return ResolvedSource("sample", final, SAMPLE_REPO, commit, "sample")
