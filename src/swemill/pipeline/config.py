"""The one config object of ``swemill build``: CLI flags resolve to it, the manifest keeps it.

A build's config is its stages' own configs, nested: ``tasks`` (:class:`TasksConfig`, which
the gate and env stages read too), ``rollouts`` (:class:`RolloutConfig`) and ``corpus``
(:class:`CorpusConfig`). Every default is the stage's own: a build and ``swemill tasks`` or
``swemill rollout`` run alone mean the same by the same setting. The build's flags are names
for fields of the nested configs (:data:`FLAGS`: ``--workers`` sets the workers of tasks and
rollouts, ``--seed`` every seed); ``BuildConfig.from_flags(max_tasks=8, seed=1)`` takes them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from swemill.agent.rollout_config import RolloutConfig
from swemill.core.errors import ConfigError
from swemill.corpus.assemble import CorpusConfig
from swemill.policies.policy import REGISTRY, split_spec
from swemill.validate.tasks_config import TasksConfig

__all__ = ["BuildConfig", "DEFAULT_POLICIES", "FLAGS", "RUNTIME_SETTINGS", "SAMPLE_SOURCE"]

SAMPLE_SOURCE = "sample"
DEFAULT_POLICIES = ("oracle", "noisy-oracle:0.5")
"""The scripted pair: the oracle's solved runs feed SFT, the noisy oracle's wrong fixes give
the rejected side of execution-graded DPO pairs. No network, no key."""
DEFAULT_SAMPLES = 4
"""Rollouts per task in a build (cycling through the policies): with the scripted pair, two
of each, so the noisy oracle's fixes are right and wrong on most tasks (the DPO pairs).
``RolloutConfig`` has no default teachers, so this is the build's choice, not a second
default."""

FLAGS: dict[str, tuple[str, ...]] = {
    "policies": ("rollouts.policy",),
    "samples": ("rollouts.samples",),
    "max_usd": ("tasks.max_usd", "rollouts.max_usd"),
    "price": ("tasks.price", "rollouts.price"),
    "bug_writer": ("tasks.bug_writer",),
    "max_tasks": ("tasks.max_tasks",),
    "strategies": ("tasks.strategies",),
    "repeat": ("tasks.repeat",),
    "audit": ("tasks.audit",),
    "issue_writer": ("tasks.problem_writer",),
    "allow_contaminated": ("tasks.allow_contaminated",),
    "suite_timeout_s": ("tasks.suite_timeout_s",),
    "recipe": ("tasks.recipe",),
    "workers": ("tasks.workers", "rollouts.workers"),
    "executor": ("tasks.executor", "rollouts.executor"),
    "backend": ("tasks.backend", "rollouts.backend"),
    "seed": ("tasks.seed", "rollouts.seed", "corpus.split.seed"),
    "holdout": ("corpus.split.holdout_fraction",),
    "emit_wm": ("corpus.emit_wm",),
    "difficulty": ("corpus.difficulty",),
    "curriculum": ("corpus.curriculum",),
}
"""The build's flags (``--max-tasks`` is ``max_tasks``) and the fields each one sets."""

RUNTIME_SETTINGS = frozenset({"workers", "executor", "suite_timeout_s"})
"""Flags that change where or how fast work runs, never what it produces: their fields are
left out of the config hash, and they are the only ones a resumed run may change (a build
whose suite ran out of time resumes with a larger ``--suite-timeout``)."""
_RUNTIME_FIELDS = frozenset(p for name in RUNTIME_SETTINGS for p in FLAGS[name])


def _default_rollouts() -> RolloutConfig:
    return RolloutConfig(policy=",".join(DEFAULT_POLICIES), samples=DEFAULT_SAMPLES)


def _flag_value(name: str, value: Any) -> Any:
    if name == "policies" and not isinstance(value, str):
        return ",".join(value)
    if name == "strategies" and value is not None:
        return list(value)
    return value


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data[key]`` as a plain dict of the fields given so far (a model: its set fields)."""
    value = data.get(key)
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_unset=True)
    elif value is None:
        value = {}
    elif not isinstance(value, dict):  # a dataclass (CorpusConfig, SplitConfig): all of it
        value = {f: getattr(value, f) for f in value.__dataclass_fields__}
    data[key] = value
    return value


def _expand(data: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Flags turned into the nested fields they name, plus the dotted fields given."""
    out = {k: v for k, v in data.items() if k not in FLAGS}
    given: set[str] = set()
    for section in ("tasks", "rollouts", "corpus"):
        if section in out:
            given |= {f"{section}.{k}" for k in _section(out, section)}
    for name, value in data.items():
        if name not in FLAGS or value is None:
            continue
        for path in FLAGS[name]:
            *parents, leaf = path.split(".")
            target = out
            for part in parents:
                target = _section(target, part)
            target[leaf] = _flag_value(name, value)
            given.add(path)
    if "rollouts" in out:  # the build's teachers, unless the flags or the section name others
        rollouts = out["rollouts"]
        rollouts.setdefault("policy", ",".join(DEFAULT_POLICIES))
        rollouts.setdefault("samples", DEFAULT_SAMPLES)
    return out, given


class BuildConfig(BaseModel):
    """Everything a build's output depends on (and the runtime settings, which it does not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: TasksConfig = Field(default_factory=TasksConfig)
    """The gate, env and tasks stages (source gate, environment, baseline, validation)."""
    rollouts: RolloutConfig = Field(default_factory=_default_rollouts)
    """The rollouts stage: teachers (default: the scripted pair, :data:`DEFAULT_SAMPLES`
    rollouts per task), budget, limits."""
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    """The corpus stage: filters, scrub, dedup, the held-out split."""

    _given: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="wrap")
    @classmethod
    def _from_flags(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> BuildConfig:
        if not isinstance(data, dict):
            built: BuildConfig = handler(data)
            return built
        expanded, given = _expand(data)
        try:
            config: BuildConfig = handler(expanded)
        except ConfigError as exc:  # a stage config's own check (SplitConfig's fraction...)
            raise ValueError(str(exc)) from exc
        config._given = frozenset(given)
        return config

    @model_validator(mode="after")
    def _check(self) -> BuildConfig:
        if not self.policies:
            raise ValueError("at least one non-empty policy spec is needed")
        for spec in self.policies:  # refused now, not after the tasks are validated
            if split_spec(spec)[0] not in REGISTRY:
                raise ValueError(f"unknown policy spec {spec!r}: the prefix must be one of "
                                 f"{', '.join(sorted(REGISTRY))}")
        try:
            self.tasks.check()
            self.rollouts.check()
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def __eq__(self, other: object) -> bool:  # the settings, not how they were given
        return isinstance(other, BuildConfig) and self.resolved() == other.resolved()

    __hash__ = None  # type: ignore[assignment]

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.rollouts.policy.split(",") if s.strip())

    @property
    def given(self) -> frozenset[str]:
        """The dotted fields set explicitly (by a flag or a nested value), not by default."""
        return self._given

    def resolved(self) -> dict[str, Any]:
        """The config as written into the manifest (JSON types only)."""
        return self.model_dump(mode="json")

    def hash(self) -> str:
        """``sha256:`` of the settings the output depends on (runtime settings left out)."""
        data = self.resolved()
        for path in _RUNTIME_FIELDS:
            *parents, leaf = path.split(".")
            section = data
            for part in parents:
                section = section[part]
            section.pop(leaf, None)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def with_runtime(self, other: BuildConfig) -> BuildConfig:
        """This config with the runtime settings ``other`` sets explicitly; any other setting
        it sets is refused (a resumed run keeps what its output depends on)."""
        if fixed := other.given - _RUNTIME_FIELDS:
            names = sorted({next((f for f, paths in FLAGS.items() if path in paths), path)
                            for path in fixed})
            raise ConfigError(f"{', '.join(names)} cannot change")
        sections: dict[str, Any] = {}
        for path in sorted(other.given):
            section, leaf = path.split(".")
            current = sections.get(section, getattr(self, section))
            sections[section] = current.model_copy(update={leaf: _get(other, path)})
        return self.model_copy(update=sections)

    @classmethod
    def from_flags(cls, **flags: Any) -> BuildConfig:
        """A config from the build's flags (:data:`FLAGS`, ``max_tasks=8, seed=1``) and nested
        sections (``tasks=TasksConfig(...)``); what is not given keeps the stages' defaults."""
        return cls.model_validate(flags)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> BuildConfig:
        """The config a run was started with (what ``--resume`` continues under); a build
        recorded before the configs were nested (flat flag names) is read too."""
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise ConfigError(f"the run's recorded build config cannot be read: {first}") from exc


def _get(config: BaseModel, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value
