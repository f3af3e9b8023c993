"""Make the shared test helpers (``proc_helpers``) importable from every test folder, and give
the signal tests default signal dispositions however pytest was started."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# Ray's crash handler takes SIGSEGV, which a JVM in the process (microRTS games) raises on
# purpose: a worker that ran microRTS games and then a Ray test crashed ("node down",
# segfault in JIT code). Ray reads the setting when imported (test files import it at
# collection), so it is set before any of them, as games/workers/ray_cluster.py does.
os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")


def _share_the_cores() -> None:
    """Under pytest-xdist, each worker's torch takes its share of the cores (and the processes
    it starts inherit it): two workers each running a pool of every core spin against each
    other (a cell-head test took 123 s beside another worker's, 10 s alone)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        share = max(1, (os.cpu_count() or 1) // workers)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))
        torch.set_num_threads(share)


def pytest_configure() -> None:
    """A shell starts background jobs with SIGINT ignored and ``nohup`` ignores SIGHUP; children
    inherit both, and the tests that send them (Ctrl-C, a closed terminal) would see nothing.
    Restore what an interactive run has."""
    if sys.platform != "win32":
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    _share_the_cores()


def pytest_collection_modifyitems(items: list) -> None:  # type: ignore[type-arg]
    """Lux's tests last (``tests/games/lux/`` and every file named for Lux): once jax has run
    in the process, its thread pools slow the torch and engine tests that follow (9:01 with
    Lux's tests in their place, 8:02 apart)."""

    def runs_jax(item: Any) -> bool:
        path = Path(str(item.fspath))
        return path.parent.name == "lux" or "lux" in path.stem.split("_")

    items.sort(key=runs_jax)
