"""What the league database stores and returns: players, matches, leaderboard rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Player:
    id: int
    name: str
    kind: str
    path: str | None
    metadata: dict[str, Any]
    frozen: bool
    broken: str | None  # why its file could not be used, or None
    created: float


@dataclass(frozen=True)
class Match:
    id: int
    key: str
    player_a: int
    player_b: int
    side_a: int  # seat of player a; b plays the other seat
    map: str
    seed: int | None  # the match's seed in its schedule (tournament.match_seed); engines that
    # seed single games (microRTS bot-vs-bot) play it from this seed, others from the batch's
    outcome: int  # for player a: 1 win, 0 draw, -1 loss
    length: int
    duration: float
    created: float


class MatchRecord(NamedTuple):
    """A finished game to store (see :meth:`LeagueDB.record_match`)."""

    a: int
    b: int
    outcome: int  # for player a: 1 win, 0 draw, -1 loss
    key: str  # idempotency key: a second match with the same key is ignored
    side_a: int = 0
    map: str = ""
    seed: int | None = None
    length: int = 0
    duration: float = 0.0


@dataclass(frozen=True)
class Standing:
    """One leaderboard row (``to_json`` gives the fields of ``league leaderboard --json``)."""

    rank: int
    player_id: int
    name: str
    kind: str
    mu: float
    sigma: float
    conservative: float
    elo: float
    games: int
    wins: int
    draws: int
    losses: int
    win_rate: float | None  # wins / games (None without games)
    frozen: bool
    broken: str | None
    score: float | None  # (wins + draws / 2) / games, as the payoff matrix (None without games)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def visible(text: str) -> str:
    """``text`` on one terminal line: control characters escaped (a newline or a terminal
    escape sequence in a file's name must not break a line or reach the terminal) and a
    path's undecodable bytes (``\\udcff``, from a file name that is not UTF-8) shown as
    ``\\xff``."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
