"""Which license a source tree is under, and what that allows us to do with data made from it.

Evidence comes from three places, strongest first: the license files at the top of the tree
(full texts matched with ``identify``'s SPDX text matcher, then by key phrases for texts with
extra notices around them), the package metadata (pyproject, setup.cfg, setup.py, PKG-INFO,
package.json) and trove classifiers. Every finding is kept as evidence, including those that
lost to a stronger one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from swemill.core.records import LicenseTier
from swemill.repo.gate import metadata
from swemill.repo.gate.spdx import CLASSIFIERS, DEFAULT_COPYLEFT, normalize, tier_of

__all__ = ["Finding", "license_of", "findings_of", "match_text"]

_LICENSE_FILE = re.compile(r"^(licen[cs]e|copying|unlicense)([-._].*)?$", re.IGNORECASE)
_MAX_TEXT = 200_000

# Key phrases, most specific first: the LGPL and AGPL texts mention the GPL too.
_PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AGPL-3.0-only", ("gnu affero general public license", "version 3")),
    ("LGPL-3.0-only", ("gnu lesser general public license", "version 3")),
    ("LGPL-2.1-only", ("gnu lesser general public license", "version 2.1")),
    ("GPL-3.0-or-later", ("gnu general public license", "either version 3", "any later version")),
    ("GPL-2.0-or-later", ("gnu general public license", "either version 2", "any later version")),
    ("GPL-3.0-only", ("gnu general public license", "version 3, 29 june 2007")),
    ("GPL-2.0-only", ("gnu general public license", "version 2, june 1991")),
    ("MPL-2.0", ("mozilla public license", "2.0")),
    ("Apache-2.0", ("apache license", "version 2.0")),
    ("MIT", ("permission is hereby granted, free of charge, to any person obtaining a copy",)),
    ("BSD-3-Clause", ("redistribution and use in source and binary forms", "neither the name")),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",)),
    ("ISC", ("permission to use, copy, modify, and/or distribute this software for any purpose",
             "provided that the above copyright notice")),
    ("0BSD", ("permission to use, copy, modify, and/or distribute this software for any purpose",)),
    ("Unlicense", ("this is free and unencumbered software released into the public domain",)),
    ("Zlib", ("altered source versions must be plainly marked as such",)),
    ("PSF-2.0", ("python software foundation", "license agreement")),
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of evidence: where it was found and the SPDX expression it names."""

    where: str
    spdx: str
    strength: int  # 0: license file, 1: declared SPDX expression, 2: free-text field, 3: classifier

    def __str__(self) -> str:
        return f"{self.where}: {self.spdx}"


def match_text(path: Path) -> str | None:
    """The SPDX id of a license text file, or None when it is not one we recognise."""
    try:
        from identify.identify import license_id

        found = license_id(str(path))
    except (OSError, UnicodeDecodeError, ImportError):
        found = None
    if found:
        return normalize(found) or found
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:_MAX_TEXT]
    except OSError:
        return None
    flat = " ".join(text.lower().split())
    for spdx, phrases in _PHRASES:
        if all(phrase in flat for phrase in phrases):
            return spdx
    return None


def _file_findings(root: Path) -> list[Finding]:
    found = []
    for entry in sorted(root.iterdir()):
        if entry.is_file() and _LICENSE_FILE.match(entry.name):
            spdx = match_text(entry)
            if spdx:
                found.append(Finding(f"{entry.name} (text)", spdx, 0))
    return found


def _metadata_findings(root: Path) -> list[Finding]:
    found = []
    for where, value, kind in metadata.license_fields(root):
        if kind == "classifier":
            spdx = CLASSIFIERS.get(value)
            strength = 3
        elif kind == "file":
            target = (root / value).resolve()
            ok = target.is_file() and target.is_relative_to(root.resolve())
            spdx = match_text(target) if ok else None
            strength = 0
        else:
            spdx = normalize(value)
            strength = 1 if kind == "expression" else 2
        if spdx:
            found.append(Finding(where, spdx, strength))
    return found


def findings_of(root: Path) -> list[Finding]:
    return _file_findings(root) + _metadata_findings(root)


def _decide(findings: list[Finding]) -> str | None:
    if not findings:
        return None
    best = min(f.strength for f in findings)
    chosen = sorted({f.spdx for f in findings if f.strength == best})
    if len(chosen) == 1:
        return chosen[0]
    # Several license files naming different licenses: a declared expression that names
    # them all says how they combine; without one, all of them apply.
    for f in findings:
        if f.strength == 1 and all(spdx in f.spdx for spdx in chosen):
            return f.spdx
    return " AND ".join(f"({spdx})" if " " in spdx else spdx for spdx in chosen)


def license_of(
    path: Path, *, copyleft: frozenset[str] = DEFAULT_COPYLEFT
) -> tuple[str | None, LicenseTier, list[str]]:
    """``(SPDX expression or None, tier, evidence lines)`` for the tree at ``path``."""
    root = Path(path)
    findings = findings_of(root)
    spdx = _decide(findings)
    evidence = [str(f) for f in findings]
    if spdx is None:
        evidence.append("no license file, license metadata or license classifier found")
    elif len({f.spdx for f in findings}) > 1:
        evidence.append(f"sources disagree; chose {spdx} from the strongest evidence")
    return spdx, tier_of(spdx, copyleft), evidence
