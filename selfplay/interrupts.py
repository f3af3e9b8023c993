"""The exception that stands for a termination signal (SIGTERM, SIGHUP) in Python code, and
signals held until the main code checks for them."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so that ``finally`` blocks and context
    managers run (engine processes stopped, files closed) as they do for Ctrl-C; the command
    line exits with status ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_at_checks() -> Iterator[Callable[[], None]]:
    """Ctrl-C, SIGTERM and SIGHUP during the block are held, then raised by the handlers they
    had before, in the main code: where the block calls the check it is given, and at its end
    (also when the block fails: the stop wins). Raised at any bytecode instead, one could land
    in a callback whose exceptions Python only prints (JAX's garbage-collection hook:
    "Exception ignored ... KeyboardInterrupt"), and the command went on to train. A second
    signal is raised at once (stop now). Outside the main thread the check does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    came: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():  # None: set outside Python, taken as default
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def deliver() -> None:
        signum = came[0]
        came.clear()
        restore()
        signal.raise_signal(signum)  # the handler it had: raises here, or ends the process

    def hold(signum: int, _frame: object) -> None:
        came.append(signum)
        if len(came) > 1:
            deliver()

    def check() -> None:
        if came:
            deliver()

    for sig in STOP_SIGNALS:
        signal.signal(sig, hold)
    try:
        yield check
    except KeyboardInterrupt:  # Terminated included: a signal already on its way out
        restore()
        raise
    except BaseException:
        if came:
            deliver()  # the stop, its context the error the block raised
        restore()
        raise
    if came:
        deliver()
    restore()


def end_interrupted_process(status: int) -> None:
    """End an interrupted command's process now, with ``status``, when a runtime with worker
    threads that interpreter exit tears down unsafely is loaded: JAX's compiler threads, still
    compiling what the interrupted code asked for, used the client exit had destroyed (a
    segfault, exit status 139 instead of 130 / 143). Output is flushed first; the command's
    own clean-up (``finally`` blocks: checkpoints, engines, files) has run before."""
    if sys.modules.get("jax") is None:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
