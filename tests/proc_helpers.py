"""Helpers for tests that run a command in a subprocess and stop it with a signal."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def count_matches(path: Path) -> int:
    """Matches stored in the league database ``path`` (0 before it exists or has its schema)."""
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=10) as conn:
            return int(conn.execute("SELECT count(*) FROM matches").fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def signal_when(proc: subprocess.Popen[str], ready: Callable[[], bool], sig: signal.Signals,
                wait: float = 60.0, timeout: float = 30.0) -> tuple[str, float]:
    """Once ``ready()`` (polled for up to ``wait`` s; the process must still run), send ``sig``;
    ``proc``'s stderr and the seconds it took to exit. A process still running ``timeout`` s
    after the signal is killed (and the test fails on ``TimeoutExpired``)."""
    try:
        deadline = time.monotonic() + wait
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        start = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=timeout)
        return err, time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
