"""The exception that stands for a termination signal (SIGTERM, SIGHUP) in Python code, and
signals held until the main code checks for them."""

from __future__ import annotations

import contextlib
import signal
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
    had before, in the main code: where the block calls the check it is given, and at its end.
    Raised at any bytecode instead, one could land in a callback whose exceptions Python only
    prints (JAX's garbage-collection hook: "Exception ignored ... KeyboardInterrupt"), and the
    command went on to train. Outside the main thread the check does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    came: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def hold(signum: int, _frame: object) -> None:
        came.append(signum)

    def restore() -> None:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)

    def check() -> None:
        if came:
            signum = came[0]
            came.clear()
            restore()
            signal.raise_signal(signum)  # the handler it had: raises here, or ends the process

    for sig in STOP_SIGNALS:
        signal.signal(sig, hold)
    try:
        yield check
    finally:
        restore()
    if came:
        signal.raise_signal(came[0])
