"""How swemill's log lines are shown, decided once per process.

Modules log with the standard library (``logging.getLogger(__name__)``, all under the
``swemill`` logger) and never configure anything themselves. The process that owns the
terminal picks the handler:

* the CLI: a Rich handler on the CLI's stderr console, so lines and progress bars share it;
  warnings and errors only, unless ``SWEMILL_LOG`` names a level (``SWEMILL_LOG=INFO``);
* a worker (a Ray task, an AWS Batch child): plain one-line records with time, level, pid and
  logger on stderr at INFO, which Ray's worker logs and CloudWatch keep as they are.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["PLAIN_FORMAT", "cli_logging", "worker_logging"]

PLAIN_FORMAT = "%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"
_OURS = "_swemill_handler"


def _level(default: int) -> int:
    name = os.environ.get("SWEMILL_LOG", "").strip().upper()
    level = logging.getLevelName(name) if name else default
    return level if isinstance(level, int) else default


def _install(handler: logging.Handler, level: int) -> None:
    """``handler`` as the swemill logger's only one (a second call replaces the first)."""
    log = logging.getLogger("swemill")
    for old in [h for h in log.handlers if getattr(h, _OURS, False)]:
        log.removeHandler(old)
    setattr(handler, _OURS, True)
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False  # a worker runtime's own root handler would print every line twice


def cli_logging(console: Any) -> None:
    """Rich lines on ``console`` (a ``rich.console.Console`` on stderr)."""
    from rich.logging import RichHandler

    _install(RichHandler(console=console, show_path=False, markup=False), _level(logging.WARNING))


def worker_logging() -> None:
    """Plain lines on stderr at INFO (``SWEMILL_LOG`` may say otherwise)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
    _install(handler, _level(logging.INFO))
