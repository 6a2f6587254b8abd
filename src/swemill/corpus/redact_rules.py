"""The redaction rules: provider token formats first, then the contextual rules.

Each rule is a compiled regex plus cheap literal "needles" (it runs only when one of them
occurs in the text) and, where a match alone proves nothing, a check from
:mod:`swemill.corpus.redact_checks`. Provider formats swemill has no rule of its own for come
from detect-secrets' plugin regexes, imported on first use (:func:`rules`).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import Any

from swemill.corpus.redact_checks import (
    Check,
    bare_aws_secret,
    high_entropy,
    mixed,
    real_assigned,
    real_email,
    real_flag_value,
    real_ip,
    real_password,
)

__all__ = ["Rule", "RULES", "rules"]


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    """Literal substrings, one of which must occur (in the lower-cased text if ``lower``)."""
    group: str | int | tuple[str, ...] = 0
    """The group holding the secret; for a tuple, the first of them that matched."""
    check: Check | None = None
    lower: bool = False
    """Match against the lower-cased text (the regex is written in lower case): a
    case-sensitive scan is several times faster than ``(?i)`` in Python's engine."""
    back: re.Pattern[str] | None = None
    slow: re.Pattern[str] = re.compile("")
    """Extends a match to the left. Patterns start at a rare character ('@', '.', ':') and
    walk back from there, because a regex that starts with a character class is tried at
    every position of the text (several times slower on code)."""
    replacement: str | None = None
    """What the span becomes; ``None`` means the typed placeholder."""


def _rule(kind: str, regex: str, needles: tuple[str, ...], back: str = "", **kw: Any) -> Rule:
    return Rule(
        kind,
        re.compile(regex),
        needles,
        back=re.compile(back) if back else None,
        slow=re.compile(regex, re.IGNORECASE),
        **kw,
    )


# The name is found by its keyword alone: a leading ``[\w.-]*`` would be tried everywhere.
_SECRET_NAME = (
    r"(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|credential|auth[_-]?key)[\w.-]*"
)

RULES: tuple[Rule, ...] = (
    _rule(
        "private_key",
        # Header, then base64 / header lines (a lone '-' but never '-----'), then the END
        # line when present: a truncated key is redacted up to where its body stops.
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[A-Za-z0-9+/=\s:,.\\]+|-(?!----)){0,4000}"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?",
        ("PRIVATE KEY",),
    ),
    _rule("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", ("eyJ",)),
    _rule(
        "aws_access_key",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _rule(
        "aws_secret_key",
        r"aws[\w.-]{0,30}?(?:secret|sk)[\w.-]{0,30}?[\"']?\s*(?::=|=>|[:=])\s*[\"']?"
        r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("aws",),
        group="v",
        lower=True,
    ),
    _rule(
        "aws_secret_key",
        # No label: a bare 40-character key, accepted only near an AWS key id or "aws".
        r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        ("AKIA", "ASIA", "aws", "AWS", "Aws"),
        check=bare_aws_secret,
    ),
    _rule(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", ("glpat-",)),
    _rule("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    _rule(
        "openai_key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        ("sk-",),
        check=lambda v, _t, _s: mixed(v),
    ),
    _rule(
        "slack_token",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
        ("xox", "hooks.slack.com"),
    ),
    _rule("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", ("hf_",)),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", ("AIza",)),
    _rule("stripe_key", r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}", ("k_live_", "k_test_")),
    _rule("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",)),
    _rule("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",)),
    _rule(
        "url_credentials",
        r"://(?P<v>[^\s/:@\"'<>\[\]]+:[^\s/@\"'<>\[\]]+)@",
        ("://",),
        group="v",
        check=lambda v, _t, _s: real_password(v.partition(":")[2]),
    ),
    _rule(
        "bearer_token",
        r"\bbearer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)",
        ("bearer",),
        group="v",
        lower=True,
    ),
    _rule(
        "high_entropy_secret",
        rf"{_SECRET_NAME}[\"']?\s*(?::=|=>|[:=])\s*"
        r"(?:[\"'`](?P<q>[^\"'`\s]{16,200})[\"'`]|(?P<u>[A-Za-z0-9+/=_\-.~]{16,200}))",
        ("secret", "token", "passw", "pwd", "apikey", "api_key", "api-key", "access_key",
         "access-key", "private_key", "private-key", "credential", "auth_key", "auth-key"),
        group=("q", "u"),
        lower=True,
        check=lambda v, _t, _s: high_entropy(v),
    ),
    _rule(
        "password",
        # The keyword ends the name (``db_password =``, ``"PASSWORD":``), then a literal.
        r"(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
        r"auth[_-]?key|private[_-]?key|credentials?)[\"'\]]?[ \t]*(?::=|=>|[:=])[ \t]*"
        r"(?:[\"'`](?P<q>[^\"'`\n]{1,200})[\"'`]|(?P<u>[^\s\"'`;,&|()\[\]{}<>]{1,200}))",
        ("secret", "token", "passw", "pwd", "passphrase", "apikey", "api_key", "api-key",
         "access_key", "access-key", "private_key", "private-key", "credential", "auth_key",
         "auth-key"),
        group=("q", "u"),
        lower=True,
        check=real_assigned,
    ),
    _rule(
        "password",
        r"--(?:[\w-]*-)?(?:passw(?:or)?d|token|secret|api-?key)(?:=|[ \t]+)"
        r"(?P<v>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|[^\s\"'`]{1,200})",
        ("--",),
        group="v",
        lower=True,
        check=real_flag_value,
    ),
    _rule(
        "email",
        r"@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])",
        ("@",),
        back=r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}$",
        check=real_email,
    ),
    _rule(
        "ipv4",
        r"(?<=\d)\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w]|\.\d)",
        (".",),
        back=r"(?<![\w.])\d{1,3}$",
        check=real_ip,
    ),
    _rule(
        "ipv6",
        r":[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]{0,36}(?:(?<=:)\d{1,3}(?:\.\d{1,3}){3})?(?![\w:])",
        (":",),
        back=r"(?<![\w:.])[0-9A-Fa-f]{0,4}$",
        check=real_ip,
    ),
    _rule(
        "home_path",
        r"(?<![\w.~/-])(?:/home/[^/\s\"'`:;,()<>]+|/Users/[^/\s\"'`:;,()<>]+|/root(?![\w.-]))"
        r"|\b[A-Za-z]:\\+Users\\+[^\\\s\"'`:;,()<>]+",
        ("/home/", "/Users/", "/root", "\\Users\\"),
        replacement="~",
    ),
)


# detect-secrets plugins whose formats swemill has no rule of its own for: (module, class,
# kind, needles, whether the first group holds the secret). Their regexes, our spans. Its
# keyword-assignment plugins (IBM Cloud, SoftLayer, Cloudant) are left out: they cost more than
# all other rules together on ordinary code, and the password and entropy rules cover them.
_DETECT_SECRETS = (
    ("sendgrid", "SendGridDetector", "sendgrid_key", ("SG.",), False),
    ("twilio", "TwilioKeyDetector", "twilio_key", ("AC", "SK"), False),
    ("telegram_token", "TelegramBotTokenDetector", "telegram_token", (":",), False),
    ("discord", "DiscordBotTokenDetector", "discord_token", (".",), False),
    ("mailchimp", "MailchimpDetector", "mailchimp_key", ("-us",), False),
    ("square_oauth", "SquareOAuthDetector", "square_secret", ("sq0csp-",), False),
    ("azure_storage_key", "AzureStorageKeyDetector", "azure_storage_key", ("AccountKey=",),
     False),
    ("gitlab_token", "GitLabTokenDetector", "gitlab_token",
     ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-", "glptt-",
      "glagent-", "gloas-"), False),
)


def _plugin_rules(module: str, cls: str, kind: str, needles: tuple[str, ...],
                  grouped: bool) -> list[Rule]:
    detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
    out = []
    for regex in detector.denylist:
        lower = bool(regex.flags & re.IGNORECASE)
        # each regex checks only the needles it spells (GitLab has seven regexes, 11 prefixes)
        own = tuple(n for n in needles if n.rstrip("-.=") in regex.pattern) or needles
        out.append(Rule(kind, regex, tuple(n.lower() for n in own) if lower else own,
                        group=1 if grouped and regex.groups else 0,
                        check=lambda v, _t, _s: mixed(v) or len(v) >= 24, lower=lower,
                        slow=regex))
    return out


@functools.cache
def rules() -> tuple[Rule, ...]:
    """Every rule in order: provider formats first (swemill's own, then detect-secrets',
    imported on first use: ~0.2 s), then the contextual rules from ``url_credentials`` on; an
    overlap is named by the earlier, more specific rule."""
    plugins = [r for spec in _DETECT_SECRETS for r in _plugin_rules(*spec)]
    split = next(i for i, r in enumerate(RULES) if r.kind == "url_credentials")
    return (*RULES[:split], *plugins, *RULES[split:])
