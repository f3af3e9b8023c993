"""Make the shared test helpers (``proc_helpers``) importable from every test folder, and give
the signal tests default signal dispositions however pytest was started."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def pytest_configure() -> None:
    """A shell starts background jobs with SIGINT ignored and ``nohup`` ignores SIGHUP; children
    inherit both, and the tests that send them (Ctrl-C, a closed terminal) would see nothing.
    Restore what an interactive run has."""
    if sys.platform != "win32":
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_collection_modifyitems(items: list) -> None:  # type: ignore[type-arg]
    """Lux's tests last: once jax has run in the process, its thread pools slow the torch and
    engine tests that follow (9:01 with Lux's tests in their place, 8:02 apart)."""
    items.sort(key=lambda item: "tests/games/lux/" in str(item.fspath).replace("\\", "/"))
