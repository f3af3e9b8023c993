"""The adapter against the official engine: the same games, step for step, both encoded.

:func:`play_parity` plays games in Jux and in the official engine (``luxai_s2``) at once. Each
game starts in the official engine with the adapter's rule-based bid and placement
(:mod:`games.lux.placement`'s scores, computed on the official board), and Jux takes over its
state. Every main-phase step, both seats draw random legal actions from the masks computed on
Jux's state; :func:`games.lux.orders.to_jux` turns them into Jux's queues, which both engines
play (Jux's ``JuxAction.to_lux`` gives the official engine the same orders). After each step
the seats' observation planes and masks computed from Jux's state are compared with those
computed from the official engine's state (imported with ``State.from_lux``), and so are the
rewards and dones. A game that ends is followed by the next seed's.

Jux 3.0.0 differs from luxai_s2 3.0.1 in two known ways that random play meets
(:mod:`tests.games.lux.test_lux_parity` describes them): rubble of units destroyed on a factory
dying in the same step, and a team without factories rewarded its lichen - 1000 instead of
-1000. They are counted apart, and the game continues from the official state after the first.
Everything else counts as a mismatch.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.lux import engine

PLAYERS = ("player_0", "player_1")


@dataclass
class ParityReport:
    """What :func:`play_parity` compared."""

    games: int = 0
    steps: int = 0
    mismatches: list[str] = field(default_factory=list)
    """``"seed S step T: what"``, at most 50 kept (``mismatch_count`` counts all)"""
    mismatch_count: int = 0
    known_rubble: int = 0
    known_reward: int = 0
    encoded: int = 0
    """steps whose observations and masks were compared"""
    units_seen: int = 0
    """the most robots on a board at once (random play reaches a real game)"""
    seconds: float = 0.0

    def add(self, seed: int, step: int, what: str) -> None:
        self.mismatch_count += 1
        if len(self.mismatches) < 50:
            self.mismatches.append(f"seed {seed} step {step}: {what}")


@functools.cache
def _kernels(rules_name: str) -> _Kernels:
    return _Kernels(engine.rules_named(rules_name))


class _Kernels:
    """The single-game jitted functions parity needs."""

    def __init__(self, rules: engine.Rules) -> None:
        jux = engine.load_jux()
        import jax

        from games.lux.observe import legal_masks, observe
        from games.lux.orders import lichen_scores, to_jux
        from games.lux.placement import spawn_scores

        self.jux = jux
        self.buf_cfg = rules.buffer_config()
        self.observe = jax.jit(observe)
        self.masks = jax.jit(lambda s: legal_masks(s, rules.max_units))
        self.to_jux = jax.jit(to_jux)
        self.step = jax.jit(lambda s, a: s._step_late_game(a))
        self.scores = jax.jit(lichen_scores)
        self.spawn_scores = jax.jit(spawn_scores)

    def from_official(self, official: Any) -> Any:
        return self.jux.state.State.from_lux(official.state, self.buf_cfg)


# which of (direction, resource, amount) each action type uses; the official engine reports
# the others as 0, Jux keeps what it was given
_USED = {0: (1, 0, 0), 1: (1, 1, 1), 2: (0, 1, 1), 3: (0, 0, 0), 4: (0, 0, 0), 5: (0, 0, 1)}


def _action(code: Any) -> tuple[int, ...]:
    """An action vector ``[type, direction, resource, amount, repeat, n]`` with the fields its
    type ignores set to 0."""
    kind, *middle = (int(v) for v in code[:4])
    return (kind, *(v * used for v, used in zip(middle, _USED[kind], strict=True)),
            int(code[4]), int(code[5]))


def _queue(action_queue: Any, p: int, i: int) -> tuple[tuple[int, ...], ...]:
    data = action_queue.data
    fields = (data.action_type, data.direction, data.resource_type, data.amount, data.repeat,
              data.n)
    capacity = fields[0].shape[-1]
    front, count = int(action_queue.front[p, i]), int(action_queue.count[p, i])
    slots = [(front + k) % capacity for k in range(count)]
    return tuple(_action([f[p, i, s] for f in fields]) for s in slots)


def jux_view(state: Any, jux: Any) -> dict[str, Any]:
    """A Jux state as the canonical view (host arrays; ids as the official engine's strings)."""
    import jax

    s = jax.device_get(state)
    factions = [f.name for f in jux.team.FactionTypes]
    placing = int(s.real_env_steps) < 0
    strains = np.asarray(s.board.lichen_strains).astype(np.int32)
    strains[strains == np.iinfo(np.asarray(s.board.lichen_strains).dtype).max] = -1
    board = {"rubble": np.asarray(s.board.map.rubble), "ice": np.asarray(s.board.map.ice),
             "ore": np.asarray(s.board.map.ore), "lichen": np.asarray(s.board.lichen),
             "lichen_strains": strains,
             "factories_per_team": int(s.board.factories_per_team)}
    if placing:
        board["valid_spawns_mask"] = np.asarray(s.board.valid_spawns_mask)
    teams = {}
    for p in range(2):
        n = int(s.teams.n_factory[p])
        teams[f"player_{p}"] = (
            factions[int(s.teams.faction[p])], int(s.teams.init_water[p]),
            int(s.teams.init_metal[p]), int(s.teams.factories_to_place[p]),
            tuple(int(x) for x in s.teams.factory_strains[p, :n]), int(s.place_first) == p,
            int(s.teams.bid[p]))
    factories = {}
    for p in range(2):
        f = s.factories
        for i in range(int(s.n_factories[p])):
            factories[f"factory_{int(f.unit_id[p, i])}"] = (
                p, *(int(v) for v in f.pos.pos[p, i]), int(f.power[p, i]),
                *(int(v) for v in f.cargo.stock[p, i]))
    units = {}
    for p in range(2):
        u = s.units
        for i in range(int(s.n_units[p])):
            units[f"unit_{int(u.unit_id[p, i])}"] = (
                p, ("LIGHT", "HEAVY")[int(u.unit_type[p, i])],
                *(int(v) for v in u.pos.pos[p, i]), int(u.power[p, i]),
                *(int(v) for v in u.cargo.stock[p, i]), _queue(u.action_queue, p, i))
    return {"step": int(s.real_env_steps), "global_id": int(s.global_id), "board": board,
            "teams": teams, "factories": factories, "units": units}


def official_view(obs: dict[str, Any], placing: bool) -> dict[str, Any]:
    """The official engine's observation as the canonical view."""
    b = obs["board"]
    board: dict[str, Any] = {k: np.asarray(b[k])
                             for k in ("rubble", "ice", "ore", "lichen", "lichen_strains")}
    board["factories_per_team"] = int(b["factories_per_team"])
    if placing:
        board["valid_spawns_mask"] = np.asarray(b["valid_spawns_mask"])
    teams = {p: (t["faction"], int(t["water"]), int(t["metal"]), int(t["factories_to_place"]),
                 tuple(int(x) for x in t["factory_strains"]), bool(t["place_first"]),
                 int(t["bid"])) for p, t in obs["teams"].items()}
    factories = {}
    for p in PLAYERS:
        for fid, f in obs["factories"][p].items():
            c = f["cargo"]
            factories[fid] = (int(f["team_id"]), *(int(v) for v in f["pos"]), int(f["power"]),
                              int(c["ice"]), int(c["ore"]), int(c["water"]), int(c["metal"]))
    units = {}
    for p in PLAYERS:
        for uid, u in obs["units"][p].items():
            c = u["cargo"]
            units[uid] = (int(u["team_id"]), u["unit_type"], *(int(v) for v in u["pos"]),
                          int(u["power"]), int(c["ice"]), int(c["ore"]), int(c["water"]),
                          int(c["metal"]),
                          tuple(_action(a) for a in u["action_queue"]))
    return {"step": int(obs["real_env_steps"]), "global_id": int(obs["global_id"]),
            "board": board, "teams": teams, "factories": factories, "units": units}


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The keys on which two views differ (teams only once the official engine has them)."""
    out = [k for k in ("step", "global_id", "factories", "units") if ours[k] != theirs[k]]
    for key in ours["board"].keys() | theirs["board"].keys():
        if key not in ours["board"] or key not in theirs["board"] or not np.array_equal(
                ours["board"][key], theirs["board"][key]):
            out.append(f"board/{key}")
    if theirs["teams"] and ours["teams"] != theirs["teams"]:
        out.append("teams")
    return out


def _start(official: Any, k: _Kernels, seed: int) -> dict[str, Any]:
    """Reset the official engine with ``seed`` and play the adapter's bid and placement in it;
    its observation at the first main-phase step."""
    obs = official.reset(seed=seed)[0]["player_0"]
    faction = k.jux.team.FactionTypes(0).name
    out, *_ = official.step({p: {"faction": faction, "bid": 0} for p in PLAYERS})
    obs = out["player_0"]
    scores = None
    while official.state.real_env_steps < 0:
        state = k.from_official(official)
        if scores is None:
            scores = np.asarray(k.spawn_scores(state, np.uint32(seed)))
        valid = np.asarray(obs["board"]["valid_spawns_mask"])
        x, y = np.unravel_index(np.argmax(np.where(valid, scores, -1e9)), valid.shape)
        player = PLAYERS[int(state.next_player)]
        team = obs["teams"][player]
        left = max(int(team["factories_to_place"]), 1)
        actions: dict[str, dict[str, Any]] = {p: {} for p in PLAYERS}
        actions[player] = {"spawn": [int(x), int(y)], "water": int(team["water"]) // left,
                           "metal": int(team["metal"]) // left}
        out, *_ = official.step(actions)
        obs = out["player_0"]
    return obs


def play_parity(seeds: list[int], steps_per_seed: int, rng_seed: int = 0,
                encode_every: int = 25,
                progress: Callable[[int, int], None] | None = None) -> ParityReport:
    """Play ``steps_per_seed`` main-phase steps per seed (games following one another: seed
    ``s``, then ``s + 10_000``, ...) in both engines; the comparison's report.

    Every step compares the engines' full states (:func:`jux_view` against
    :func:`official_view`: board, teams, factories, robots and their queues), rewards and
    dones; every ``encode_every`` steps and at each game's end also the seats' observation
    planes and masks computed from either state (the official one imported into Jux, 0.3 s)."""
    from games.batches import random_actions
    from games.core import MultiDiscrete
    from games.lux.layout import GATES, NVEC

    rules = engine.rules_named("season2")
    k = _kernels(rules.name)
    size = rules.map_size
    space = MultiDiscrete(NVEC, grid=(size, size), gates=GATES)
    rng = np.random.default_rng(rng_seed)
    report = ParityReport()
    started = time.perf_counter()
    official = engine.official_env(rules)
    for first in seeds:
        seed, done_steps = first, 0
        while done_steps < steps_per_seed:
            _start(official, k, seed)
            state = k.from_official(official)
            report.games += 1
            while done_steps < steps_per_seed:
                grid = random_actions(space, np.asarray(k.masks(state)), rng, (2,))
                action = k.to_jux(state, grid)
                lux_actions = action.to_lux(state)
                state = k.step(state, action)
                out, rewards, terminated, truncated, _ = official.step(
                    copy.deepcopy(lux_actions))
                done_steps += 1
                report.steps += 1
                obs = out["player_0"] if out else official.state.get_obs()
                step = int(official.state.real_env_steps)
                theirs_done = bool(terminated["player_0"] or truncated["player_0"])
                diff = differences(jux_view(state, k.jux), official_view(obs, False))
                if diff == ["board/rubble"] and _rubble_kept(state, obs):
                    report.known_rubble += 1
                    state = k.from_official(official)  # the boards differ from here on
                elif diff:
                    report.add(first, step, "state " + ", ".join(diff))
                ours_r = np.asarray(k.scores(state))
                for t, p in enumerate(PLAYERS):
                    if float(ours_r[t]) != float(rewards[p]):
                        if float(rewards[p]) == -1000 and int(state.n_factories[t]) == 0:
                            report.known_reward += 1
                        else:
                            report.add(first, step, f"reward {p} {ours_r[t]} != {rewards[p]}")
                ours_done = bool((np.asarray(state.n_factories) == 0).any()) or step >= 1000
                if ours_done != theirs_done:
                    report.add(first, step, f"done {ours_done} != {theirs_done}")
                if done_steps % encode_every == 0 or theirs_done:
                    theirs = k.from_official(official)
                    for name, fn in (("observation", k.observe), ("masks", k.masks)):
                        if not np.array_equal(np.asarray(fn(state)), np.asarray(fn(theirs))):
                            report.add(first, step, name)
                    report.encoded += 1
                report.units_seen = max(report.units_seen, int(np.asarray(state.n_units).sum()))
                if progress is not None:
                    progress(report.steps, len(seeds) * steps_per_seed)
                if theirs_done:
                    break
            seed += 10_000
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def _rubble_kept(state: Any, obs: dict[str, Any]) -> bool:
    """Whether Jux has less rubble than the official engine wherever they differ (its known
    difference at a factory's destruction)."""
    ours = np.asarray(state.board.map.rubble)
    theirs = np.asarray(obs["board"]["rubble"])
    return bool((ours <= theirs).all())
