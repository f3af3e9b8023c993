"""The exception that stands for a termination signal (SIGTERM, SIGHUP) in Python code."""

from __future__ import annotations

import signal


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so that ``finally`` blocks and context
    managers run (engine processes stopped, files closed) as they do for Ctrl-C; the command
    line exits with status ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
