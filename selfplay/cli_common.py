"""What every command of the ``selfplay`` CLI shares: one-line input errors, ``--seed``,
``--json`` output."""

from __future__ import annotations

import json
from typing import Any


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
