"""Kaggle episode replays made here: games played in the official engine (``luxai_s2``), written
as the ``lux_ai_s2`` environment of ``kaggle-environments`` writes them (:mod:`games.lux.kaggle`).

No replay set of the competition can be downloaded here, so tests and tools make their own:
:func:`write_kaggle_episode` plays one game from a seed as the environment's interpreter does
(``LuxAI_S2(validate_action_space=True, collect_stats=True)``, the players' actions passed
through JSON as Kaggle's agents' are, ``get_change_obs`` against the previous step's full
observation) and writes the file. ``kaggle-environments`` itself is not installed (its
dependencies are heavy); what it adds around the interpreter (statuses, ``step``, the
schema defaults: ``{}`` as step 0's action, ``remainingOverageTime`` 60) is reproduced.

Bidding and placement are rule-based (:func:`early_actions`: both bid 0, each places on the
valid spawn nearest to ice and ore, with an equal share of water and metal, as the adapter
does); players play the main phase. A player is ``fn(seat, env) -> action dict`` given the
official env before the step: :class:`GridPlayer` runs one of :mod:`games.lux.bots`' bots on
our layout and turns its grid actions into the engine's orders through Jux
(:func:`games.lux.orders.to_jux`, ``JuxAction.to_lux``); :class:`RandomOrders` draws raw
orders from the engine's action space (multi-action queues, amounts, ``repeat`` and ``n``),
which our layout mostly cannot represent.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import sys
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.files import atomic_write_text
from games.lux import engine
from games.lux.kaggle import PLAYERS, agent_state, episode_document, to_json

Player = Callable[[int, Any], dict[str, Any]]
"""a main-phase player: ``(seat, official env) -> {unit_id: queue, factory_id: action}``"""
FACTIONS = ("AlphaStrike", "MotherMars")
OVERAGE = 60
"""``remainingOverageTime`` (seconds) the environment starts agents with"""


def kernels(rules: str = engine.DEFAULT_RULES) -> Any:
    """The jitted single-game functions (Jux import, observation, masks, orders) of
    :mod:`games.lux.parity` for ``rules``."""
    from games.lux.parity import _kernels

    return _kernels(engine.rules_named(rules).name)


_last_import: list[Any] = [None, -1, None]  # official state, its step, its Jux import


def jux_state(env: Any, k: Any) -> Any:
    """The official env's state imported into Jux (``State.from_lux``), once per step (both
    players of a step share it)."""
    if _last_import[0] is not env.state or _last_import[1] != env.state.env_steps:
        _last_import[:] = [env.state, env.state.env_steps, k.from_official(env)]
    return _last_import[2]


def quiet_step(env: Any, actions: Sequence[Any]) -> Any:
    """``env.step`` with both players' ``actions`` (copies: the engine edits placements), without
    gymnasium's warning about the lists Kaggle's JSON actions are. The engine prints the whole
    traceback of an action it rejects on stdout (where ``--json`` output goes): its last line
    goes to stderr as a one-line warning instead."""
    printed = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
        warnings.filterwarnings("ignore", message=".*Casting input x to numpy array")
        step = env.state.env_steps + 1  # the step this reaches, as a file counts its steps
        result = env.step({p: copy.deepcopy(a) for p, a in zip(PLAYERS, actions, strict=True)})
    lines = [line for line in printed.getvalue().splitlines() if line.strip()]
    if lines:
        print(f"warning: the Lux engine rejected an action at step {step}: {lines[-1][:200]}",
              file=sys.stderr)
    return result


def early_actions(env: Any, k: Any, seed: int) -> list[dict[str, Any]]:
    """Both players' actions in a bid or placement step (see the module docstring)."""
    if env.state.env_steps == 0:
        return [{"faction": FACTIONS[s], "bid": 0} for s in range(2)]
    state = jux_state(env, k)
    scores = np.asarray(k.spawn_scores(state, np.uint32(seed)))
    valid = np.asarray(env.state.board.valid_spawns_mask)
    x, y = np.unravel_index(np.argmax(np.where(valid, scores, -1e9)), valid.shape)
    seat = int(state.next_player)
    team = env.state.teams[PLAYERS[seat]]
    left = max(int(team.factories_to_place), 1)
    actions: list[dict[str, Any]] = [{}, {}]
    actions[seat] = {"spawn": [int(x), int(y)], "metal": int(team.init_metal) // left,
                     "water": int(team.init_water) // left}
    return actions


class GridPlayer:
    """A bot of :mod:`games.lux.bots` (``fn(obs, mask, rng)`` on our layout) as a player: its
    grid actions become official orders through Jux. With ``record`` it keeps what it saw and
    chose each step: ``observations`` (``uint8 [C, S, S]``), ``masks`` (``bool [S * S, 33]``)
    and ``grids`` (``int [S * S, 6]``)."""

    def __init__(self, bot: Callable[..., np.ndarray], seed: int = 0,
                 rules: str = engine.DEFAULT_RULES, record: bool = False) -> None:
        self.bot, self.rng, self.k = bot, np.random.default_rng(seed), kernels(rules)
        self.record = record
        self.observations: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.grids: list[np.ndarray] = []

    def __call__(self, seat: int, env: Any) -> dict[str, Any]:
        state = jux_state(env, self.k)
        obs = np.asarray(self.k.observe(state))[seat:seat + 1]
        mask = np.asarray(self.k.masks(state))[seat:seat + 1]
        grid = np.zeros((2,) + mask.shape[1:2] + (6,), np.int64)
        grid[seat] = self.bot(obs, mask, self.rng)[0]
        if self.record:
            self.observations.append(obs[0])
            self.masks.append(mask[0])
            self.grids.append(grid[seat].copy())
        orders: dict[str, Any] = self.k.to_jux(state, grid).to_lux(state)[PLAYERS[seat]]
        return orders


class RandomOrders:
    """Raw random orders from the engine's action space: each unit gets a new queue of 1-3
    random actions with probability ``p_unit``, each factory a random action with
    ``p_factory`` (the engine drops those it cannot carry out)."""

    def __init__(self, seed: int = 0, p_unit: float = 0.3, p_factory: float = 0.1) -> None:
        self.rng, self.p_unit, self.p_factory = np.random.default_rng(seed), p_unit, p_factory

    def __call__(self, seat: int, env: Any) -> dict[str, Any]:
        rng, player = self.rng, PLAYERS[seat]
        orders: dict[str, Any] = {}
        for uid in env.state.units[player]:
            if rng.random() < self.p_unit:
                orders[uid] = [[int(rng.integers(0, 6)), int(rng.integers(0, 5)),
                                int(rng.integers(0, 5)), int(rng.integers(0, 200)),
                                int(rng.integers(0, 3)), int(rng.integers(1, 4))]
                               for _ in range(int(rng.integers(1, 4)))]
        for fid in env.state.factories[player]:
            if rng.random() < self.p_factory:
                orders[fid] = int(rng.integers(0, 3))
        return orders


@dataclass
class PlayedEpisode:
    """A game :func:`play_kaggle_episode` played."""

    document: dict[str, Any]
    """the replay (``Environment.toJSON()``)"""
    final_obs: dict[str, Any]
    """the engine's full observation at the end"""
    path: Path | None = None


def _observation(seat: int, t: int, reward: int, env: Any, obs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"remainingOverageTime": OVERAGE, "player": PLAYERS[seat],
                           "reward": reward}
    if seat == 0:
        out.update(step=t, obs=json.dumps(to_json(obs)), width=int(env.state.board.width),
                   height=int(env.state.board.height))
    return out


def play_kaggle_episode(seed: int, players: Sequence[Player], *,
                        rules: str = engine.DEFAULT_RULES, max_episode_length: int = 1000,
                        team_names: tuple[str, str] = PLAYERS,
                        episode_id: str | None = None) -> PlayedEpisode:
    """Play one game from ``seed`` in the official engine under ``rules`` (main-phase steps at
    most ``max_episode_length``) and record it as ``kaggle-environments`` does."""
    if len(players) != 2:
        raise ValueError(f"a Lux game has 2 players, got {len(players)}")
    k = kernels(rules)
    env = engine.official_env(rules, max_episode_length=max_episode_length,
                              collect_stats=True, validate_action_space=True)
    env.reset(seed=seed)
    prev = env.state.get_compressed_obs()  # the full observation at step 0
    steps = [[agent_state({}, 0, "ACTIVE", _observation(s, 0, 0, env, prev))
              for s in range(2)]]
    done = False
    while not done:
        if env.state.real_env_steps < 0:
            actions = early_actions(env, k, seed)
        else:
            actions = [players[s](s, env) for s in range(2)]
        actions = json.loads(json.dumps(to_json(actions)))  # as Kaggle's agents send them
        out, rewards, terminated, truncated, _ = quiet_step(env, actions)
        change = env.state.get_change_obs(prev)
        prev = out["player_0"]
        done = all(terminated[p] or truncated[p] for p in PLAYERS)
        t = len(steps)
        step = [agent_state(actions[s], int(rewards[p]), "DONE" if done else "ACTIVE",
                            _observation(s, t, int(rewards[p]), env, change))
                for s, p in enumerate(PLAYERS)]
        if done:
            for s, p in enumerate(PLAYERS):
                step[s]["observation"]["stats"] = to_json(env.state.stats[p])
        steps.append(step)
    document = episode_document(
        episode_id=episode_id or str(uuid.uuid1()), seed=seed,
        env_cfg=to_json(dataclasses.asdict(env.env_cfg)), max_episode_length=max_episode_length,
        steps=steps, team_names=team_names)
    return PlayedEpisode(document, env.state.get_obs())


def write_kaggle_episode(path: Path | str, seed: int, players: Sequence[Player],
                         **options: Any) -> PlayedEpisode:
    """:func:`play_kaggle_episode` (``options`` are its keywords), written to ``path`` as
    ``kaggle-environments`` renders it (``json.dumps(..., sort_keys=True)``)."""
    played = play_kaggle_episode(seed, players, **options)
    path = Path(path)
    atomic_write_text(path, json.dumps(played.document, sort_keys=True))
    played.path = path
    return played
