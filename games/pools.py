"""Worker processes: leaving stop signals to their parent, stopping a pool at once."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
STOP_SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGHUP")


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (if not running) with SIGHUP blocked, as it
    blocks SIGINT and SIGTERM itself: a terminal closed sends SIGHUP to the whole process
    group, which killed the tracker; relaunched, it knew none of the run's semaphores and
    printed a ``KeyError`` traceback for each (and "Some resources might leak"). Call before
    spawning processes; the tracker ends when the last process holding it does."""
    from multiprocessing import resource_tracker

    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None or not hasattr(signal, "pthread_sigmask"):  # Windows: no tracker
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {hangup})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


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
    for sig in _stop_signals():
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # held while it was started (DetachedPool)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _stop_signals())


def _stop_signals() -> list[signal.Signals]:
    return [getattr(signal, n) for n in STOP_SIGNAL_NAMES if hasattr(signal, n)]


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP (delivered when the block ends, not lost): a process
    started meanwhile inherits them blocked, so that a signal sent to the whole process group
    while it starts (importing torch, say) cannot end it with a ``KeyboardInterrupt``
    traceback before it has set itself to ignore them; in the main thread the signal, which
    another of this process's threads may take, is kept from its handler until the end."""
    sigs = _stop_signals()
    main = threading.current_thread() is threading.main_thread()
    pending: list[int] = []
    previous: dict[signal.Signals, Any] = {}
    if main:  # another thread may take the signal: Python's handler would still run here
        def hold(signum: int, _frame: object) -> None:
            pending.append(signum)

        previous = {sig: signal.signal(sig, hold) for sig in sigs}
    masked = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, sigs) if masked else set()
    try:
        yield
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if pending:
            signal.raise_signal(pending[0])  # now, to the handler it had


class DetachedPool(ProcessPoolExecutor):
    """Spawned workers for long-running work whose stop signals are the parent's: each starts
    with them held (:func:`stop_signals_held`, as :meth:`submit` starts workers), ignores them
    (:func:`ignore_stop_signals`) and ends with its parent (:func:`exit_with_parent`), then
    runs ``initializer``. Stop it with :func:`stop_process_pool` and ``kill=True``."""

    def __init__(self, processes: int, initializer: Callable[[], None] | None = None) -> None:
        start_resource_tracker()
        super().__init__(processes, mp_context=multiprocessing.get_context("spawn"),
                         initializer=_detached_init, initargs=(initializer,))

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with stop_signals_held():
            return super().submit(fn, *args, **kwargs)


def _detached_init(initializer: Callable[[], None] | None) -> None:
    detached_worker_init()
    if initializer is not None:
        initializer()


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
