"""The contextual checks of the redaction rules (:mod:`swemill.corpus.redact_rules`).

A rule's regex finds a candidate; its check, given the candidate, the whole text and where the
candidate starts, tells a secret or a piece of PII from what merely looks like one: a template
(``{password}``), a documentation address (``192.0.2.1``, ``example.com``), a version
(``==1.2.3.4``), code (``password = get_pw()``). What each check lets through is listed in
:mod:`swemill.corpus.redact`'s docstring.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
import string
from collections import Counter
from collections.abc import Callable

__all__ = ["Check", "shannon_entropy", "high_entropy", "mixed", "real_password", "real_email",
           "real_ip", "real_assigned", "bare_aws_secret", "real_flag_value"]

Check = Callable[[str, str, int], bool]
"""``check(candidate, text, start)``: True when the candidate is to be redacted."""


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


def high_entropy(value: str) -> bool:
    """A random-looking token: long, mixed characters, high entropy, not a placeholder."""
    if (len(value) < 16 or _DOTTED_NAME.match(value) or _PLACEHOLDER_WORDS.search(value)
            or _word_like(value)):
        return False
    if not any(c.isdigit() for c in value) and (value.islower() or value.isupper()):
        return False  # words and CONSTANT_NAMES, not keys
    hexish = all(c in "0123456789abcdefABCDEF" for c in value)
    return shannon_entropy(value) >= (3.0 if hexish else 3.5)


def mixed(value: str) -> bool:
    """Provider keys mix letters and digits; prose such as ``sk-learn-style`` does not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_TEMPLATE = re.compile(
    r"^(?:\{[^}]*\}|\$\{?\w+\}?|<[^>]*>|\*+|%s|%\(\w+\)s|x+|"
    r"(?:my|your)?(?:password|passwd|pass|pwd|token|secret|key)|foo|bar|baz|qux|foobar)$",
    re.I,
)


def real_password(value: str) -> bool:
    return not _TEMPLATE.match(value)


_RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
_RESERVED_TLDS = (".example", ".test", ".invalid", ".localhost")


_URL_USER = re.compile(r"://[^\s/@:]*:$")


def real_email(value: str, text: str, start: int) -> bool:
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


def real_ip(value: str, text: str, start: int) -> bool:
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


def real_assigned(value: str, text: str, start: int) -> bool:
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


def bare_aws_secret(value: str, text: str, start: int) -> bool:
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)) or shannon_entropy(value) < 4.2 \
            or _WORD_RUN.search(value):
        return False
    return _AWS_CONTEXT.search(text, max(0, start - 300), start + len(value) + 300) is not None


def real_flag_value(value: str, _text: str, _start: int) -> bool:
    value = value.strip("\"'")
    return bool(value) and not value.startswith(("-", "$", "<", "{")) and real_password(value)
