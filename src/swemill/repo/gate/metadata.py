"""Reading the fields the gate needs from a tree's package metadata, whatever its format.

Only the top of the tree is read (plus ``*.egg-info/PKG-INFO`` there): vendored packages deeper
down have their own names and licenses, which are not the tree's.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import re
import tomllib
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

__all__ = ["license_fields", "names_and_urls"]

_SETUP_STR = r"""\s*=\s*(?:"([^"]*)"|'([^']*)')"""
_URL = re.compile(r"""https?://[^\s"'<>)]+|git@[^\s"'<>)]+""")


def _read(path: Path, limit: int = 1_000_000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:limit]
    except OSError:
        return ""


def _pyproject(root: Path) -> dict[str, Any]:
    text = _read(root / "pyproject.toml")
    try:
        return tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError:
        return {}


def _setup_cfg(root: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with contextlib.suppress(configparser.Error):  # a broken setup.cfg names nothing
        parser.read_string(_read(root / "setup.cfg"))
    return parser


def _pkg_infos(root: Path) -> list[tuple[str, Any]]:
    paths = [root / "PKG-INFO", *sorted(root.glob("*.egg-info/PKG-INFO"))]
    return [
        (str(p.relative_to(root)), HeaderParser().parsestr(_read(p, 200_000)))
        for p in paths if p.is_file()
    ]


def _package_json(root: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read(root / "package.json"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _setup_py_field(text: str, field: str) -> list[str]:
    return [a or b for a, b in re.findall(rf"\b{field}{_SETUP_STR}", text)]


def license_fields(root: Path) -> list[tuple[str, str, str]]:
    """``(where, value, kind)``; kind is expression, text, classifier or file."""
    out: list[tuple[str, str, str]] = []
    project = _pyproject(root).get("project", {})
    lic = project.get("license")
    if isinstance(lic, str):
        out.append(("pyproject.toml [project] license", lic, "expression"))
    elif isinstance(lic, dict):
        if isinstance(lic.get("text"), str):
            out.append(("pyproject.toml [project] license.text", lic["text"], "text"))
        if isinstance(lic.get("file"), str):
            out.append(("pyproject.toml [project] license.file", lic["file"], "file"))
    if isinstance(project.get("license-expression"), str):
        value = project["license-expression"]
        out.append(("pyproject.toml license-expression", value, "expression"))
    poetry = _pyproject(root).get("tool", {}).get("poetry", {})
    if isinstance(poetry.get("license"), str):
        out.append(("pyproject.toml [tool.poetry] license", poetry["license"], "text"))
    classifiers = [*project.get("classifiers", []), *poetry.get("classifiers", [])]
    out += [("pyproject.toml classifier", c, "classifier") for c in classifiers
            if isinstance(c, str)]
    cfg = _setup_cfg(root)
    if cfg.has_option("metadata", "license"):
        out.append(("setup.cfg license", cfg.get("metadata", "license"), "text"))
    if cfg.has_option("metadata", "license_expression"):
        out.append(("setup.cfg license_expression", cfg.get("metadata", "license_expression"),
                    "expression"))
    if cfg.has_option("metadata", "classifiers"):
        for line in cfg.get("metadata", "classifiers").splitlines():
            out.append(("setup.cfg classifier", line.strip(), "classifier"))
    setup_py = _read(root / "setup.py")
    out += [("setup.py license=", v, "text") for v in _setup_py_field(setup_py, "license")]
    for found in re.findall(r"""["'](License :: [^"']+)["']""", setup_py):
        out.append(("setup.py classifier", found, "classifier"))
    for where, msg in _pkg_infos(root):
        for value in msg.get_all("License-Expression") or []:
            out.append((f"{where} License-Expression", value, "expression"))
        for value in msg.get_all("License") or []:
            out.append((f"{where} License", value, "text"))
        for value in msg.get_all("Classifier") or []:
            out.append((f"{where} classifier", value, "classifier"))
    if isinstance(_package_json(root).get("license"), str):
        out.append(("package.json license", _package_json(root)["license"], "expression"))
    return out


def _urls_in(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [u for v in value.values() for u in _urls_in(v)]
    if isinstance(value, list):
        return [u for v in value for u in _urls_in(v)]
    return _URL.findall(value) if isinstance(value, str) else []


def names_and_urls(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``([(where, package name)], [(where, url)])`` declared by the tree's metadata."""
    names: list[tuple[str, str]] = []
    urls: list[tuple[str, str]] = []
    data = _pyproject(root)
    project, poetry = data.get("project", {}), data.get("tool", {}).get("poetry", {})
    tables = (("pyproject.toml [project]", project), ("pyproject.toml [tool.poetry]", poetry))
    for where, table in tables:
        if isinstance(table.get("name"), str):
            names.append((f"{where} name", table["name"]))
        for key in ("urls", "homepage", "repository", "documentation"):
            urls += [(f"{where} {key}", u) for u in _urls_in(table.get(key))]
    cfg = _setup_cfg(root)
    if cfg.has_option("metadata", "name"):
        names.append(("setup.cfg name", cfg.get("metadata", "name")))
    for key in ("url", "home_page", "download_url", "project_urls"):
        if cfg.has_option("metadata", key):
            urls += [(f"setup.cfg {key}", u) for u in _urls_in(cfg.get("metadata", key))]
    setup_py = _read(root / "setup.py")
    names += [("setup.py name=", v) for v in _setup_py_field(setup_py, "name")]
    for key in ("url", "download_url"):
        urls += [(f"setup.py {key}=", v) for v in _setup_py_field(setup_py, key)]
    block = re.search(r"project_urls\s*=\s*(\{[^}]*\})", setup_py)
    urls += [("setup.py project_urls", u) for u in _urls_in(block.group(1) if block else "")]
    for where, msg in _pkg_infos(root):
        names += [(f"{where} Name", v) for v in msg.get_all("Name") or []]
        for key in ("Home-page", "Project-URL", "Download-URL"):
            urls += [(f"{where} {key}", u) for v in msg.get_all(key) or [] for u in _urls_in(v)]
    package = _package_json(root)
    if isinstance(package.get("name"), str):
        names.append(("package.json name", package["name"]))
    for key in ("repository", "homepage", "bugs"):
        value = package.get(key)
        if isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value):
            value = f"https://github.com/{value}"  # npm's "owner/name" shorthand
        urls += [(f"package.json {key}", u) for u in _urls_in(value)]
    return names, urls
