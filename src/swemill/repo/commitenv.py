"""Environments for the base commits of candidates: the head's, or one built for the commit.

pr-mirror and rows validate candidates at older commits. Where such a commit declares the
dependencies the head declares (:func:`~swemill.repo.past_deps.declaration_digest` is the
same), the head's environment serves it and nothing is built. Where it declares others (a
dependency the head dropped, a version the head no longer allows), it gets its own
environment: a clone of the working copy checked out at that commit, built with the recipe
found at that commit (or the user's ``--recipe``), and cached under
``envs/<slug>@deps-<hash12>``, the hash of its declarations and recipe, so every other commit
that declares the same shares it, in this run and the next.

A run builds at most ``limit`` of them (each costs an environment build); past that, and
where a build fails, the commit runs in the head's environment as before (which also holds
what older commits declared, see :mod:`swemill.repo.past_deps`), and :attr:`CommitEnvs.notes`
says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

from swemill.core.errors import SwemillError
from swemill.repo.cache import atomic_dir, cache_root, entry_lock, slugify
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.past_deps import declaration_digest
from swemill.repo.recipe import Recipe, resolve_recipe
from swemill.repo.sources import ResolvedSource, git

__all__ = ["CommitEnvs"]


class CommitEnvs:
    """The environment each base commit runs in; thread-safe, builds each one once."""

    def __init__(self, head: RepoEnv, src: ResolvedSource, *, recipe: Recipe | None = None,
                 cache: Path | None = None, limit: int = 3,
                 say: Callable[[str], None] | None = None) -> None:
        self.head, self.src, self.recipe, self.cache = head, src, recipe, cache
        self.limit = limit
        self._say = say or (lambda _line: None)
        self._digests: dict[str, str | None] = {}
        self._envs: dict[str, RepoEnv] = {}
        self._tried: set[str] = set()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.notes: dict[str, str] = {}
        """Per environment built (its key) or not (``deps-<hash12>``): its commit, or why the
        head's environment ran those commits instead (a failed build, the limit)."""

    def digest(self, commit: str) -> str | None:
        with self._lock:
            if commit in self._digests:
                return self._digests[commit]
        found = declaration_digest(self.src.path, commit)
        with self._lock:
            self._digests[commit] = found
        return found

    def admit(self, commit: str) -> str | None:
        """The digest of ``commit``'s own environment, given one of the run's ``limit``
        places if it has none yet; None where the head's serves it. Cheap (no build): the
        pool admits candidates in their order, so which commits get an environment does
        not depend on how the workers race."""
        if not commit or commit == self.src.commit or self.limit <= 0:
            return None
        digest = self.digest(commit)
        if digest is None or digest == self.digest(self.src.commit):
            return None
        with self._lock:
            if digest not in self._tried:
                if len(self._tried) >= self.limit:
                    self.notes.setdefault(f"deps-{digest[:12]}", f"over the limit of "
                                          f"{self.limit}: ran in the head's environment")
                    return None
                self._tried.add(digest)
        return digest

    def for_commit(self, commit: str) -> RepoEnv:
        """The environment to validate at ``commit`` in (building it if it is new)."""
        digest = self.admit(commit)
        if digest is None:
            return self.head
        with self._lock:
            if digest in self._envs:
                return self._envs[digest]
            lock = self._locks.setdefault(digest, threading.Lock())
        with lock:  # one build per digest; the other threads wanting it wait for it
            with self._lock:
                if digest in self._envs:
                    return self._envs[digest]
                if f"deps-{digest[:12]}" in self.notes:
                    return self.head
            try:
                env = self._build(commit, digest)
            except SwemillError as exc:
                line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                with self._lock:
                    self.notes[f"deps-{digest[:12]}"] = f"build failed at {commit[:12]}: {line}"
                return self.head
            with self._lock:
                self._envs[digest] = env
                self.notes[env.key] = f"built at {env.commit[:12]}"
        return env

    def by_key(self, key: str) -> RepoEnv | None:
        """An environment this object returned, by its key (None: not one of them)."""
        if key == self.head.key:
            return self.head
        with self._lock:
            return next((e for e in self._envs.values() if e.key == key), None)

    def _build(self, commit: str, digest: str) -> RepoEnv:
        self._say(f"environment of {self.src.repo} at {commit[:12]} (it declares other "
                  "dependencies than the head)")
        clone = self._checkout(commit, digest)
        at = git(["rev-parse", "HEAD"], clone)
        src = ResolvedSource(f"{self.src.spec}@{at[:12]}", clone, self.src.repo, at,
                             self.src.kind, from_cache=True)
        # exactly what this commit declares: nothing older commits declared on top
        recipe = resolve_recipe(clone, self.recipe).model_copy(
            update={"older_commits": False, "detect": False})
        mark = hashlib.sha256(f"{digest}\0{recipe.model_dump_json()}".encode()).hexdigest()
        env = build_env(src, cache=self.cache, recipe=recipe,
                        key=f"{slugify(self.src.repo)}@deps-{mark[:12]}")
        # the workers start at the clone's commit (the env may have been built at another)
        return env if env.commit == at else dataclasses.replace(env, commit=at)

    def _checkout(self, commit: str, digest: str) -> Path:
        """A clone of the working copy at ``commit``: the build reads its files, and the
        workers of this environment fork it (its generated files are laid into it)."""
        root = cache_root(self.cache)
        name = hashlib.sha256(f"{self.src.path}\0{digest}".encode()).hexdigest()[:16]
        final = root / "sources" / "commits" / f"{slugify(self.src.repo)}-{name}"
        with entry_lock(root, f"commit-{name}"):
            if not (final / ".git").is_dir():
                with atomic_dir(final) as tmp:
                    git(["clone", "-q", "--no-checkout", str(self.src.path), str(tmp)], root)
                    git(["checkout", "-q", "--detach", commit], tmp)
        return final
