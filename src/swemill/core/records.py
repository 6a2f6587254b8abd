"""Typed records passed between stages. Dicts appear only at the JSON / Parquet edge.

``Task`` is what a policy may see; ``Golden`` is what only the oracle may see and is stored
under its own prefix. Field names follow SWE-bench where a name exists there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from swemill.core.tools import ToolCall

__all__ = [
    "SCHEMA_VERSION",
    "LicenseTier",
    "Strategy",
    "GateVerdict",
    "TestStatus",
    "TestResult",
    "Baseline",
    "Candidate",
    "CandidateRecord",
    "ChangedSymbol",
    "Task",
    "Golden",
    "Usage",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "ToolResultBlock",
    "ContentBlock",
    "Message",
    "Outcome",
    "Trajectory",
    "PreferenceSource",
    "PreferencePair",
    "Drop",
    "RunManifest",
    "utcnow",
]

SCHEMA_VERSION = 1

LicenseTier = Literal["redistributable", "trainable-only", "unknown"]
Strategy = Literal["procedural", "pr-mirror", "combine", "rows", "lm-modify", "lm-rewrite"]
PreferenceSource = Literal["execution", "error_signal", "consensus", "judge"]


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class GateVerdict(_Record):
    """License tier and decontamination result for one source."""

    source: str
    repo: str
    license_spdx: str | None = None
    license_tier: LicenseTier = "unknown"
    license_evidence: list[str] = Field(default_factory=list)
    contaminated: bool = False
    contamination_matches: list[str] = Field(default_factory=list)
    allowed: bool = True
    reason: str = ""


TestStatus = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]


class TestResult(_Record):
    """One test's outcome in one run."""

    __test__ = False

    nodeid: str
    outcome: TestStatus
    duration_s: float = 0.0
    message: str = ""


class Baseline(_Record):
    """The repository's tests at its base commit, run several times, plus the coverage map."""

    repo: str
    commit: str
    env_key: str
    runs: int
    outcomes: dict[str, TestStatus]
    """Per test node id: the outcome all runs agreed on (flaky tests are listed apart)."""
    durations_s: dict[str, float]
    """Per test node id: median duration across runs."""
    flaky: list[str] = Field(default_factory=list)
    load_flaky: list[str] = Field(default_factory=list)
    """The flaky tests whose outcome changed only in the stuttered run (a busy machine): they
    are in ``flaky`` too."""
    stutter: str = ""
    """``STOP_MS:PERIOD_MS`` of the stuttered run that counted; empty when none did."""
    collect_errors: dict[str, str] = Field(default_factory=dict)
    """Collection node id (a module, a package) -> its error, in any run: its tests are in no
    list, and a candidate's run where it fails again has not broken the tree's imports (an
    optional test dependency that is not installed, say)."""
    coverage: dict[str, list[str]] = Field(default_factory=dict)
    """``"path/to/file.py::Qual.name"`` -> node ids of the tests that execute that function."""
    shared: list[str] = Field(default_factory=list)
    """Functions (keys as in ``coverage``) that ran outside any one test: at import,
    collection, or in a fixture wider than a function. An edit of one is run on the whole
    suite: any test may use what it computed."""
    uncovered: list[str] = Field(default_factory=list)
    """Tests whose coverage is unknown (they started a process or set their own tracer): run
    on every broken tree, never inherited."""
    version: int = 0
    """Format of the coverage data (``suite.baseline.BASELINE_VERSION``); a saved baseline of
    an older one is measured again."""
    suite_wall_s: float = 0.0
    startup_s: float = 0.0
    """Interpreter + pytest start-up measured for an empty selection."""
    test_cmd: str = ""

    def passing(self) -> set[str]:
        flaky = set(self.flaky)
        return {t for t, o in self.outcomes.items() if o == "passed" and t not in flaky}


class ChangedSymbol(_Record):
    """A function or method a candidate changes: (file relative to repo root, qualified name)."""

    file: str
    qualname: str


class Candidate(_Record):
    """A proposed bug: a patch from the base tree to a broken tree, not yet validated."""

    candidate_id: str
    repo: str
    strategy: Strategy
    bug_patch: str
    changed: list[ChangedSymbol] = Field(default_factory=list)
    scope: Literal["body", "module", "multi"] = "body"
    """``body``: edits confined to function bodies (selected tests suffice); else full suite."""
    parents: list[str] = Field(default_factory=list)
    """For ``combine``: the instance ids of the validated bugs merged here."""
    golden_patch: str | None = None
    """Broken -> fixed; when absent it is the reverse of ``bug_patch``."""
    fail_to_pass_hint: list[str] = Field(default_factory=list)
    pass_to_pass_hint: list[str] = Field(default_factory=list)
    problem_statement: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class CandidateRecord(_Record):
    """One validated candidate and what became of it: a row of ``candidates/``.

    Every candidate a strategy's counted prefix holds has one, accepted or not, so a user can
    see why a run yielded what it did without a debugger."""

    candidate_id: str
    instance_id: str
    """The id it has as a task (or would have had)."""
    repo: str
    strategy: Strategy
    position: int
    """Its place in the strategy's seeded order (0 first)."""
    file: str
    """The first file it changes ("" when the strategy names none)."""
    symbol: str
    """The first function it changes (qualified name; "" when none is named)."""
    targets: list[str] = Field(default_factory=list)
    """Every changed function, ``file::qualname``."""
    scope: Literal["body", "module", "multi"] = "body"
    base_commit: str
    verdict: Literal["written", "valid", "dropped"]
    """``written``: a task of this run; ``valid``: accepted past the strategy's share of
    ``--max-tasks`` (or fed to combine only); ``dropped``: refused by a gate."""
    reason: str
    """``accepted`` or the drop reason (``import_failed``, ``crashed`` ...)."""
    detail: str = ""
    """One line: the first error line of the run that decided it (an exit code explained)."""
    selected_tests: bool = False
    """Whether the broken tree ran only the tests the coverage map names."""
    fail_to_pass: int = 0
    pass_to_pass: int = 0
    wall_s: float = 0.0
    env_key: str = ""
    """The environment it was validated in: the head's, or its base commit's own
    (``<repo>@deps-<hash>``, see ``swemill.repo.commitenv``)."""


class Task(_Record):
    """A validated SWE-style task: everything a policy may see, and nothing more."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    test_cmd: str
    strategy: Strategy
    license_tier: LicenseTier
    env_recipe: str
    """Key of the cached environment (``envs/<repo>@<commit>``) the task runs in."""
    snapshot: str
    """Reference to the scrubbed broken-tree snapshot a sandbox starts from."""
    solve_rate: float | None = None
    created_at: str = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)
    flake_rate: float = 0.0
    """Grading quality: the share of the tests run more than once on the broken tree whose
    outcome changed between runs (those are in neither list)."""
    n_fail_to_pass: int = 0
    n_pass_to_pass: int = 0
    near_miss_tried: int = 0
    """Near-miss variants (other procedural mutants of the same function) run against the
    task's lists; 0 where there are none (not a procedural task, or no other mutant)."""
    near_miss_caught: bool | None = None
    """Every variant tried failed at least one FAIL_TO_PASS or PASS_TO_PASS test; None when
    none was tried."""


class Golden(_Record):
    """Oracle-only data for a task: never written under ``tasks/``, never mounted for a policy."""

    instance_id: str
    bug_patch: str
    golden_patch: str
    deleted_symbols: list[str] = Field(default_factory=list)


class Usage(_Record):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class TextBlock(_Record):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Record):
    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None
    """Provider signature of the reasoning (Anthropic), needed to send the block back."""
    redacted: bool = False
    """Reasoning the provider returned encrypted (Anthropic ``redacted_thinking``): ``text`` is
    empty and ``signature`` holds the opaque ``data``, kept so the turn can be sent back."""


class ToolUseBlock(_Record):
    type: Literal["tool_use"] = "tool_use"
    call: ToolCall
    original_name: str | None = None
    """The tool's name in the source agent (e.g. Claude Code's ``MultiEdit``), if mapped."""


class ToolResultBlock(_Record):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")
]


class Message(_Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: list[ContentBlock] = Field(default_factory=list)
    usage: Usage | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b.call for b in self.content if isinstance(b, ToolUseBlock)]


class Outcome(_Record):
    """How a trajectory was graded by running the tests (absent for ungraded imports)."""

    grade: float
    resolved: bool
    fail_to_pass: dict[str, str] = Field(default_factory=dict)
    pass_to_pass: dict[str, str] = Field(default_factory=dict)
    regression: bool = False
    exit_code: int | None = None
    log: str = ""
    signals: dict[str, float] = Field(default_factory=dict)
    """Behaviour signals for a composite reward: diff size, turns, tokens, lint findings."""


class Trajectory(_Record):
    """The canonical IR of one agent run, ours or imported."""

    trajectory_id: str
    task_id: str | None = None
    source: str
    """``rollout``, ``claude_code``, ``mini-swe-agent``, ``swe-agent``, ``replay``."""
    policy: str
    messages: list[Message] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    outcome: Outcome | None = None
    admission: Literal["sft", "preference", "withheld", "pending"] = "pending"
    flags: list[str] = Field(default_factory=list)
    """Hack-monitor findings; a flagged trajectory never reaches SFT."""
    synthetic: bool = False
    """True when a scripted policy (oracle, noisy-oracle) produced it."""
    parent_id: str | None = None
    branch_point: int | None = None
    error: str | None = None
    license_tier: LicenseTier = "unknown"
    created_at: str = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)


class PreferencePair(_Record):
    pair_id: str
    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]
    preference_source: PreferenceSource
    chosen_score: float | None = None
    rejected_score: float | None = None
    task_id: str | None = None
    state_id: str | None = None
    synthetic: bool = False
    license_tier: LicenseTier = "unknown"
    metadata: dict[str, Any] = Field(default_factory=dict)


class Drop(_Record):
    """One dropped item: which stage, why, and enough to find it again."""

    stage: str
    reason: str
    item_id: str
    detail: str = ""


class RunManifest(_Record):
    run_id: str
    parent_run_id: str | None = None
    schema_version: int = SCHEMA_VERSION
    command: str = ""
    source: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    config_hash: str = ""
    counts: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per stage: ``{"in": n, "out": m, "dropped_<reason>": k}``."""
    cost_usd: float = 0.0
    timings_s: dict[str, float] = Field(default_factory=dict)
    license_tiers: dict[str, int] = Field(default_factory=dict)
    policies: list[str] = Field(default_factory=list)
    teachers: list[str] = Field(default_factory=list)
    job_ids: list[str] = Field(default_factory=list)
    accepted: bool | None = None
    status: Literal["running", "complete", "failed"] = "running"
    started_at: str = Field(default_factory=utcnow)
    finished_at: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
