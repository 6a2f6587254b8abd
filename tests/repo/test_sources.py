"""Sources resolve to cached git working copies; a second resolve is offline; bad input is one
clear SourceError and leaves nothing in the cache."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from swemill.core.errors import SourceError
from swemill.repo.sources import resolve_source


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def leftovers(cache: Path) -> list[str]:
    """Anything in the cache that looks like an entry: there must be none after a failure."""
    root = cache / "sources"
    if not root.exists():
        return []
    return sorted(p.name for p in root.rglob("*")
                  if p.parent.parent == root or p.name.startswith(".tmp"))


def make_tree(root: Path, body: str = "x = 1\n") -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(body)
    (root / "tests").mkdir()
    (root / "tests" / "test_pkg.py").write_text("def test_x():\n    assert True\n")
    return root


def test_local_dir_is_copied_committed_and_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    src = make_tree(tmp_path / "Proj")
    first = resolve_source(str(src), cache=cache)
    assert first.kind == "local" and first.repo == "proj" and not first.from_cache
    assert first.path.is_relative_to(cache) and (first.path / ".git").is_dir()
    assert git(first.path, "rev-parse", "HEAD") == first.commit
    assert git(first.path, "status", "--porcelain") == ""
    again = resolve_source(str(src), cache=cache)
    assert again.from_cache and again.path == first.path and again.commit == first.commit
    (src / "pkg" / "__init__.py").write_text("x = 2\n")
    changed = resolve_source(str(src), cache=cache)
    assert changed.path != first.path and changed.commit != first.commit
    # the same content in another cache gives the same commit: the identity is fixed
    assert resolve_source(str(src), cache=tmp_path / "other").commit == changed.commit


def test_local_git_repo_keeps_history_and_snapshots_edits(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "repo")
    git(src, "init", "-q", "-b", "main")
    git(src, "remote", "add", "origin", "https://github.com/Some-Owner/Some.Repo.git")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "first")
    head = git(src, "rev-parse", "HEAD")
    clean = resolve_source(str(src), cache=tmp_path / "c")
    assert clean.commit == head and clean.repo == "some-owner/some.repo"
    (src / "pkg" / "__init__.py").write_text("x = 3\n")
    dirty = resolve_source(str(src), cache=tmp_path / "c")
    assert dirty.commit != head
    assert git(dirty.path, "rev-parse", "HEAD~1") == head
    assert (dirty.path / "pkg" / "__init__.py").read_text() == "x = 3\n"


@pytest.mark.parametrize("bad", ["does/not/exist", "file"])
def test_missing_or_non_directory_is_one_clear_error(tmp_path: Path, bad: str) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SourceError, match="no such directory|not a directory"):
        resolve_source(str(tmp_path / bad), cache=tmp_path / "c")
    assert leftovers(tmp_path / "c") == []


def test_git_url_with_ref_and_offline_reuse(tmp_path: Path) -> None:
    origin = make_tree(tmp_path / "origin")
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "one")
    git(origin, "tag", "v1")
    tagged = git(origin, "rev-parse", "HEAD")
    (origin / "pkg" / "__init__.py").write_text("x = 9\n")
    git(origin, "commit", "-qam", "two")
    url = f"file://{origin}"
    head = resolve_source(url, cache=tmp_path / "c")
    assert head.kind == "git" and head.commit == git(origin, "rev-parse", "HEAD")
    at_tag = resolve_source(f"{url}@v1", cache=tmp_path / "c")
    assert at_tag.commit == tagged and at_tag.path != head.path
    git(origin, "tag", "-d", "v1")  # the cached copy no longer needs the origin
    assert resolve_source(f"{url}@v1", cache=tmp_path / "c").from_cache


def test_bad_git_url_is_one_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot clone") as err:
        resolve_source(f"file://{tmp_path}/nope.git", cache=tmp_path / "c")
    assert "\n" not in str(err.value)
    assert leftovers(tmp_path / "c") == []


def sdist_bytes(name: str, version: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel, text in {"pyproject.toml": f"[project]\nname = '{name}'\nversion = '{version}'\n",
                          f"{name}/__init__.py": "VALUE = 1\n",
                          ".gitignore": "_version.py\n",
                          f"{name}/_version.py": f"version = '{version}'\n",
                          "tests/test_it.py": "def test_it():\n    assert True\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """A PyPI-shaped Simple API on loopback serving one sdist, with a request counter."""
    blob = sdist_bytes("demo_pkg", "1.0")
    state: dict[str, object] = {"sha": hashlib.sha256(blob).hexdigest(), "hits": 0, "fail": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            state["hits"] = int(state["hits"]) + 1  # type: ignore[call-overload]
            if int(state.get("fail", 0)) > 0:  # type: ignore[call-overload]
                state["fail"] = int(state["fail"]) - 1  # type: ignore[call-overload]
                self.send_error(503)
                return
            if self.path == "/simple/demo-pkg/":
                body = json.dumps({"files": [
                    {"filename": "demo_pkg-1.0.tar.gz", "url": "/files/demo_pkg-1.0.tar.gz",
                     "hashes": {"sha256": state["sha"]}},
                    {"filename": "demo_pkg-1.0-py3-none-any.whl", "url": "/files/x.whl",
                     "hashes": {"sha256": "0"}}]}).encode()
            elif self.path == "/files/demo_pkg-1.0.tar.gz":
                body = blob
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SWEMILL_PYPI_URL", f"http://127.0.0.1:{server.server_port}/simple")
    yield state
    server.shutdown()


def test_pypi_sdist_is_unpacked_committed_and_reused_offline(
        tmp_path: Path, index: dict[str, object]) -> None:
    first = resolve_source("pypi:Demo_Pkg==1.0", cache=tmp_path / "c")
    assert first.kind == "pypi" and first.repo == "demo-pkg" and not first.from_cache
    assert (first.path / "demo_pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (first.path / "tests" / "test_it.py").exists()
    # what the sdist ships is committed, also what its .gitignore names (a generated
    # _version.py): snapshots of tasks are made from the commit
    tracked = subprocess.run(["git", "ls-files"], cwd=first.path, capture_output=True,
                             text=True, check=True).stdout.split()
    assert "demo_pkg/_version.py" in tracked and ".gitignore" in tracked
    hits = index["hits"]
    again = resolve_source("pypi:demo-pkg==1.0", cache=tmp_path / "c")
    assert again.from_cache and again.commit == first.commit and index["hits"] == hits
    # deterministic identity and date: the same sdist gives the same commit anywhere
    assert resolve_source("pypi:demo-pkg==1.0", cache=tmp_path / "d").commit == first.commit


def test_pypi_bad_hash_unknown_version_and_project(
        tmp_path: Path, index: dict[str, object]) -> None:
    cache = tmp_path / "c"
    with pytest.raises(SourceError, match=r"no sdist of demo-pkg 2\.0 \(latest sdists: 1\.0\)"):
        resolve_source("pypi:demo-pkg==2.0", cache=cache)
    with pytest.raises(SourceError, match="no project named 'nothing-here'"):
        resolve_source("pypi:nothing-here==1.0", cache=cache)
    with pytest.raises(SourceError, match="expected pypi:NAME==VERSION"):
        resolve_source("pypi:demo-pkg", cache=cache)
    index["sha"] = "0" * 64
    with pytest.raises(SourceError, match="sha256 does not match"):
        resolve_source("pypi:demo-pkg==1.0", cache=cache)
    assert leftovers(cache) == []


@pytest.mark.network
def test_real_pypi_toolz_resolves_and_unknown_version_fails(tmp_path: Path) -> None:
    src = resolve_source("pypi:toolz==1.0.0", cache=tmp_path / "c")
    assert (src.path / "toolz" / "tests" / "test_itertoolz.py").exists()
    with pytest.raises(SourceError, match="no sdist of toolz 0.0.0"):
        resolve_source("pypi:toolz==0.0.0", cache=tmp_path / "c")


def test_sample_is_materialised_with_history_and_cached(tmp_path: Path) -> None:
    first = resolve_source("sample", cache=tmp_path / "c")
    assert first.kind == "sample" and first.repo == "swemill/sample-inventory"
    assert (first.path / "tests").is_dir() and not first.from_cache
    assert int(git(first.path, "rev-list", "--count", "HEAD")) > 1  # pr-mirror needs history
    again = resolve_source("sample", cache=tmp_path / "c")
    assert again.from_cache and again.commit == first.commit
    assert resolve_source("sample", cache=tmp_path / "d").commit == first.commit


def test_pypi_transient_server_errors_are_retried(tmp_path: Path, index: dict[str, object]) -> None:
    index["fail"] = 2  # the index answers 503 twice, then recovers
    src = resolve_source("pypi:demo-pkg==1.0", cache=tmp_path / "c")
    assert (src.path / "demo_pkg" / "__init__.py").exists() and index["fail"] == 0
    index["fail"], index["hits"] = 5, 0  # past the 3 attempts: one error line, no 4th try
    with pytest.raises(SourceError, match="503"):
        resolve_source("pypi:demo-pkg==1.0", cache=tmp_path / "d")
    assert index["hits"] == 3
    index["fail"], index["hits"] = 0, 0  # a 404 is an answer, not a hiccup: asked once
    with pytest.raises(SourceError, match="no project named 'nothing-here'"):
        resolve_source("pypi:nothing-here==1.0", cache=tmp_path / "d")
    assert index["hits"] == 1


@pytest.mark.parametrize(("file", "text"), [
    ("pyproject.toml", '[project]\nname = "Fancy_Lib"\nversion = "1"\n'),
    ("pyproject.toml", '[tool.poetry]\nname = "fancy-lib"\n'),
    ("setup.cfg", "[metadata]\nname = fancy.lib\n"),
    ("setup.py", "from setuptools import setup\nsetup(\n    name='fancy-lib',\n)\n"),
])
def test_a_checkout_without_a_remote_is_named_by_its_metadata(tmp_path: Path, file: str,
                                                               text: str) -> None:
    """A mirror checked out as ``.../owner+name/repo`` is not called ``repo`` (its name ends
    up in instance ids and problem statements)."""
    src = make_tree(tmp_path / "owner+name" / "repo")
    (src / file).write_text(text)
    resolved = resolve_source(str(src), cache=tmp_path / "cache")
    assert resolved.repo == "fancy-lib"


def test_a_clone_of_a_local_mirror_is_named_by_its_metadata_not_its_path(tmp_path: Path) -> None:
    """A repository cloned from a mirror on disk has a local path as its remote: neither the
    working copy nor the git URL source is named after that path's directories."""
    mirror = make_tree(tmp_path / "mirrors" / "owner+name" / "repo")
    (mirror / "pyproject.toml").write_text('[project]\nname = "Fancy_Lib"\nversion = "1"\n')
    git(mirror, "init", "-q", "-b", "main")
    git(mirror, "add", "-A")
    git(mirror, "commit", "-qm", "one")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(mirror), str(work)], check=True)
    assert resolve_source(str(work), cache=tmp_path / "c").repo == "fancy-lib"
    by_url = resolve_source(f"file://{mirror}", cache=tmp_path / "c")
    assert by_url.repo == "fancy-lib"
    assert resolve_source(f"file://{mirror}", cache=tmp_path / "c").repo == "fancy-lib"  # cached
    git(work, "remote", "set-url", "origin", "git@github.com:Some-Owner/Some.Repo.git")
    (work / "pkg" / "__init__.py").write_text("x = 2\n")  # a new snapshot, named afresh
    assert resolve_source(str(work), cache=tmp_path / "c").repo == "some-owner/some.repo"


def test_a_bare_repository_path_is_cloned_not_copied(tmp_path: Path) -> None:
    """A mirror kept bare (``git clone --bare``: HEAD, objects, refs and no working tree) given
    as a directory was copied as if its git files were the project, which then had no tests;
    it is cloned at its HEAD, named by the project's metadata."""
    origin = make_tree(tmp_path / "origin")
    (origin / "pyproject.toml").write_text('[project]\nname = "fancy-lib"\nversion = "1"\n')
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "one")
    (origin / "pkg" / "__init__.py").write_text("x = 2\n")
    git(origin, "commit", "-qam", "two")
    bare = tmp_path / "mirrors" / "owner+name" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
    resolved = resolve_source(str(bare), cache=tmp_path / "c")
    assert resolved.kind == "git" and resolved.repo == "fancy-lib"
    assert resolved.commit == git(origin, "rev-parse", "HEAD")
    assert (resolved.path / "tests" / "test_pkg.py").is_file()
    assert (resolved.path / "pkg" / "__init__.py").read_text() == "x = 2\n"
    assert not (resolved.path / "objects").exists()
    assert git(resolved.path, "rev-list", "--count", "HEAD") == "2"  # its history too
    assert resolve_source(str(bare), cache=tmp_path / "c").from_cache
