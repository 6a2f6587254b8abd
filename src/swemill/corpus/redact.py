"""Secrets and PII redaction for every text that reaches the corpus.

Each rule is a compiled regex plus cheap literal "needles": a rule runs only when one of its
needles occurs in the text, so a clean row costs a few substring checks and a few regex
scans. Matches become spans; overlapping spans are merged (the earlier rule in ``RULES``
names the merged span) and replaced by typed placeholders such as ``<REDACTED:github_token>``.

Decisions a user should know about:

* IP addresses: every valid address is redacted except loopback (127.0.0.0/8, ::1), the
  unspecified address (0.0.0.0, ::), netmask-like values (255.x.x.x) and the documentation
  ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32), multicast and reserved
  blocks, and network addresses written as such (``10.0.0.0/8``), which identify no one.
  Private ranges (10/8, 172.16/12, 192.168/16) are redacted: they map a user's network.
  A dotted quad after a version marker (``version = "1.2.3.4"``, ``==1.2.3.4``, ``v1.2.3.4``)
  is a version, not an address; after ``@`` it is a host (``ssh deploy@10.0.0.5``).
* Emails: redacted, except the reserved documentation domains (example.com/.net/.org,
  ``*.example``, ``*.test``, ``*.invalid``, ``*.localhost``) and ``git@host`` SSH remotes.
* Credentials in URLs: the ``user:password`` part is redacted unless the password is plainly
  a template (``{password}``, ``${PASS}``, ``<pass>``, ``***``).
* The entropy rule only looks at values assigned to secret-sounding names
  (``API_KEY = "..."``, ``token: ...``); high-entropy strings elsewhere (hashes, ids) stay.
* Passwords need no entropy: a literal assigned to a name that *ends* in a password word
  (``DB_PASSWORD=hunter2``, ``password: "s3cret!"``, ``Password=x9;`` in a connection string) is
  redacted. Environment-style names (``SECRET=``, ``API_TOKEN=``, upper case, no spaces) are
  redacted whatever the value. Code is told apart by its values: ``password = get_pw()``,
  ``token=token``, ``password: str`` and tokenizer markers (``pad_token="[PAD]"``) stay.
* Home directories become ``~``: ``/home/alice/proj``, ``/Users/alice/x``, ``/root/proj`` and
  ``C:\\Users\\alice\\x`` name a person or a machine's layout; the rest of the path stays.
* A bare 40-character AWS secret key (no ``aws_secret`` label) is redacted when an AWS access
  key id or the word "aws" stands within 300 characters of it.
* Provider token formats that swemill has no rule of its own for (SendGrid, Twilio, Telegram,
  Discord, Mailchimp, Square, Azure storage and the newer GitLab token kinds) use
  detect-secrets' plugin regexes, loaded on first use.
* ``keep`` (``scrub(text, keep={"email", "ipv4", "ipv6"})``) leaves chosen kinds in place.

swemill runs the regexes itself rather than a line-oriented secret scanner: it needs
character spans (to redact inside long tool outputs) and speed on every row. The rules are in
:mod:`swemill.corpus.redact_rules`, the checks that tell a secret from code or documentation in
:mod:`swemill.corpus.redact_checks`; this module runs them over a text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from swemill.corpus.redact_checks import shannon_entropy
from swemill.corpus.redact_rules import RULES, rules

__all__ = ["KEEPABLE", "ScrubResult", "RULES", "rules", "scrub", "scrub_value", "placeholder",
           "parse_keep", "shannon_entropy"]

KEEPABLE = ("email", "ipv4", "ipv6")
"""The kinds a user may choose to keep (``--scrub-keep``): PII that some corpora need, such as
a networking project's addresses. Secrets and home paths are always redacted."""


def parse_keep(spec: str) -> frozenset[str]:
    """``"email,ip"`` -> ``{"email", "ipv4", "ipv6"}``; ``ip`` names both address kinds.

    Raises ValueError naming what may be kept when a kind is not one of :data:`KEEPABLE`."""
    kinds: set[str] = set()
    for name in filter(None, (part.strip().lower() for part in spec.split(","))):
        if name == "ip":
            kinds |= {"ipv4", "ipv6"}
        elif name in KEEPABLE:
            kinds.add(name)
        else:
            raise ValueError(f"{name!r} cannot be kept: choose from "
                             f"{', '.join((*KEEPABLE, 'ip'))} (secrets are always redacted)")
    return frozenset(kinds)


@dataclass(frozen=True, slots=True)
class ScrubResult:
    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def redacted(self) -> int:
        return sum(self.counts.values())


def placeholder(kind: str) -> str:
    return f"<REDACTED:{kind}>"


def _group_span(m: re.Match[str], group: str | int | tuple[str, ...]) -> tuple[int, int]:
    for name in group if isinstance(group, tuple) else (group,):
        if m.group(name) is not None:
            return m.span(name)
    return (-1, -1)


def _spans(text: str, keep: Collection[str]) -> list[tuple[int, int, int]]:
    """``(start, end, rule index)`` for every accepted match of every rule."""
    lowered: str | None = None
    spans = []
    for index, rule in enumerate(rules()):
        if rule.kind in keep:
            continue
        if rule.lower:
            lowered = text.lower() if lowered is None else lowered
        hay = lowered if rule.lower else text
        assert hay is not None
        if not any(n in hay for n in rule.needles):
            continue
        # Lower-casing keeps offsets unless a character changes length (rare): fall back.
        same = hay is text or len(hay) == len(text)
        matches = rule.pattern.finditer(hay) if same else rule.slow.finditer(text)
        for m in matches:
            start, end = _group_span(m, rule.group)
            if rule.back is not None:
                left = rule.back.search(text, max(0, start - 80), start)
                if left is None:
                    continue
                start = left.start()
            if start >= end:
                continue
            if rule.check is None or rule.check(text[start:end], text, start):
                spans.append((start, end, index))
    return spans


def _merge(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Overlapping spans become one; the earliest rule (most specific) names it."""
    merged: list[tuple[int, int, int]] = []
    for start, end, index in sorted(spans):
        if merged and start < merged[-1][1]:
            s0, e0, i0 = merged[-1]
            merged[-1] = (s0, max(e0, end), min(i0, index))
        else:
            merged.append((start, end, index))
    return merged


def scrub(text: str, keep: Collection[str] = ()) -> ScrubResult:
    """Redact every secret and piece of PII in ``text``; counts per kind. Kinds named in
    ``keep`` (e.g. ``{"email", "ipv4", "ipv6"}``) are left in place."""
    spans = _merge(_spans(text, keep)) if text else []
    if not spans:
        return ScrubResult(text, {})
    all_rules = rules()
    parts: list[str] = []
    counts: Counter[str] = Counter()
    pos = 0
    for start, end, index in spans:
        rule = all_rules[index]
        parts += (text[pos:start],
                  placeholder(rule.kind) if rule.replacement is None else rule.replacement)
        counts[rule.kind] += 1
        pos = end
    parts.append(text[pos:])
    return ScrubResult("".join(parts), dict(counts))


def scrub_value(value: Any, counts: Counter[str] | None = None,
                keep: Collection[str] = ()) -> tuple[Any, Counter[str]]:
    """Scrub every string inside nested dicts/lists (keys stay); returns the copy and counts."""
    counts = Counter() if counts is None else counts
    if isinstance(value, str):
        result = scrub(value, keep)
        counts.update(result.counts)
        return result.text, counts
    if isinstance(value, dict):
        return {k: scrub_value(v, counts, keep)[0] for k, v in value.items()}, counts
    if isinstance(value, list | tuple):
        return type(value)(scrub_value(v, counts, keep)[0] for v in value), counts
    return value, counts
