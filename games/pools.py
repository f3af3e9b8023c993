"""Worker processes: leaving stop signals to their parent, stopping a pool at once."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
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


def exit_with_parent(poll_seconds: float = 0.5) -> None:
    """In a worker process: end it at once when its parent is gone (killed with SIGKILL, or by
    a signal it had no handler for), instead of finishing minutes of work nobody will read.

    A daemon thread waits on multiprocessing's sentinel of the parent (its end of a pipe,
    closed when it dies, also when that was before this call: the pid the worker saw then
    was already its new parent's, and it waited forever); outside multiprocessing, it polls
    the parent's pid."""
    parent = multiprocessing.parent_process()
    parent_pid = os.getppid()

    def watch() -> None:
        if parent is not None:
            parent.join()
        else:
            while os.getppid() == parent_pid:
                time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def detached_worker_init() -> None:
    """A pool initializer for long-running workers: stop signals are the parent's to handle
    (:func:`ignore_stop_signals`), and the worker ends with its parent
    (:func:`exit_with_parent`)."""
    ignore_stop_signals()
    exit_with_parent()
