"""Converted Lux replays played back as a teacher game: ``selfplay bc --game lux --replays DIR``.

A replay folder of converted Kaggle episodes (``selfplay import-replays --game lux FILES
--out DIR``, :mod:`games.lux.kaggle_replay`) holds each game's seed, ``env_cfg`` and orders.
Each of the ``E`` envs of a :class:`LuxReplayGame` replays one game in the official engine
and shows, at every main-phase step, both seats' observation planes and legal-action masks
(Jux's, as the training adapter computes them) and the orders the seats sent as labels
(:mod:`games.lux.kaggle_labels`); a finished game is followed by the next one of the stream.
The batches have the training adapter's layout, so a clone is a network of
``selfplay train --game lux``.

**The stream.** The folder's games are split once into a training and a held-out share by
each game's hash (:func:`games.replays.held_out_split`); the shards are read one at a time
in a seeded order per pass, and each env takes the next game. :meth:`replay_position` and
:meth:`resume_at` continue a stream where a checkpoint left it: the games in progress start
again, and their steps already learned come back unlabelled.

**Rewards.** A replay's only reward is the game's outcome at its end (+1 / -1 / 0 per seat,
times ``reward_weights['win']``): the shaped components of the adapter are not rebuilt, so a
value head cloned from replays learns the outcome.

**Labels** are the seats' own orders (``team_names`` as recorded, matched without case, pick
them with ``imitate``; ``winners_only`` keeps the winner's); an order our layout cannot hold
is learned as what the engine did (see :mod:`games.lux.kaggle_labels`), and a label our masks
forbid is left out of the loss by the cloning loss.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.batches import EpisodeTracker
from games.core import Batch, EpisodeStats, GameError, GameSpec
from games.lux.adapter import LuxOptions, lux_spec
from games.lux.kaggle import KaggleError
from games.lux.kaggle_replay import GAME, SHARD_ARRAYS, SOURCE, LuxStep, replay_game
from games.lux.layout import MASK_WIDTH, NVEC
from games.replays import ReplayError, held_out_split, iter_shards, read_manifest, scan


@dataclass(frozen=True)
class LuxReplayRef:
    """One converted game: its shard, its index there and its metadata."""

    shard: Path
    index: int
    meta: dict[str, Any]

    @property
    def key(self) -> list[object]:
        return [self.shard.name, self.index]


def game_meta_problem(meta: object) -> str | None:
    """What is wrong with one converted game's metadata (None if nothing): the keys a replay
    reads, of the types :func:`~games.lux.kaggle_replay.convert_episode` writes."""
    if not isinstance(meta, dict):
        return f"its metadata is {type(meta).__name__}, not a mapping"
    kinds: dict[str, tuple[type, ...]] = {"rules": (str,), "seed": (int,), "env_cfg": (dict,),
                                          "final_hash": (str,), "length": (int,)}
    for key, types in kinds.items():
        value = meta.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            return f"{key} is {value!r}"
    teams, outcome = meta.get("team_names"), meta.get("outcome")
    if not (isinstance(teams, list) and len(teams) == 2
            and all(isinstance(t, str) for t in teams)):
        return f"team_names is {teams!r}, not two names"
    if not (isinstance(outcome, list) and len(outcome) == 2 and all(
            isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x)
            for x in outcome)):
        return f"outcome is {outcome!r}, not two numbers"
    if meta.get("winner") not in (None, 0, 1):
        return f"winner is {meta.get('winner')!r}, not 0, 1 or null"
    return None


def select_lux_games(folder: Path, rules: str, imitate: list[str], winners_only: bool,
                     held_out: bool, share: float) -> list[LuxReplayRef]:
    """The folder's games of the training share (or the ``held_out`` one), checked: converted
    Lux replays of the run's ``rules``, holding every player ``imitate`` names, some of them
    with a winner when ``winners_only``, some reaching the main phase (the games that ended
    in their bidding or placement phase are left out: nothing to learn from)."""
    every: list[LuxReplayRef] = []
    names: set[str] = set()
    for shard in scan(folder, warn=not held_out):  # the training share warned
        engine = shard.meta.get("engine")
        if shard.meta.get("game") != GAME or not isinstance(engine, dict) or engine.get(
                "source") != SOURCE:
            raise ReplayError(f"{shard.path} holds no converted Lux replays (game "
                              f"{shard.meta.get('game')!r}); convert Kaggle episodes with "
                              "`selfplay import-replays --game lux FILES --out DIR`")
        for index, meta in enumerate(shard.games):
            problem = game_meta_problem(meta)
            if problem is not None:
                raise ReplayError(f"{shard.path} game {index} is damaged ({problem}): move "
                                  "the shard out of the folder, or convert its episodes again")
            if meta.get("rules") != rules:
                raise ReplayError(f"{shard.path} game {index} plays the {meta.get('rules')!r} "
                                  f"rules; this run plays {rules!r} (game.options.rules)")
            names.update(str(n).lower() for n in meta.get("team_names", ()))
            every.append(LuxReplayRef(shard.path, index, meta))
    missing = sorted({n.lower() for n in imitate} - names)
    if missing:
        raise ReplayError(f"--imitate {', '.join(missing)}: no such team in {folder} (its "
                          f"teams: {', '.join(sorted(names))})")
    held = held_out_split([f"{ref.shard.name}:{ref.index}" for ref in every], share)
    refs = [ref for ref, h in zip(every, held.tolist(), strict=True) if h == held_out]
    part = "held-out" if held_out else "training"
    if not refs:  # before --winners-only's check, which then named the wrong cause
        raise ReplayError(f"{folder} has no game in its {part} share")
    if winners_only and not any(ref.meta.get("winner") is not None for ref in refs):
        raise ReplayError(f"--winners-only: no game of {folder}'s {part} share has a winner")
    played = [ref for ref in refs if ref.meta["length"] > 0]
    if not played:
        raise ReplayError(f"no game of {folder}'s {part} share reaches the main phase (each "
                          f"of its {len(refs)} ended in the bidding or factory placement): "
                          "nothing to learn from; convert episodes that were played")
    return played


class LuxReplayGame:
    """``num_envs`` envs replaying converted Lux games: a
    :class:`~games.core.SupportsTeachers` and :class:`~games.core.SupportsReplayPosition`
    game (see the module docstring)."""

    def __init__(self, options: LuxOptions, num_envs: int, folder: Path,
                 imitate: list[str] | tuple[str, ...] = (), winners_only: bool = False,
                 held_out: bool = False, share: float = 0.05, seed: int | None = None,
                 name: str = "lux") -> None:
        if num_envs < 1:
            raise GameError(f"num_envs must be >= 1, got {num_envs}")
        from games.lux.engine import rules_named

        rules = rules_named(options.rules)
        self.folder = Path(folder)
        self.refs = select_lux_games(self.folder, rules.name, list(imitate), winners_only,
                                     held_out, share)
        self.spec: GameSpec = lux_spec(name, num_envs, rules.map_size)
        self.imitate_names = {n.lower() for n in imitate}
        self.winners_only = winners_only
        self._win_weight = float(options.reward_weights.get("win", 0.0))
        self._seed = 0 if seed is None else int(seed)
        self._manifest = read_manifest(self.folder)
        self._shards = sorted({ref.shard for ref in self.refs})
        self._by_shard: dict[Path, list[LuxReplayRef]] = {}
        for ref in self.refs:
            self._by_shard.setdefault(ref.shard, []).append(ref)
        e, cells = num_envs, rules.map_size ** 2
        self._epoch, self._order, self._cursor = 0, list[Path](), 0
        self._queue: deque[tuple[LuxReplayRef, bytes]] = deque()
        self._current: list[LuxReplayRef | None] = [None] * e
        self._games: list[Iterator[LuxStep] | None] = [None] * e
        self._steps = np.zeros(e, np.int64)  # main-phase steps shown of each env's game
        self._skip = np.zeros(e, np.int64)  # resumed: steps learned before the checkpoint
        self._restored: dict[int, tuple[LuxReplayRef, bytes]] = {}
        self._tracker = EpisodeTracker(e, 2)
        self._obs = np.zeros((e, 2, *self.spec.obs_shape), np.uint8)
        self._mask = np.zeros((e, 2, cells, MASK_WIDTH), bool)
        self.teacher_actions = np.zeros((e, 2, cells, len(NVEC)), np.int64)
        self.imitate = np.zeros((e, 2), bool)
        self.games_played = 0
        self.diverged = 0

    # ------------------------------------------------------------------ the stream

    def _next_shard(self) -> None:
        """Queue the selected games of the next shard (a new seeded order each pass); a shard
        that became unreadable is dropped for good."""
        while True:
            if not self._shards:
                raise ReplayError(f"every replay shard of {self.folder} became unreadable")
            if self._cursor >= len(self._order):
                rng = np.random.default_rng((self._seed, self._epoch))
                self._order = [self._shards[i] for i in rng.permutation(len(self._shards))]
                self._cursor, self._epoch = 0, self._epoch + 1
            path = self._order[self._cursor]
            self._cursor += 1
            for shard in iter_shards([path], self._manifest, SHARD_ARRAYS):
                self._queue.extend((ref, _game_bytes(shard.arrays, ref.index))
                                   for ref in self._by_shard[path])
                return
            self._shards.remove(path)
            self._order = [p for p in self._order if p != path]
            self._cursor = min(self._cursor - 1, len(self._order))

    def _begin(self, e: int) -> LuxStep:
        """Start env ``e``'s next game (a restored one first); its first main-phase step. A
        game that cannot be replayed (its orders damaged since it was selected) is skipped
        with a warning; when a whole pass over the games finds none, a :class:`ReplayError`."""
        for _ in range(len(self.refs) + 1):
            entry = self._restored.pop(e, None)
            if entry is None:
                self._skip[e] = 0
                while not self._queue:
                    self._next_shard()
                entry = self._queue.popleft()
            ref, actions = entry
            label = f"{ref.shard.name} game {ref.index} ({ref.meta.get('source')})"
            self._current[e], self._steps[e] = ref, 0
            try:
                game = replay_game(ref.meta, json.loads(actions), label)
                first = next(game, None)
            except (ValueError, TypeError, KeyError, IndexError, KaggleError) as exc:
                print(f"warning: skipping {label}: its orders are damaged ({exc})",
                      file=sys.stderr)
                first = None
            if first is not None:
                self._games[e] = game
                return first
            self._skip[e] = 0  # a game without a main phase: the next one
        raise ReplayError(f"no game of {self.folder} could be replayed: convert the episodes "
                          "again")

    def _show(self, e: int, step: LuxStep) -> None:
        """Env ``e`` now stands at ``step``: its observation, masks, labels, imitated seats."""
        self._obs[e], self._mask[e] = step.obs, step.mask
        self.teacher_actions[e] = step.labels
        ref = self._current[e]
        assert ref is not None
        teams = [str(n).lower() for n in ref.meta.get("team_names", ("", ""))]
        winner = ref.meta.get("winner")
        for seat in range(2):
            self.imitate[e, seat] = (self._steps[e] >= self._skip[e]
                                     and (not self.winners_only or winner == seat)
                                     and (not self.imitate_names
                                          or teams[seat] in self.imitate_names))
        self._steps[e] += 1

    def _batch(self, reward: np.ndarray, done: np.ndarray, episodes: EpisodeStats) -> Batch:
        e = self.spec.num_envs
        obs = self._obs.copy()
        return Batch(obs, self._mask.copy(), obs, reward, done, np.zeros(e, bool),
                     np.ones((e, 2), bool), episodes)

    def _start_every_env(self) -> Batch:
        """Every env begins its next game (a restored one first); the first batch."""
        e = self.spec.num_envs
        self._tracker = EpisodeTracker(e, 2)
        for env in range(e):
            self._show(env, self._begin(env))
        return self._batch(np.zeros((e, 2), np.float32), np.zeros(e, bool),
                           EpisodeStats.empty())

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        """Start every env's next game of the stream (``seed``: a new stream order)."""
        if seed is not None and int(seed) != self._seed:
            self._seed, self._epoch, self._order, self._cursor = int(seed), 0, [], 0
            self._queue.clear()
        return self._start_every_env()

    def step(self, actions: np.ndarray) -> Batch:
        """Play each game's recorded step (``actions`` is ignored: the teachers play)."""
        if self._current[0] is None:
            raise GameError("call reset() before step()")
        e = self.spec.num_envs
        reward = np.zeros((e, 2), np.float32)
        outcome = np.zeros((e, 2), np.int8)
        done = np.zeros(e, bool)
        shown: list[tuple[int, LuxStep]] = []
        for env in range(e):
            game = self._games[env]
            assert game is not None
            try:
                step = next(game, None)
            except ReplayError as exc:  # the game ended in another state than recorded
                self._diverged(exc)
                step = None
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                print(f"warning: a replayed game stopped early: its orders are damaged "
                      f"({exc})", file=sys.stderr)  # its steps so far were learned
                step = None
            if step is not None:
                shown.append((env, step))
                continue
            ref = self._current[env]
            assert ref is not None
            result = np.asarray(ref.meta.get("outcome", (0.0, 0.0)), np.float32)
            reward[env] = result * self._win_weight
            outcome[env] = np.sign(result).astype(np.int8)
            done[env] = True
            self.games_played += 1
        episodes = self._tracker.update(reward, done, outcome)
        for env in np.flatnonzero(done).tolist():
            shown.append((env, self._begin(env)))
        for env, step in shown:
            self._show(env, step)
        return self._batch(reward, done, episodes)

    def _diverged(self, exc: ReplayError) -> None:
        self.diverged += 1
        if self.diverged == 1:
            print(f"warning: {exc}; its steps were learned, later divergences are counted "
                  "(LuxReplayGame.diverged)", file=sys.stderr)

    def close(self) -> None:
        self._games = [None] * self.spec.num_envs
        self._queue.clear()

    # ------------------------------------------------------------ SupportsReplayPosition

    def replay_position(self) -> dict[str, object]:
        """The stream's place: its pass, shard order and cursor, the queued games, each env's
        game and how many of its steps were shown."""
        return {"epoch": self._epoch, "order": [p.name for p in self._order],
                "cursor": self._cursor, "queue": [ref.key for ref, _ in self._queue],
                "current": [None if ref is None else ref.key for ref in self._current],
                "steps": self._steps.tolist()}

    def resume_at(self, position: dict[str, object]) -> Batch:
        """Continue from :meth:`replay_position`: the queued games next, each env's game from
        its start with its steps already shown unlabelled."""
        by_name = {p.name: p for p in self._by_shard}
        refs = {(r.shard.name, r.index): r for r in self.refs}
        queue = [tuple(k) for k in _listed(position, "queue")]
        current = [None if k is None else tuple(k) for k in _listed(position, "current")]
        wanted = {k for k in [*queue, *current] if k is not None and k in refs}
        loaded: dict[tuple[Any, ...], tuple[LuxReplayRef, bytes]] = {}
        for name in sorted({k[0] for k in wanted}):
            for shard in iter_shards([by_name[name]], self._manifest, SHARD_ARRAYS):
                for key in wanted:
                    if key[0] == name:
                        loaded[key] = (refs[key], _game_bytes(shard.arrays, int(key[1])))
        self._epoch = int(position.get("epoch", 0))  # type: ignore[call-overload]
        saved_order = _listed(position, "order")
        self._order = [by_name[n] for n in saved_order if n in by_name]
        # the cursor counts the surviving shards read already (one unreadable since must not
        # move it past one never read)
        cursor = int(position.get("cursor", 0))  # type: ignore[call-overload]
        self._cursor = sum(n in by_name for n in saved_order[:cursor])
        self._queue = deque(loaded[k] for k in queue if k in loaded)
        steps = np.asarray(_listed(position, "steps"), np.int64)
        self._restored = {e: loaded[k] for e, k in enumerate(current)
                          if e < self.spec.num_envs and k is not None and k in loaded}
        self._skip[:] = 0
        for e in self._restored:  # the step shown last was not learned yet
            self._skip[e] = max(int(steps[e]) - 1, 0) if e < len(steps) else 0
        return self._start_every_env()


def _game_bytes(arrays: dict[str, np.ndarray], index: int) -> bytes:
    start, end = (int(v) for v in arrays["offsets"][index:index + 2])
    return bytes(arrays["actions"][start:end].tobytes())


def _listed(position: dict[str, object], key: str) -> list[Any]:
    value = position.get(key, [])
    if not isinstance(value, list):
        raise ReplayError(f"a saved replay position's {key!r} is not a list")
    return value
