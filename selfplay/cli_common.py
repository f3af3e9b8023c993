"""What every command of the ``selfplay`` CLI (and every script in ``tools/``) shares:
one-line input errors, ``--seed``, ``--json`` output."""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn


class UserError(Exception):
    """An error caused by input: printed as one line, no traceback."""


def seed_flag(value: int | None) -> int | None:
    """``--seed``, checked."""
    if value is not None and not 0 <= value < 2**63:
        raise UserError(f"--seed must be in 0..2**63-1, got {value}")
    return value


MAX_TOTAL_STEPS = 2**62
"""the most environment steps a run may be asked for (a typo such as 1e400 is one line)"""


def check_total_steps(total_steps: int | None) -> None:
    """:class:`UserError` for a ``--total-steps`` below 1 or above :data:`MAX_TOTAL_STEPS`."""
    if total_steps is not None and total_steps < 1:
        raise UserError(f"--total-steps must be >= 1, got {total_steps}")
    if total_steps is not None and total_steps > MAX_TOTAL_STEPS:
        shown = (str(total_steps) if total_steps < 10**30 else
                 f"a number of about {int(total_steps.bit_length() * 0.30103) + 1} digits")
        raise UserError(f"--total-steps must be <= {MAX_TOTAL_STEPS:,}, got {shown}")


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


def first_paragraph(doc: str | None) -> str:
    """A module docstring's first paragraph on one line (a tool's ``--help`` description; its
    first line alone stops mid-sentence)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


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


def nonnegative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def check_output(flag: str, path: Path, inputs: Sequence[Path] = ()) -> None:
    """:class:`UserError` before any work when output file ``path`` (given as ``flag``) is
    a folder, lies under a file, cannot be written, or is one of the command's ``inputs``
    (it would be replaced by the output)."""
    target = path.resolve()
    if any(target == Path(f"{p.resolve()}{end}") for p in inputs for end in ("", "-wal", "-shm")):
        raise UserError(f"{flag} {path} is one of the command's inputs; name another file")
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; name a file")
    above = next((p for p in target.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"{flag} {path}: {above} is a file, not a folder")
    if above is not None and above == target.parent:
        try:  # a file made and removed: permissions alone miss /proc and read-only mounts
            with tempfile.NamedTemporaryFile(dir=above, prefix=".probe-"):
                pass
        except OSError as exc:
            raise UserError(f"{flag} {path}: cannot write to {above} "
                            f"({exc.strerror or exc})") from None
