"""Teachers: which models are asked to act on a replayed state, and the pool's rules.

A teacher spec is ``PROVIDER:MODEL[@URL][#OPTIONS]``::

    openai:gpt-4.1-mini                         OpenAI (or any compatible server with @URL)
    openai:qwen3-coder@http://127.0.0.1:8000/v1 a local server; the family comes from the name
    openrouter:meta-llama/llama-3.3-70b-instruct
    anthropic:claude-haiku-4-5
    bedrock:us.amazon.nova-pro-v1:0             Bedrock Converse, one call per state
    bedrock-batch:meta.llama3-3-70b-instruct-v1:0   Bedrock batch inference (one job per shard)

``#OPTIONS`` are ``;``-separated ``key=value`` pairs: ``family=NAME`` (when the model id does
not say), ``price=IN/OUT`` ($ per million tokens). Without a price the table in
:mod:`swemill.policies.prices` is used; a teacher with no price cannot run under ``--max-usd``.

The pool is heterogeneous on purpose: preference pairs come from disagreement, and models of
one family disagree least and share blind spots. By default a pool needs three families and
may not contain the student's family; both rules are settings, recorded in the manifest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import ConfigError, PolicyError
from swemill.policies.openai_compat import OPENAI_URL, is_local_url
from swemill.policies.policy import Policy, family_of, policy_from_spec
from swemill.policies.prices import Price, lookup_price, parse_price
from swemill.policies.retry import RetryPolicy

__all__ = [
    "PROVIDERS",
    "TeacherSpec",
    "TeacherPool",
    "parse_teacher",
    "parse_teachers",
    "check_credentials",
    "make_policy",
]

PROVIDERS = ("openai", "openrouter", "anthropic", "bedrock", "bedrock-batch")


@dataclass(frozen=True, slots=True)
class TeacherSpec:
    """One teacher: where it is served, which model, its family and its price."""

    provider: str
    model: str
    family: str
    price: Price | None = None
    base_url: str | None = None
    spec: str = ""

    @property
    def slug(self) -> str:
        """A name safe in store keys and unique within a pool: provider, model and, for a
        server given by URL, a short digest of the URL."""
        import hashlib

        slug = f"{self.provider}-{self.model}".replace("/", "_").replace(":", "_")
        if self.base_url:
            slug += "-" + hashlib.sha256(self.base_url.encode()).hexdigest()[:6]
        return slug

    @property
    def batch(self) -> bool:
        return self.provider == "bedrock-batch"

    def describe(self) -> dict[str, Any]:
        price = None if self.price is None else [self.price.input, self.price.output]
        return {"spec": self.spec, "provider": self.provider, "model": self.model,
                "family": self.family, "price_per_mtok": price, "base_url": self.base_url}


def _options(spec: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("family", "price"):
            raise ConfigError(f"teacher {spec!r}: unknown option {part!r} "
                              "(use family=NAME or price=IN/OUT)")
        out[key.strip()] = value.strip()
    return out


def parse_teacher(spec: str) -> TeacherSpec:
    """A :class:`TeacherSpec` from ``PROVIDER:MODEL[@URL][#OPTIONS]`` (see the module doc)."""
    text, _, opts_text = spec.strip().partition("#")
    provider, sep, rest = text.partition(":")
    provider = provider.strip().lower()
    if not sep or provider not in PROVIDERS:
        raise ConfigError(f"unknown teacher provider in {spec!r}: use one of "
                          f"{', '.join(PROVIDERS)} as PROVIDER:MODEL")
    model, url = rest.strip(), None
    head, at, tail = model.rpartition("@")
    if at and tail.startswith(("http://", "https://")):
        model, url = head, tail.rstrip("/")
    if not model:
        raise ConfigError(f"teacher {spec!r} names no model")
    if url and provider not in ("openai", "anthropic"):
        raise ConfigError(f"teacher {spec!r}: only openai: and anthropic: take an @URL")
    opts = _options(spec, opts_text)
    price = lookup_price(model)
    if "price" in opts:
        price = parse_price(opts["price"].replace("/", ","))
    family = opts.get("family") or ("anthropic" if provider == "anthropic" else family_of(model))
    return TeacherSpec(provider, model, family.lower(), price, url, spec.strip())


def parse_teachers(text: str | list[str]) -> list[TeacherSpec]:
    """Comma-separated specs (or a list of them); duplicates are an error."""
    items = text.split(",") if isinstance(text, str) else list(text)
    teachers = [parse_teacher(s) for s in items if s.strip()]
    if not teachers:
        raise ConfigError("no teachers given: pass --teachers PROVIDER:MODEL,...")
    seen: set[str] = set()
    for t in teachers:
        if t.slug in seen:
            raise ConfigError(f"teacher {t.spec!r} is listed twice")
        seen.add(t.slug)
    return teachers


@dataclass(slots=True)
class TeacherPool:
    """Teachers plus the heterogeneity rules they must satisfy."""

    teachers: list[TeacherSpec]
    student_family: str | None = None
    min_families: int = 3
    allow_student_family: bool = False
    families: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.families = sorted({t.family for t in self.teachers})
        self.check()

    def check(self) -> None:
        """Raise :class:`ConfigError` with one line when the pool breaks a rule."""
        unknown = [t.spec for t in self.teachers if t.family == "unknown"]
        if unknown and self.min_families > 1:
            raise ConfigError(f"cannot tell the model family of {', '.join(unknown)}: add "
                              "#family=NAME to the spec")
        if len(self.families) < self.min_families:
            raise ConfigError(
                f"the teacher pool has {len(self.families)} model famil"
                f"{'y' if len(self.families) == 1 else 'ies'} ({', '.join(self.families)}); "
                f"at least {self.min_families} are required (--min-families to change)")
        student = (self.student_family or "").lower()
        if student and not self.allow_student_family:
            same = [t.spec for t in self.teachers if t.family == student]
            if same:
                raise ConfigError(f"teacher {same[0]} is of the student's family {student!r}; "
                                  "drop it or pass --allow-student-family")

    def describe(self) -> dict[str, Any]:
        return {"teachers": [t.describe() for t in self.teachers], "families": self.families,
                "min_families": self.min_families, "student_family": self.student_family,
                "allow_student_family": self.allow_student_family}


def _aws_credentials() -> bool:
    try:
        import botocore.session
    except ImportError:
        return False
    return botocore.session.get_session().get_credentials() is not None


def _missing_credential(t: TeacherSpec) -> str | None:
    env = os.environ
    if t.provider == "openai":
        url = t.base_url or OPENAI_URL
        if is_local_url(url) or env.get("OPENAI_API_KEY", "").strip():
            return None
        return "OPENAI_API_KEY"
    if t.provider == "openrouter":
        return None if env.get("OPENROUTER_API_KEY", "").strip() else "OPENROUTER_API_KEY"
    if t.provider == "anthropic":
        if (t.base_url and is_local_url(t.base_url)) or env.get("ANTHROPIC_API_KEY", "").strip():
            return None
        return "ANTHROPIC_API_KEY"
    return None if _aws_credentials() else "AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID...)"


def check_credentials(teachers: list[TeacherSpec]) -> None:
    """Refuse before any call when a teacher has no credentials (one line names them all)."""
    missing = [(t.spec, m) for t in teachers if (m := _missing_credential(t))]
    if missing:
        what = "; ".join(f"{spec}: set {name}" for spec, name in missing)
        raise PolicyError(f"missing credentials for {len(missing)} teacher(s): {what}")


def make_policy(t: TeacherSpec, *, max_tokens: int = 1024, retry: RetryPolicy | None = None,
                client: Any = None, timeout_s: float = 120.0) -> Policy:
    """The realtime policy of a teacher (a ``bedrock-batch`` teacher answers via Converse)."""
    ctx: dict[str, Any] = {"max_tokens": max_tokens, "price": t.price, "retry": retry,
                           "timeout_s": timeout_s}
    if t.provider == "openai":
        spec = f"openai:{t.model}@{t.base_url or OPENAI_URL}"
        ctx["family"] = t.family
    elif t.provider == "openrouter":
        spec = f"openrouter:{t.model}"
        ctx["family"] = t.family
    elif t.provider == "anthropic":
        spec, ctx["base_url"] = f"anthropic:{t.model}", t.base_url
    elif t.provider in ("bedrock", "bedrock-batch"):
        spec, ctx["client"], ctx["family"] = f"bedrock:{t.model}", client, t.family
    else:  # parse_teacher admits nothing else
        raise PolicyError(f"teacher {t.spec!r}: unknown provider {t.provider!r}")
    return policy_from_spec(spec, **ctx)
