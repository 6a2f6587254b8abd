"""Is a source one of the repositories that coding-agent benchmarks evaluate on?

Training on a benchmark's repositories leaks its answers into the model. The lists ship in
``data/*.json``, each naming the dataset it comes from. A tree is matched by every identity
it has: its git remotes, the URLs and package names in its metadata, and the name it was
resolved under; one match is enough.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from swemill.core.git import run_git
from swemill.repo.gate.metadata import names_and_urls

__all__ = ["BenchmarkRepo", "benchmark_repos", "normalize_repo", "normalize_package", "matches"]

_GITHUB = re.compile(
    r"""^(?:git\+)?(?:(?:https?|git|ssh)://)?(?:[\w.-]+@)?(?:www\.)?github\.com[:/]+
        ([\w.-]+)/([\w.-]+?)(?:\.git)?(?:[/#?@].*)?$""",
    re.IGNORECASE | re.VERBOSE,
)
_SLUG = re.compile(r"^([\w.-]+)/([\w.-]+?)(?:\.git)?$")


@dataclass(frozen=True, slots=True)
class BenchmarkRepo:
    repo: str
    datasets: tuple[str, ...]
    packages: frozenset[str] = field(default_factory=frozenset)
    aliases: frozenset[str] = field(default_factory=frozenset)

    def label(self) -> str:
        return f"{self.repo} ({', '.join(self.datasets)})"


def normalize_repo(value: str) -> str | None:
    """``owner/name`` in lower case for a GitHub URL (https, ssh, scp-like) or a bare slug."""
    text = value.strip()
    found = _GITHUB.match(text)
    if found is None and "://" not in text and "@" not in text and text.count("/") == 1:
        found = _SLUG.match(text)
    return f"{found.group(1)}/{found.group(2)}".lower() if found else None


def normalize_package(name: str) -> str:
    """PEP 503 normal form (npm names are already lower case and keep their scope)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower() if "/" not in name else name.lower()


@cache
def benchmark_repos() -> tuple[BenchmarkRepo, ...]:
    merged: dict[str, tuple[list[str], set[str], set[str]]] = {}
    data = resources.files(__package__) / "data"
    for entry in sorted(data.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        spec = json.loads(entry.read_text(encoding="utf-8"))
        for row in spec["repositories"]:
            key = row["repo"].lower()
            datasets, packages, aliases = merged.setdefault(key, ([], set(), set()))
            datasets.append(spec["dataset"])
            declared = [*row.get("pypi", []), *row.get("npm", [])]
            packages.update(normalize_package(p) for p in declared)
            aliases.update(a.lower() for a in row.get("aliases", []))
    return tuple(
        BenchmarkRepo(repo, tuple(d), frozenset(p), frozenset(a))
        for repo, (d, p, a) in sorted(merged.items())
    )


def git_remotes(root: Path) -> list[tuple[str, str]]:
    """``(name, url)`` of the remotes of the repository whose top is ``root`` (not a parent's)."""
    def run(*args: str) -> str:
        proc = run_git(args, root, timeout=30)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    if not (root / ".git").exists():
        return []
    top = run("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != root.resolve():
        return []
    remotes = set()
    for line in run("remote", "-v").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            remotes.add((parts[0], parts[1]))
    return sorted(remotes)


def matches(root: Path, extra: list[tuple[str, str]] | None = None) -> list[str]:
    """One line per identity of the tree at ``root`` that names a benchmark repository.

    ``extra`` holds more ``(where, value)`` identities: the spec or name a source came from.
    """
    by_slug: dict[str, BenchmarkRepo] = {}
    by_package: dict[str, BenchmarkRepo] = {}
    for bench in benchmark_repos():
        for slug in (bench.repo, *bench.aliases):
            by_slug[slug] = bench
        for package in bench.packages:
            by_package[package] = bench
    names, urls = names_and_urls(root)
    urls = [(f"git remote {name}", url) for name, url in git_remotes(root)] + urls
    found: list[str] = []
    for where, value in urls + list(extra or []):
        named_slug = normalize_repo(value)
        if named_slug is not None and named_slug in by_slug:
            found.append(f"{where} {value} -> {by_slug[named_slug].label()}")
    for where, value in names:
        named = by_package.get(normalize_package(value))
        if named is not None:
            found.append(f"{where} {value!r} -> {named.label()}")
    return list(dict.fromkeys(found))
