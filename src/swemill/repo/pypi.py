"""Fetch a project's sdist from a PyPI-compatible index and unpack it, sha256 verified.

The Simple API in its JSON form (PEP 691) is used because every index and mirror serves it;
``$SWEMILL_PYPI_URL`` points at another index (default ``https://pypi.org/simple``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from swemill.core.errors import SourceError

__all__ = ["normalize_name", "fetch", "find_sdist", "fetch_sdist", "sdist_versions",
           "unpack_sdist"]

_ACCEPT = "application/vnd.pypi.simple.v1+json"
_TIMEOUT = 60


def normalize_name(name: str) -> str:
    """PEP 503 normalisation: ``More_Itertools`` -> ``more-itertools``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _index_url() -> str:
    return os.environ.get("SWEMILL_PYPI_URL", "https://pypi.org/simple").rstrip("/") + "/"


def _transient(exc: BaseException) -> bool:
    """Worth another try: a 5xx or a dropped connection, not a 404 or another 4xx."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500
    return isinstance(exc, urllib.error.URLError | TimeoutError | ConnectionError)


def _get(url: str, accept: str | None = None, attempts: int = 3) -> bytes:
    """GET with retries (0.5 s, 1 s, ...) on what is worth retrying; the last error is raised
    as it came."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    for attempt in Retrying(stop=stop_after_attempt(attempts), reraise=True,
                            wait=wait_exponential(multiplier=0.5),
                            retry=retry_if_exception(_transient)):
        with attempt, urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
            return bytes(resp.read())
    raise AssertionError("unreachable")  # pragma: no cover


def _sdist_version(filename: str, name: str) -> str | None:
    m = re.fullmatch(r"(.+?)-([^-]+)\.(tar\.gz|zip)", filename)
    if not m or normalize_name(m.group(1)) != name:
        return None
    return m.group(2)


def find_sdist(name: str, version: str) -> tuple[str, str, str]:
    """Return ``(filename, url, sha256)`` of ``name``'s sdist for ``version``."""
    index, page = _page(name)
    seen: list[str] = []
    for f in page.get("files", []):
        ver = _sdist_version(f.get("filename", ""), name)
        if ver is None:
            continue
        seen.append(ver)
        if ver == version and f.get("hashes", {}).get("sha256"):
            return f["filename"], urljoin(index, f["url"]), f["hashes"]["sha256"]
    recent = ", ".join(seen[-5:]) or "none"
    raise SourceError(f"PyPI has no sdist of {name} {version} (latest sdists: {recent})")


def sdist_versions(name: str) -> list[str]:
    """The versions the index has an sdist of, in the index's order."""
    _, page = _page(name)
    found = (_sdist_version(f.get("filename", ""), name) for f in page.get("files", []))
    return [v for v in found if v is not None]


def _page(name: str) -> tuple[str, dict[str, Any]]:
    index = urljoin(_index_url(), f"{name}/")
    try:
        page = json.loads(_get(index, _ACCEPT))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise SourceError(f"PyPI has no project named {name!r}") from None
        raise SourceError(f"PyPI index answered {exc.code} for {name!r}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise SourceError(f"cannot reach the PyPI index at {index}: {exc}") from None
    except json.JSONDecodeError:
        raise SourceError(f"the PyPI index at {index} did not answer in JSON") from None
    if not isinstance(page, dict):
        raise SourceError(f"the PyPI index at {index} did not answer a project page")
    return index, page


def fetch(name: str, version: str) -> tuple[str, bytes, str]:
    """``(filename, bytes, sha256)`` of ``name``'s sdist for ``version``, hash-checked."""
    filename, url, sha256 = find_sdist(name, version)
    try:
        data = _get(url)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise SourceError(f"cannot download {filename}: {exc}") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SourceError(f"{filename}: sha256 does not match the index; refusing it")
    return filename, data, sha256


def fetch_sdist(name: str, version: str, dest: Path) -> str:
    """Download, verify and unpack the sdist into ``dest`` (its top directory stripped)."""
    filename, data, sha256 = fetch(name, version)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp, filename)
        archive.write_bytes(data)
        unpack_sdist(archive, dest)
    return sha256


def unpack_sdist(archive: Path, dest: Path) -> None:
    """Unpack ``archive`` (``.tar.gz`` or ``.zip``) into ``dest``, its top directory stripped;
    nothing in it runs, and no member may land outside ``dest``."""
    with tempfile.TemporaryDirectory() as tmp:
        unpacked = Path(tmp, "x")
        _unpack(archive, unpacked)
        tops = list(unpacked.iterdir())
        top = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked
        for child in top.iterdir():
            shutil.move(str(child), dest / child.name)


def _unpack(archive: Path, out: Path) -> None:
    out.mkdir()
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    target = (out / member).resolve()
                    if not target.is_relative_to(out.resolve()):
                        raise SourceError(f"{archive.name}: unsafe path {member!r}")
                zf.extractall(out)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(out, filter="data")
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise SourceError(f"cannot unpack {archive.name}: {exc}") from None
