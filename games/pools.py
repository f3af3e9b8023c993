"""Stopping a process pool at once, whatever its workers are doing."""

from __future__ import annotations

import contextlib
from concurrent.futures import ProcessPoolExecutor


def stop_process_pool(pool: ProcessPoolExecutor, kill: bool = False) -> None:
    """Drop the queued work and end the workers now (``shutdown(wait=True)`` would wait for
    work that can run for minutes): SIGTERM, or SIGKILL with ``kill`` (for workers that ignore
    SIGTERM). The executor has no public way to reach its processes before Python 3.14, hence
    ``_processes``."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            if kill:
                process.kill()
            else:
                process.terminate()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=10)
