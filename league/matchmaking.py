"""Opponent sampling: self-play, prioritized fictitious self-play (PFSP), bots, exploiters.

Follows AlphaStar (Vinyals et al. 2019, pseudocode ``league.py``): a payoff table of results
between players, decayed per pair so old results fade, and PFSP weightings ``f(p)`` of the
learner's win rate ``p`` against each candidate (unplayed pairs count as p = ½):

* ``hard``          (1 − p)²       focus on the opponents the learner loses to
* ``variance``      p (1 − p)      focus on even opponents
* ``linear``        1 − p
* ``linear_capped`` min(½, 1 − p)

Roles: the *main* agent mixes latest-vs-latest self-play, PFSP over past snapshots and
scripted bots; a *main exploiter* plays the main agent (or, while it wins < 10% against it,
the main agent's snapshots with PFSP, ``variance`` by default); a *league exploiter* plays PFSP
(``linear_capped`` by default) over every snapshot and bot. Everything is numpy; ids are ints
chosen by the caller (league database player ids, or any other ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Weighting = Literal["hard", "variance", "linear", "linear_capped"]
Role = Literal["main", "main_exploiter", "league_exploiter"]
WEIGHTINGS: tuple[str, ...] = ("hard", "variance", "linear", "linear_capped")
ROLES: tuple[str, ...] = ("main", "main_exploiter", "league_exploiter")

_LEARNER, _SNAPSHOT, _BOT = 0, 1, 2


def pfsp_weights(win_rates: np.ndarray, weighting: Weighting = "hard") -> np.ndarray:
    """Sampling probabilities ``[K]`` from win rates ``[K]``; uniform when all weights are ~0."""
    p = np.asarray(win_rates, np.float64)
    if weighting == "hard":
        w = (1.0 - p) ** 2
    elif weighting == "variance":
        w = p * (1.0 - p)
    elif weighting == "linear":
        w = 1.0 - p
    elif weighting == "linear_capped":
        w = np.minimum(0.5, 1.0 - p)
    else:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; known: {', '.join(WEIGHTINGS)}")
    total = w.sum()
    if total < 1e-10:
        return np.full(len(p), 1.0 / max(len(p), 1))
    return w / total  # type: ignore[no-any-return]


class PayoffTable:
    """Decayed results between players: row player's points and games ``[N, N]``.

    Each new result of a pair first multiplies that pair's totals by ``decay``, so a result
    ``k`` games old weighs ``decay**k``. Win rates count a draw as ½; unplayed pairs are ½.
    """

    def __init__(self, decay: float = 0.99, capacity: int = 64) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.decay = decay
        self.index: dict[int, int] = {}  # player id -> row
        self.ids = np.zeros(capacity, np.int64)  # [cap] row -> player id
        self.points = np.zeros((capacity, capacity))  # [cap, cap] decayed points of row
        self.games = np.zeros((capacity, capacity))  # [cap, cap] decayed games

    def __len__(self) -> int:
        return len(self.index)

    def row(self, pid: int) -> int:
        """The row of ``pid``, adding the player if new."""
        found = self.index.get(pid)
        if found is not None:
            return found
        n = len(self.index)
        if n == len(self.ids):
            self._grow(2 * n)
        self.index[pid] = n
        self.ids[n] = pid
        return n

    def _grow(self, capacity: int) -> None:
        n = len(self.ids)
        for name in ("points", "games"):
            old = getattr(self, name)
            new = np.zeros((capacity, capacity))
            new[:n, :n] = old
            setattr(self, name, new)
        self.ids = np.concatenate([self.ids, np.zeros(capacity - n, np.int64)])

    def update(self, a: int, b: int, outcome: int) -> None:
        """Add one game: ``outcome`` for ``a`` is 1 win, 0 draw, −1 loss."""
        i, j = self.row(a), self.row(b)
        score = (outcome + 1) / 2.0
        g = self.decay
        self.games[i, j] = g * self.games[i, j] + 1.0
        self.games[j, i] = g * self.games[j, i] + 1.0
        self.points[i, j] = g * self.points[i, j] + score
        self.points[j, i] = g * self.points[j, i] + 1.0 - score

    def update_many(self, a: np.ndarray, b: np.ndarray, outcome: np.ndarray) -> None:
        """Add games ``[M]`` in order (e.g. a league database's stored matches)."""
        for x, y, o in zip(np.asarray(a).tolist(), np.asarray(b).tolist(),
                           np.asarray(outcome).tolist(), strict=True):
            self.update(x, y, o)

    def state_dict(self) -> dict[str, Any]:
        """The table as plain arrays: player ids in row order and their decayed results."""
        n = len(self.index)
        return {"decay": self.decay, "ids": self.ids[:n].copy(),
                "points": self.points[:n, :n].copy(), "games": self.games[:n, :n].copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: same rows, same results."""
        ids = np.asarray(state["ids"], np.int64)
        n = len(ids)
        capacity = max(len(self.ids), n)
        self.decay = float(state["decay"])
        self.index = {int(pid): row for row, pid in enumerate(ids.tolist())}
        self.ids = np.zeros(capacity, np.int64)
        self.ids[:n] = ids
        self.points = np.zeros((capacity, capacity))
        self.games = np.zeros((capacity, capacity))
        self.points[:n, :n] = state["points"]
        self.games[:n, :n] = state["games"]

    def win_rates(self, pid: int, opponents: np.ndarray) -> np.ndarray:
        """Decayed score of ``pid`` against each of ``opponents`` ``[K]`` (½ if unplayed)."""
        i = self.row(pid)
        rows = np.fromiter((self.row(int(o)) for o in opponents), np.int64, len(opponents))
        return self.win_rates_rows(i, rows)

    def win_rates_rows(self, i: int, rows: np.ndarray) -> np.ndarray:
        games = self.games[i, rows]  # [K]
        points = self.points[i, rows]
        return np.where(games > 0, points / np.maximum(games, 1e-300), 0.5)


@dataclass(frozen=True)
class MatchmakingConfig:
    """How the main agent picks opponents (the three shares are normalized)."""

    self_play: float = 0.35
    """share of latest-vs-latest games (the learner against itself)"""
    pfsp: float = 0.50
    """share of games against past snapshots, picked by PFSP"""
    bots: float = 0.15
    """share of games against scripted bots, picked by PFSP"""
    weighting: Weighting = "hard"
    """PFSP weighting of the main agent"""
    decay: float = 0.99
    """per-pair decay of old results in the payoff table"""
    window: int = 0
    """PFSP over the newest ``window`` snapshots only (0: all)"""
    exploiter_threshold: float = 0.1
    """a main exploiter winning less than this against the main agent plays its snapshots"""
    main_exploiter_weighting: Weighting = "variance"
    """PFSP weighting of a main exploiter over the main agent's snapshots"""
    league_exploiter_weighting: Weighting = "linear_capped"
    """PFSP weighting of league exploiters"""

    def __post_init__(self) -> None:
        shares = (self.self_play, self.pfsp, self.bots)
        if min(shares) < 0 or sum(shares) <= 0:
            raise ValueError(f"self_play, pfsp and bots must be >= 0 with a positive sum, "
                             f"got {shares}")
        for w in (self.weighting, self.main_exploiter_weighting,
                  self.league_exploiter_weighting):
            if w not in WEIGHTINGS:
                raise ValueError(f"unknown PFSP weighting {w!r}; known: {', '.join(WEIGHTINGS)}")


class Matchmaker:
    """The player pool (learners, snapshots, bots), its payoff table and opponent sampling."""

    def __init__(self, config: MatchmakingConfig | None = None, capacity: int = 64) -> None:
        self.config = config or MatchmakingConfig()
        self.payoff = PayoffTable(self.config.decay, capacity)
        self.kind = np.zeros(capacity, np.int8)  # [cap] by payoff row
        self.parent = np.full(capacity, -1, np.int64)  # [cap] learner row of a snapshot
        self.active = np.zeros(capacity, bool)  # [cap]
        self.roles: dict[int, Role] = {}  # learner id -> role
        self.main: int | None = None  # id of the main agent
        self.journal: list[tuple[int, int, int]] | None = None
        """when a list: every game :meth:`record` takes is also appended to it (data-parallel
        ranks send theirs to rank 0's matchmaker this way)"""

    # ----------------------------------------------------------------- pool

    def _add(self, pid: int, kind: int, parent: int = -1) -> int:
        if pid in self.payoff.index and self.active[self.payoff.index[pid]]:
            raise ValueError(f"player {pid} is already in the pool")
        row = self.payoff.row(pid)
        self._sync()
        self.kind[row], self.parent[row], self.active[row] = kind, parent, True
        return row

    def _sync(self) -> None:
        """Grow the per-row arrays with the payoff table (which adds rows on first sight)."""
        grow = len(self.payoff.ids) - len(self.kind)
        if grow > 0:
            self.kind = np.concatenate([self.kind, np.zeros(grow, np.int8)])
            self.parent = np.concatenate([self.parent, np.full(grow, -1, np.int64)])
            self.active = np.concatenate([self.active, np.zeros(grow, bool)])

    def add_learner(self, pid: int, role: Role = "main") -> None:
        """An agent being trained (its current weights); at most one ``main``."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
        if role == "main" and self.main is not None:
            raise ValueError(f"the main agent is already player {self.main}")
        self._add(pid, _LEARNER)
        self.roles[pid] = role
        if role == "main":
            self.main = pid

    def add_snapshot(self, pid: int, learner: int | None = None) -> None:
        """A frozen past copy of ``learner`` (or an external checkpoint when ``None``)."""
        parent = -1 if learner is None else self.payoff.index[learner]
        self._add(pid, _SNAPSHOT, parent)

    def add_bot(self, pid: int) -> None:
        """A scripted opponent."""
        self._add(pid, _BOT)

    def remove(self, pid: int) -> None:
        """Stop offering ``pid`` as an opponent (e.g. its file turned out to be corrupt)."""
        self.active[self.payoff.index[pid]] = False

    def record(self, a: int, b: int, outcome: int) -> None:
        """A finished game (``outcome`` for ``a``), for the payoff table."""
        self.payoff.update(a, b, outcome)
        if self.journal is not None:
            self.journal.append((a, b, outcome))

    def state_dict(self) -> dict[str, Any]:
        """The pool and its payoff table (rows in order: sampling depends on it)."""
        self._sync()  # rows the table added on its own (results against outside players)
        n = len(self.payoff)
        return {"payoff": self.payoff.state_dict(), "kind": self.kind[:n].copy(),
                "parent": self.parent[:n].copy(), "active": self.active[:n].copy(),
                "roles": [[pid, role] for pid, role in self.roles.items()],
                "main": self.main}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into this matchmaker (its config is kept)."""
        self.payoff.load_state_dict(state["payoff"])
        n = len(self.payoff)
        capacity = len(self.payoff.ids)
        self.kind = np.zeros(capacity, np.int8)
        self.parent = np.full(capacity, -1, np.int64)
        self.active = np.zeros(capacity, bool)
        self.kind[:n], self.parent[:n], self.active[:n] = (state["kind"], state["parent"],
                                                           state["active"])
        self.roles = {int(pid): role for pid, role in state["roles"]}
        self.main = None if state["main"] is None else int(state["main"])

    # ----------------------------------------------------------------- sampling

    def _rows(self, kind: int, parent: int | None = None) -> np.ndarray:
        self._sync()
        n = len(self.payoff)
        sel = (self.kind[:n] == kind) & self.active[:n]
        if parent is not None:
            sel &= self.parent[:n] == parent
        return np.flatnonzero(sel)

    def _pfsp(self, me: int, rows: np.ndarray, k: int, weighting: Weighting,
              rng: np.random.Generator) -> np.ndarray:
        probs = pfsp_weights(self.payoff.win_rates_rows(me, rows), weighting)
        return rows[rng.choice(len(rows), size=k, p=probs)]  # type: ignore[no-any-return]

    def sample_opponents(self, n: int, rng: np.random.Generator,
                         learner: int | None = None) -> np.ndarray:
        """Opponent ids ``int64 [n]`` for ``learner`` (default: the main agent).

        An opponent equal to ``learner`` means self-play (latest against latest).
        """
        pid = self.main if learner is None else learner
        if pid is None or pid not in self.roles:
            raise ValueError("no such learner; add_learner() first")
        me = self.payoff.index[pid]
        role = self.roles[pid]
        if role == "main_exploiter":
            rows = self._main_exploiter_rows(me, n, rng)
        elif role == "league_exploiter":
            pool = np.concatenate([self._rows(_SNAPSHOT), self._rows(_BOT)])
            if len(pool) == 0:
                pool = np.array([me])
            rows = self._pfsp(me, pool, n, self.config.league_exploiter_weighting, rng)
        else:
            rows = self._main_rows(me, n, rng)
        return self.payoff.ids[rows].copy()

    def sample_among(self, candidates: np.ndarray, n: int, rng: np.random.Generator,
                     learner: int | None = None,
                     weighting: Weighting | None = None) -> np.ndarray:
        """PFSP picks ``int64 [n]`` among the ids ``candidates`` ``[K]`` by ``learner``'s
        (default: the main agent's) decayed win rates against each, with ``weighting``
        (default: the main agent's). The candidates need not be in the pool: players outside
        it (e.g. engine bots playing in envs of their own) get payoff rows, never offered by
        :meth:`sample_opponents`, and their results count once :meth:`record` stores them."""
        pid = self.main if learner is None else learner
        if pid is None or pid not in self.roles:
            raise ValueError("no such learner; add_learner() first")
        ids = np.asarray(candidates, np.int64)
        if len(ids) == 0:
            raise ValueError("sample_among needs at least one candidate")
        me = self.payoff.row(pid)
        rows = np.fromiter((self.payoff.row(c) for c in ids.tolist()), np.int64, len(ids))
        self._sync()
        picked = self._pfsp(me, rows, n, weighting or self.config.weighting, rng)
        return self.payoff.ids[picked].copy()  # type: ignore[no-any-return]

    def weighting_of(self, learner: int) -> Weighting:
        """The PFSP weighting ``learner``'s role draws its opponents with."""
        role = self.roles[learner]
        return (self.config.main_exploiter_weighting if role == "main_exploiter"
                else self.config.league_exploiter_weighting if role == "league_exploiter"
                else self.config.weighting)

    def _main_rows(self, me: int, n: int, rng: np.random.Generator) -> np.ndarray:
        cfg = self.config
        snaps, bots = self._rows(_SNAPSHOT), self._rows(_BOT)
        if cfg.window > 0:
            snaps = snaps[-cfg.window:]
        shares = np.array([cfg.self_play, cfg.pfsp if len(snaps) else 0.0,
                           cfg.bots if len(bots) else 0.0])
        if shares.sum() <= 0:
            shares[0] = 1.0  # nothing else to play
        kinds = rng.choice(3, size=n, p=shares / shares.sum())  # [n]
        rows = np.full(n, me, np.int64)
        for kind, pool in ((1, snaps), (2, bots)):
            pick = np.flatnonzero(kinds == kind)
            if len(pick):
                rows[pick] = self._pfsp(me, pool, len(pick), cfg.weighting, rng)
        return rows

    def _main_exploiter_rows(self, me: int, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.main is None:
            raise ValueError("a main exploiter needs a main agent; add_learner(role='main')")
        main = self.payoff.index[self.main]
        p_main = self.payoff.win_rates_rows(me, np.array([main]))[0]
        history = self._rows(_SNAPSHOT, parent=main)
        if p_main >= self.config.exploiter_threshold or len(history) == 0:
            return np.full(n, main, np.int64)
        return self._pfsp(me, history, n, self.config.main_exploiter_weighting, rng)
