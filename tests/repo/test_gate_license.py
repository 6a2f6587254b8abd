"""License tiers from license files, package metadata and classifiers."""

from __future__ import annotations

from pathlib import Path

import pytest
from identify.vendor.licenses import LICENSES

from swemill.repo.gate import DEFAULT_COPYLEFT, GatePolicy, gate_directory, license_of
from swemill.repo.gate.spdx import CLASSIFIERS, normalize, tier_of
from swemill.repo.sample import sample_path

TEXTS = dict(LICENSES)  # SPDX id -> full license text, as shipped by identify


def _tree(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("spdx", "filename", "expected", "tier"),
    [
        ("MIT", "LICENSE", "MIT", "redistributable"),
        ("BSD-3-Clause", "LICENSE.txt", "BSD-3-Clause", "redistributable"),
        ("BSD-2-Clause", "LICENCE", "BSD-2-Clause", "redistributable"),
        ("Apache-2.0", "LICENSE", "Apache-2.0", "redistributable"),
        ("ISC", "LICENSE.md", "ISC", "redistributable"),
        ("GPL-3.0", "COPYING", "GPL-3.0-only", "trainable-only"),
        ("GPL-2.0", "COPYING", "GPL-2.0-only", "trainable-only"),
        ("AGPL-3.0", "LICENSE", "AGPL-3.0-only", "trainable-only"),
        ("LGPL-3.0", "COPYING.LESSER", "LGPL-3.0-only", "trainable-only"),
        ("MPL-2.0", "LICENSE", "MPL-2.0", "trainable-only"),
        ("Unlicense", "UNLICENSE", "Unlicense", "redistributable"),
    ],
)
def test_license_file_text(
    tmp_path: Path, spdx: str, filename: str, expected: str, tier: str
) -> None:
    root = _tree(tmp_path / "t", {filename: TEXTS[spdx], "mod.py": "x = 1\n"})
    found, got_tier, evidence = license_of(root)
    assert (found, got_tier) == (expected, tier)
    assert evidence == [f"{filename} (text): {expected}"]


def test_gpl_tree_is_trainable_only_in_the_verdict(tmp_path: Path) -> None:
    root = _tree(tmp_path / "gpl", {"COPYING": TEXTS["GPL-3.0"]})
    verdict = gate_directory(root, source=str(root))
    assert verdict.license_tier == "trainable-only"
    assert verdict.allowed
    refused = gate_directory(root, source=str(root), policy=GatePolicy(copyleft_policy="refuse"))
    assert not refused.allowed
    assert "copyleft" in refused.reason


def test_copyleft_families_are_configurable(tmp_path: Path) -> None:
    root = _tree(tmp_path / "mpl", {"LICENSE": TEXTS["MPL-2.0"]})
    assert license_of(root)[1] == "trainable-only"
    assert license_of(root, copyleft=DEFAULT_COPYLEFT - {"MPL"})[1] == "unknown"


def test_bsd_text_with_project_name_and_notices_uses_key_phrases(tmp_path: Path) -> None:
    text = TEXTS["BSD-3-Clause"].replace("the copyright holder", "Acme Widgets Inc.")
    text += "\n\nThird-party notices\n===================\n" + "vendored/tiny.py: see header\n" * 80
    root = _tree(tmp_path / "bsd", {"LICENSE.rst": text})
    assert license_of(root)[:2] == ("BSD-3-Clause", "redistributable")


def test_gpl_short_notice_is_or_later(tmp_path: Path) -> None:
    notice = (
        "This program is free software: you can redistribute it and/or modify it under the\n"
        "terms of the GNU General Public License as published by the Free Software Foundation,\n"
        "either version 3 of the License, or (at your option) any later version.\n"
    )
    root = _tree(tmp_path / "n", {"COPYING.txt": notice})
    assert license_of(root)[:2] == ("GPL-3.0-or-later", "trainable-only")


def test_no_license_is_unknown(tmp_path: Path) -> None:
    root = _tree(tmp_path / "none", {"setup.py": "from setuptools import setup\nsetup(name='x')\n"})
    spdx, tier, evidence = license_of(root)
    assert (spdx, tier) == (None, "unknown")
    assert "no license" in evidence[-1]
    verdict = gate_directory(root, source="x", policy=GatePolicy(refuse_unknown=True))
    assert not verdict.allowed
    assert gate_directory(root, source="x").allowed


def test_unrecognised_license_file_is_unknown(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", {"LICENSE": "All rights reserved. Do not copy.\n"})
    assert license_of(root)[:2] == (None, "unknown")


def test_classifier_only(tmp_path: Path) -> None:
    root = _tree(tmp_path / "c", {"setup.py": (
        "from setuptools import setup\n"
        "setup(name='c', classifiers=[\n"
        "    'Programming Language :: Python',\n"
        "    'License :: OSI Approved :: GNU General Public License v3 (GPLv3)',\n"
        "])\n"
    )})
    spdx, tier, evidence = license_of(root)
    assert (spdx, tier) == ("GPL-3.0-only", "trainable-only")
    assert evidence == ["setup.py classifier: GPL-3.0-only"]


def test_pyproject_only_expression(tmp_path: Path) -> None:
    pyproject = '[project]\nname = "p"\nlicense = "Apache-2.0"\n'
    root = _tree(tmp_path / "p", {"pyproject.toml": pyproject})
    assert license_of(root) == (
        "Apache-2.0", "redistributable", ["pyproject.toml [project] license: Apache-2.0"]
    )


def test_pyproject_license_table_text_and_file(tmp_path: Path) -> None:
    pyproject = '[project]\nlicense = {text = "BSD License"}\n'
    text_tree = _tree(tmp_path / "a", {"pyproject.toml": pyproject})
    assert license_of(text_tree)[:2] == ("BSD-3-Clause", "redistributable")
    file_tree = _tree(tmp_path / "b", {
        "pyproject.toml": '[project]\nlicense = {file = "docs/TERMS"}\n',
    })
    (file_tree / "docs").mkdir()
    (file_tree / "docs" / "TERMS").write_text(TEXTS["AGPL-3.0"], encoding="utf-8")
    assert license_of(file_tree)[:2] == ("AGPL-3.0-only", "trainable-only")


def test_setup_cfg_and_pkg_info(tmp_path: Path) -> None:
    cfg = _tree(tmp_path / "cfg", {"setup.cfg": "[metadata]\nname = q\nlicense = MIT License\n"})
    assert license_of(cfg)[:2] == ("MIT", "redistributable")
    pkg = _tree(tmp_path / "pkg", {"PKG-INFO": (
        "Metadata-Version: 2.4\nName: r\nVersion: 1.0\nLicense-Expression: MIT OR GPL-3.0-only\n"
    )})
    assert license_of(pkg)[:2] == ("MIT OR GPL-3.0-only", "redistributable")


def test_license_file_beats_metadata_and_disagreement_is_recorded(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d", {
        "LICENSE": TEXTS["GPL-3.0"],
        "setup.py": "setup(name='d', license='MIT')\n",
    })
    spdx, tier, evidence = license_of(root)
    assert (spdx, tier) == ("GPL-3.0-only", "trainable-only")
    assert "setup.py license=: MIT" in evidence
    assert "sources disagree" in evidence[-1]


def test_two_license_files_without_a_declared_choice_both_apply(tmp_path: Path) -> None:
    root = _tree(tmp_path / "two", {"LICENSE.MIT": TEXTS["MIT"], "LICENSE.GPL": TEXTS["GPL-2.0"]})
    assert license_of(root)[:2] == ("GPL-2.0-only AND MIT", "trainable-only")


def test_the_sample_is_mit() -> None:
    spdx, tier, evidence = license_of(sample_path())
    assert (spdx, tier) == ("MIT", "redistributable")
    assert "LICENSE (text): MIT" in evidence


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("MIT License", "MIT"), ("Apache 2.0", "Apache-2.0"), ("GPLv3+", "GPL-3.0-or-later"),
        ("LGPL-2.1+", "LGPL-2.1-or-later"), ("BSD-3-Clause OR MIT", "BSD-3-Clause OR MIT"),
        ("Proprietary", None), ("", None), ("see LICENSE", None),
    ],
)
def test_normalize(value: str, expected: str | None) -> None:
    assert normalize(value) == expected


@pytest.mark.parametrize(
    ("expression", "tier"),
    [
        ("MIT OR GPL-3.0-only", "redistributable"),
        ("MIT AND GPL-3.0-only", "trainable-only"),
        ("GPL-2.0-only WITH Classpath-exception-2.0", "trainable-only"),
        ("LicenseRef-Proprietary", "unknown"),
        (None, "unknown"),
    ],
)
def test_tier_of_expressions(expression: str | None, tier: str) -> None:
    assert tier_of(expression) == tier


def test_every_classifier_we_map_exists() -> None:
    from trove_classifiers import classifiers

    assert set(CLASSIFIERS) <= classifiers
