"""Worker processes: leaving stop signals to their parent, stopping a pool at once."""

from __future__ import annotations

import contextlib
import signal
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


def ignore_stop_signals() -> None:
    """In a worker process: ignore Ctrl-C, SIGTERM and SIGHUP, which a terminal or a job
    scheduler sends to the whole process group; they are the parent's to handle (it stops
    its workers itself). Call it before a JVM starts, which then leaves them alone."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
