"""Shared fixtures. Tests use the package's shipped fakes, never patches of its own code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own swemill cache unless it asks for the shared session one."""
    if os.environ.get("SWEMILL_TEST_SHARED_CACHE"):
        return
    monkeypatch.setenv("SWEMILL_CACHE", str(tmp_path_factory.mktemp("swemill-cache")))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache shared by the whole session (environments are slow to build)."""
    return tmp_path_factory.mktemp("swemill-shared-cache")
