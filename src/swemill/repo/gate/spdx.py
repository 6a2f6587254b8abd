"""SPDX ids: normalising free-form license names and expressions, and tiering them.

Expressions are parsed with ``license-expression``; the names people write into package
metadata ("MIT License", "Apache 2.0", "GPLv3+") go through a small alias table first.
"""

from __future__ import annotations

import re
from functools import cache

from swemill.core.records import LicenseTier

__all__ = ["DEFAULT_COPYLEFT", "PERMISSIVE", "CLASSIFIERS", "normalize", "tier_of"]

# Families whose licenses carry copyleft obligations: trainable-only by default.
DEFAULT_COPYLEFT = frozenset(
    {"GPL", "AGPL", "LGPL", "MPL", "EPL", "EUPL", "CDDL", "OSL", "MS-RL", "CC-BY-SA"}
)
PERMISSIVE = frozenset({
    "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "BSD-3-Clause-Clear", "0BSD", "Apache-2.0",
    "ISC", "PSF-2.0", "Python-2.0", "Unlicense", "Zlib", "BSL-1.0", "CC0-1.0", "CC-BY-4.0",
    "NCSA", "PostgreSQL", "UPL-1.0", "WTFPL", "AFL-3.0", "Artistic-2.0", "ECL-2.0", "MS-PL",
    "HPND", "X11", "Unicode-3.0", "BlueOak-1.0.0",
})

_ALIASES = {
    "mit": "MIT", "mit license": "MIT", "the mit license": "MIT", "expat": "MIT",
    "mit-0": "MIT-0",
    "bsd": "BSD-3-Clause", "bsd license": "BSD-3-Clause", "new bsd": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause", "modified bsd": "BSD-3-Clause",
    "revised bsd": "BSD-3-Clause", "3-clause bsd": "BSD-3-Clause", "bsd 3-clause": "BSD-3-Clause",
    "bsd-3": "BSD-3-Clause", "bsd3": "BSD-3-Clause", "3-clause bsd license": "BSD-3-Clause",
    "simplified bsd": "BSD-2-Clause", "2-clause bsd": "BSD-2-Clause", "bsd-2": "BSD-2-Clause",
    "bsd 2-clause": "BSD-2-Clause", "freebsd": "BSD-2-Clause",
    "apache": "Apache-2.0", "apache 2": "Apache-2.0", "apache 2.0": "Apache-2.0",
    "apache-2": "Apache-2.0", "apache2": "Apache-2.0", "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0", "apache license version 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0", "apache software license 2.0": "Apache-2.0",
    "asl 2.0": "Apache-2.0", "apache license": "Apache-2.0",
    "isc": "ISC", "isc license": "ISC",
    "psf": "PSF-2.0", "psf license": "PSF-2.0", "psfl": "PSF-2.0",
    "python software foundation license": "PSF-2.0",
    "mpl 2.0": "MPL-2.0", "mpl-2": "MPL-2.0", "mpl2": "MPL-2.0",
    "mozilla public license 2.0": "MPL-2.0",
    "gpl": "GPL-2.0-or-later", "gnu gpl": "GPL-2.0-or-later",
    "gplv2": "GPL-2.0-only", "gpl v2": "GPL-2.0-only", "gpl-2": "GPL-2.0-only",
    "gpl2": "GPL-2.0-only",
    "gplv2+": "GPL-2.0-or-later", "gpl-2+": "GPL-2.0-or-later",
    "gplv3": "GPL-3.0-only", "gpl v3": "GPL-3.0-only", "gpl-3": "GPL-3.0-only",
    "gpl3": "GPL-3.0-only",
    "gnu gplv3": "GPL-3.0-only", "gplv3+": "GPL-3.0-or-later", "gpl-3+": "GPL-3.0-or-later",
    "lgpl": "LGPL-2.1-or-later", "lgplv2": "LGPL-2.0-only", "lgplv2.1": "LGPL-2.1-only",
    "lgpl-2.1": "LGPL-2.1-only", "lgplv2+": "LGPL-2.0-or-later", "lgplv3": "LGPL-3.0-only",
    "lgpl-3": "LGPL-3.0-only", "lgplv3+": "LGPL-3.0-or-later",
    "agpl": "AGPL-3.0-only", "agplv3": "AGPL-3.0-only", "agpl-3": "AGPL-3.0-only",
    "agplv3+": "AGPL-3.0-or-later",
    "unlicense": "Unlicense", "the unlicense": "Unlicense",
    "zlib": "Zlib", "zlib license": "Zlib", "cc0": "CC0-1.0", "boost": "BSL-1.0",
}

CLASSIFIERS = {
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: MIT No Attribution License (MIT-0)": "MIT-0",
    "License :: OSI Approved :: BSD License": "BSD-3-Clause",
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: Zero-Clause BSD (0BSD)": "0BSD",
    "License :: OSI Approved :: zlib/libpng License": "Zlib",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "License :: OSI Approved :: Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: GNU General Public License (GPL)": "GPL-2.0-or-later",
    "License :: OSI Approved :: GNU General Public License v2 (GPLv2)": "GPL-2.0-only",
    "License :: OSI Approved :: GNU General Public License v2 or later (GPLv2+)":
        "GPL-2.0-or-later",
    "License :: OSI Approved :: GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)":
        "GPL-3.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v2 (LGPLv2)": "LGPL-2.0-only",
    "License :: OSI Approved :: GNU Lesser General Public License v2 or later (LGPLv2+)":
        "LGPL-2.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "License :: OSI Approved :: GNU Lesser General Public License v3 or later (LGPLv3+)":
        "LGPL-3.0-or-later",
    "License :: OSI Approved :: GNU Library or Lesser General Public License (LGPL)":
        "LGPL-2.1-or-later",
    "License :: OSI Approved :: GNU Affero General Public License v3": "AGPL-3.0-only",
    "License :: OSI Approved :: GNU Affero General Public License v3 or later (AGPLv3+)":
        "AGPL-3.0-or-later",
    "License :: OSI Approved :: Eclipse Public License 2.0 (EPL-2.0)": "EPL-2.0",
    "License :: OSI Approved :: European Union Public Licence 1.2 (EUPL 1.2)": "EUPL-1.2",
    "License :: CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
}


@cache
def _licensing():  # type: ignore[no-untyped-def]
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


def normalize(value: str) -> str | None:
    """An SPDX expression for ``value``, or None when it names no license we know."""
    text = " ".join(value.split())
    if not text or len(text) > 200:
        return None
    alias = _ALIASES.get(text.lower().strip(" .")) or _ALIASES.get(
        re.sub(r"\s*\blicen[cs]e\b\s*", " ", text.lower()).strip(" .")
    )
    if alias:
        return alias
    licensing = _licensing()
    try:
        if licensing.validate(text).errors:
            return None
        parsed = licensing.parse(text)
    except Exception:  # the parser raises several unrelated types on odd input
        return None
    return None if parsed is None else str(parsed.render())


def _family(key: str) -> str:
    return re.sub(r"-\d.*$", "", key.upper())


def _symbol_tier(key: str, copyleft: frozenset[str]) -> LicenseTier:
    if key in PERMISSIVE:
        return "redistributable"
    if _family(key) in {family.upper() for family in copyleft}:
        return "trainable-only"
    return "unknown"


_RANK: dict[LicenseTier, int] = {"redistributable": 0, "trainable-only": 1, "unknown": 2}


def tier_of(expression: str | None, copyleft: frozenset[str] = DEFAULT_COPYLEFT) -> LicenseTier:
    """AND takes the strictest tier of its parts, OR the most permissive (the user may choose)."""
    if not expression:
        return "unknown"
    from license_expression import AND, OR, LicenseSymbol, LicenseWithExceptionSymbol

    def walk(node: object) -> LicenseTier:
        if isinstance(node, LicenseWithExceptionSymbol):
            return _symbol_tier(node.license_symbol.key, copyleft)
        if isinstance(node, LicenseSymbol):
            return _symbol_tier(node.key, copyleft)
        tiers = [walk(arg) for arg in getattr(node, "args", ())]
        if not tiers:
            return "unknown"
        if isinstance(node, OR):
            return min(tiers, key=_RANK.__getitem__)
        if isinstance(node, AND):
            return max(tiers, key=_RANK.__getitem__)
        return "unknown"

    try:
        return walk(_licensing().parse(expression))
    except Exception:
        return "unknown"
