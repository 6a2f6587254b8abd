"""The probe's heavy dependencies, imported only when a probe runs."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from swemill.core.errors import MissingDependency

__all__ = ["require", "INSTALL_HINT"]

INSTALL_HINT = ("pip install 'swemill[probe]' (in a swemill checkout, `make setup` builds "
                ".venv-probe with a CPU torch: run .venv-probe/bin/swemill probe ...)")
_MODULES = ("torch", "transformers", "peft", "trl", "datasets", "tokenizers")


def require() -> dict[str, ModuleType]:
    """Import torch, transformers, PEFT, TRL, datasets and tokenizers, or say how to get them."""
    # Looked up before importing: transformers without torch prints a warning on import.
    missing = [name for name in _MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingDependency(
            f"swemill probe needs the 'probe' extra (missing: {', '.join(missing)}): "
            + INSTALL_HINT
        )
    return {name: importlib.import_module(name) for name in _MODULES}
