"""What every command of the ``selfplay`` CLI (and every script in ``tools/``) shares:
one-line input errors, ``--seed``, ``--json`` output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class UserError(Exception):
    """An error caused by input: printed as one line, no traceback."""


def seed_flag(value: int | None) -> int | None:
    """``--seed``, checked."""
    if value is not None and not 0 <= value < 2**63:
        raise UserError(f"--seed must be in 0..2**63-1, got {value}")
    return value


def emit(result: dict[str, Any], as_json: bool, human: str) -> None:
    """One JSON object on stdout with ``--json``, else the human line."""
    print(json.dumps(result) if as_json else human)


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions bad input raises: printed as one ``error:`` line, never a traceback."""
    from games.core import GameError
    from games.options import OptionError
    from league.db import LeagueError
    from selfplay.checkpoint import CheckpointError
    from selfplay.config import ConfigError
    from selfplay.data_parallel import RankLost

    # OSError: a path that is a directory, unwritable or missing; UnicodeDecodeError: a
    # config file that is not text; UnicodeEncodeError: a path that is not valid UTF-8
    return (UserError, GameError, OptionError, ConfigError, CheckpointError, OSError,
            UnicodeDecodeError, UnicodeEncodeError, LeagueError, RankLost)


def run_tool(main: Callable[[], object]) -> NoReturn:
    """Run a ``tools/`` script's ``main`` as the CLI runs its commands: bad input is one
    ``error:`` line and exit status 2, Ctrl-C exit status 130; an int ``main`` returns is
    the exit status (anything else: 0)."""
    try:
        code = main()
    except user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
