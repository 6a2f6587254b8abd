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
character spans (to redact inside long tool outputs) and speed on every row.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import ipaddress
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

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


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value`` under its own character frequencies."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# Placeholders, templates and our own ``<REDACTED:...>`` marks are never secrets.
_PLACEHOLDER_WORDS = re.compile(
    r"(?i)your|example|sample|dummy|changeme|placeholder|xxxx|\*\*\*|[<>{}$]"
)
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")


# Three or more capitalised words and no digit: a class or an API action
# (``CanonicalNameCredentialSourcer``, ``GetResourcePolicy``), not a key.
_CLASS_NAME = re.compile(r"^[A-Za-z]*(?:[A-Z][a-z]{2,}){3,}[A-Za-z]*$")
_WORD_RUN = re.compile(r"(?:[A-Z][a-z]{2,}){4,}")  # ~0.05% of random 40-character keys have one


def _word_like(value: str) -> bool:
    return _CLASS_NAME.match(value) is not None and not any(c.isdigit() for c in value)


def _high_entropy(value: str) -> bool:
    """A random-looking token: long, mixed characters, high entropy, not a placeholder."""
    if (len(value) < 16 or _DOTTED_NAME.match(value) or _PLACEHOLDER_WORDS.search(value)
            or _word_like(value)):
        return False
    if not any(c.isdigit() for c in value) and (value.islower() or value.isupper()):
        return False  # words and CONSTANT_NAMES, not keys
    hexish = all(c in "0123456789abcdefABCDEF" for c in value)
    return shannon_entropy(value) >= (3.0 if hexish else 3.5)


def _mixed(value: str) -> bool:
    """Provider keys mix letters and digits; prose such as ``sk-learn-style`` does not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_TEMPLATE = re.compile(
    r"^(?:\{[^}]*\}|\$\{?\w+\}?|<[^>]*>|\*+|%s|%\(\w+\)s|x+|"
    r"(?:my|your)?(?:password|passwd|pass|pwd|token|secret|key)|foo|bar|baz|qux|foobar)$",
    re.I,
)


def _real_password(value: str) -> bool:
    return not _TEMPLATE.match(value)


_RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
_RESERVED_TLDS = (".example", ".test", ".invalid", ".localhost")


_URL_USER = re.compile(r"://[^\s/@:]*:$")


def _real_email(value: str, text: str, start: int) -> bool:
    if _URL_USER.search(text, max(0, start - 200), start):
        return False  # the password part of ``scheme://user:pass@host`` (its own rule)
    local, _, domain = value.rpartition("@")
    domain = domain.lower()
    if local.lower() == "git" or domain == "localhost":
        return False
    if domain in _RESERVED_DOMAINS or domain.endswith(tuple("." + d for d in _RESERVED_DOMAINS)):
        return False
    return not domain.endswith(_RESERVED_TLDS)


_VERSION_CONTEXT = re.compile(
    r"(?i)(?:version\w*|ver|release|python|section|rfc|v)\s*[=:]?\s*[\"']?$|(?:[=!<>~]=|[\^~])\s*[\"']?$"
)
_CIDR = re.compile(r"/(\d{1,3})\b")
# Reserved for documentation (RFC 5737, RFC 3849): like example.com, they name no one.
_DOC_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))


def _real_ip(value: str, text: str, start: int) -> bool:
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return False
    if addr.is_loopback or addr.is_unspecified or value.startswith("255."):
        return False
    if (any(addr in net for net in _DOC_NETWORKS if net.version == addr.version)
            or addr.is_multicast or addr.is_reserved or value.startswith("0.")):
        return False
    if prefix := _CIDR.match(text, start + len(value)):  # a network (10.0.0.0/8), not a host
        with contextlib.suppress(ValueError):
            net = ipaddress.ip_network(f"{value}/{prefix.group(1)}")  # strict: host bits 0
            return net.num_addresses == 1
    if addr.version == 6:
        groups = [g for g in value.split(":") if g]
        # Slices (``x[1::2]``) and short labels parse as IPv6 too: ask for a real shape.
        return len(groups) >= 3 or (len(groups) == 2 and len(groups[0]) >= 3)
    return not _VERSION_CONTEXT.search(text[max(0, start - 24) : start])


Check = Callable[[str, str, int], bool]

_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


def _name_before(text: str, end: int) -> tuple[str, bool] | None:
    """The name assigned to at ``end`` (``NAME = `` / ``"name": `` / ``name => ``) and whether
    spaces stand around the operator; walked back by hand (a ``$``-anchored regex search
    would be tried at every position of the window)."""
    i = end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    after = i < end
    if i > 0 and text[i - 1] in "=:>":
        i -= 1
        if i > 0 and text[i - 1] in ":=" and text[i] in "=>":
            i -= 1
    else:
        return None
    j = i
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    before = j < i
    if j > 0 and text[j - 1] in "\"']":
        j -= 1
    k = j
    while k > 0 and end - k < 120 and text[k - 1] in _NAME_CHARS:
        k -= 1
    if k < j and k > 0 and text[k - 1] == ":":  # a field of ``arn:aws:...:secret:x``
        return None
    return (text[k:j], after or before) if k < j else None
_PASSWORD_WORD = re.compile(r"(?i)(?:password|passwd|passphrase|pwd)$")
_NOT_VALUES = re.compile(
    r"(?i)^(?:none|null|nil|true|false|undefined|required|optional|str|bytes|int|bool|"
    r"secretstr|string|text|list|dict|any)$|^(?:os\.|env\b|getenv|\$|%|\.\.\.)"
)
_NUMBER = re.compile(r"^[\d.]+$")
_LETTER_NAME = re.compile(r"^[A-Za-z_]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_TOKENIZER_MARK = re.compile(r"^(?:\[\w+\]|<[^>]*>|</?\w*>)$")


def _real_assigned(value: str, text: str, start: int) -> bool:
    """A literal assigned to a password/secret/token name, told apart from code."""
    if (_TEMPLATE.match(value) or _PLACEHOLDER_WORDS.search(value) or _NOT_VALUES.search(value)
            or value[0] in "=>"):  # ``password == x``, ``token => x``: comparisons, arrows
        return False
    quoted = start > 0 and text[start - 1] in "\"'`"
    found = _name_before(text, start - quoted)
    if found is None:
        return False
    name, spaced = found
    if name.upper() in ("PWD", "OLDPWD"):  # the shell's working directory
        return False
    env_style = any(c.isalpha() for c in name) and name.upper() == name
    password = bool(_PASSWORD_WORD.search(name))
    if quoted:
        if any(c.isspace() for c in value) or _TOKENIZER_MARK.match(value):
            return False
        if password:
            return len(value) >= 3
        if env_style:  # ACCESS_KEY = 'AWS_ACCESS_KEY_ID' names a variable
            return len(value) >= 3 and not _LETTER_NAME.match(value)
        return len(value) >= 6 and any(c.isdigit() for c in value)
    if _NUMBER.match(value):  # an unquoted number is a setting (BYTES_PER_TOKEN = 2.0)
        return False
    if _IDENTIFIER.match(value):  # a variable, attribute or constant in code...
        if env_style and not spaced:  # ...except in a shell assignment (NAME=value)
            return True
        return password and "." not in value and any(c.isdigit() for c in value)
    return env_style or password or (len(value) >= 6 and any(c.isdigit() for c in value))


_AWS_CONTEXT = re.compile(r"(?i:\baws)|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")


def _bare_aws_secret(value: str, text: str, start: int) -> bool:
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)) or shannon_entropy(value) < 4.2 \
            or _WORD_RUN.search(value):
        return False
    return _AWS_CONTEXT.search(text, max(0, start - 300), start + len(value) + 300) is not None


def _real_flag_value(value: str, _text: str, _start: int) -> bool:
    value = value.strip("\"'")
    return bool(value) and not value.startswith(("-", "$", "<", "{")) and _real_password(value)



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
        check=_bare_aws_secret,
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
        check=lambda v, _t, _s: _mixed(v),
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
        check=lambda v, _t, _s: _real_password(v.partition(":")[2]),
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
        check=lambda v, _t, _s: _high_entropy(v),
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
        check=_real_assigned,
    ),
    _rule(
        "password",
        r"--(?:[\w-]*-)?(?:passw(?:or)?d|token|secret|api-?key)(?:=|[ \t]+)"
        r"(?P<v>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|[^\s\"'`]{1,200})",
        ("--",),
        group="v",
        lower=True,
        check=_real_flag_value,
    ),
    _rule(
        "email",
        r"@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])",
        ("@",),
        back=r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}$",
        check=_real_email,
    ),
    _rule(
        "ipv4",
        r"(?<=\d)\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w]|\.\d)",
        (".",),
        back=r"(?<![\w.])\d{1,3}$",
        check=_real_ip,
    ),
    _rule(
        "ipv6",
        r":[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]{0,36}(?:(?<=:)\d{1,3}(?:\.\d{1,3}){3})?(?![\w:])",
        (":",),
        back=r"(?<![\w:.])[0-9A-Fa-f]{0,4}$",
        check=_real_ip,
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
                        check=lambda v, _t, _s: _mixed(v) or len(v) >= 24, lower=lower,
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
