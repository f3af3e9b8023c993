"""microRTS: how close a clone comes to its teacher, on the positions its own play reaches.

    .venv/bin/python tools/microrts_clone_diagnosis.py --checkpoint RUN_DIR --teacher coacai \\
        --vs lightrush --games 8
    .venv/bin/python tools/microrts_clone_diagnosis.py --checkpoint RUN_DIR --clone-units worker

The checkpoint plays the teacher's side against ``--vs`` (sides alternating between envs) while
the teacher, thinking live on the same positions, labels every unit the checkpoint could order
(the labels are not played). Reported per unit type: the confusion of the checkpoint's action
types against the teacher's (rows: the teacher's type; a clone's training accuracy is measured
on its teacher's own positions, this on its own), and how many of its orders the engine
refused. ``--clone-units`` hands the checkpoint only those unit types (the teacher orders the
others): which part of its play loses its games. One JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import numpy as np
import torch

from games.microrts import bots as bots_mod
from games.microrts.options import ACTION_NAMES, OBS_PLANES, MicroRTSOptions
from games.microrts.teacher_game import LiveBots, TeacherGame
from games.registry import resolve
from selfplay.checkpoint import resolve_checkpoint
from selfplay.cli_common import UserError, first_paragraph, positive_int, run_tool
from selfplay.play import FrozenPolicy, load_agent, wilson_interval

UNIT_TYPES = ("base", "barracks", "worker", "light", "heavy", "ranged")
ACTION_TYPES = ("noop", "move", "harvest", "return", "produce", "attack")
_TYPE_PLANES = np.array([OBS_PLANES.index(f"type_{u}") for u in UNIT_TYPES])
_OWN = OBS_PLANES.index("owner_own")
_ACTION_PLANE = OBS_PLANES.index("action_none")  # action_none .. action_attack follow it

Player = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""``(obs [N, C, H, W], mask [N, HW, 78], labels [N, HW, 7]) -> actions [N, HW, 7]``"""


def unit_types(obs: np.ndarray) -> np.ndarray:
    """``int [N, HW]``: the index in :data:`UNIT_TYPES` of each cell's own unit, -1 elsewhere."""
    planes = obs[:, _TYPE_PLANES].reshape(len(obs), len(UNIT_TYPES), -1).astype(bool)
    kind = planes.argmax(1)
    own = obs[:, _OWN].reshape(len(obs), -1).astype(bool) & planes.any(1)
    return np.where(own, kind, -1)


def diagnose(player: Player, teacher: str, vs: str, games: int, envs: int, seed: int,
             options: MicroRTSOptions, clone_units: tuple[str, ...] = UNIT_TYPES
             ) -> dict[str, object]:
    """``games`` games of ``player`` on ``teacher``'s side against ``vs``, ``envs`` at once;
    the teacher labels the player's positions; ``clone_units`` the unit types the player
    orders (the teacher orders the rest)."""
    teacher_name = bots_mod.resolve_bot(teacher).name
    vs_name = bots_mod.resolve_bot(vs).name

    def schedule(e: int, game: int) -> tuple[str, str]:
        return (teacher_name, vs_name) if (e + game) % 2 == 0 else (vs_name, teacher_name)

    source = LiveBots([teacher_name, vs_name], imitate=[teacher_name], seed=seed,
                      schedule=schedule)
    opts = MicroRTSOptions(**{**vars(options), "num_selfplay_envs": envs, "bots": [],
                              "workers": 1})
    game = TeacherGame(opts, envs, source, seed=seed)
    controlled = np.array([u in clone_units for u in UNIT_TYPES])
    confusion = np.zeros((len(UNIT_TYPES), len(ACTION_TYPES), len(ACTION_TYPES)), np.int64)
    ordered = np.zeros(len(ACTION_TYPES), np.int64)  # the player's orders by type ...
    refused = np.zeros(len(ACTION_TYPES), np.int64)  # ... that no unit started
    outcomes = {1: 0, -1: 0, 0: 0}
    lengths: list[int] = []
    batch = game.reset()
    game.let_students_play(np.ones((envs, game.num_seats), bool))
    finished = 0
    try:
        while finished < games:
            n = envs * game.num_seats
            obs = batch.obs.reshape(n, *batch.obs.shape[2:])
            assert batch.action_mask is not None
            mask = batch.action_mask.reshape(n, *batch.action_mask.shape[2:])
            labels = game.teacher_actions.reshape(n, *game.teacher_actions.shape[2:])
            imitated = game.imitate.reshape(n)
            actions = player(obs, mask, labels)  # [N, HW, 7]
            kinds = unit_types(obs)  # [N, HW]
            acting = imitated[:, None] & mask.any(-1) & (kinds >= 0)  # [N, HW]
            mine = acting & controlled[np.maximum(kinds, 0)]
            played = np.where(mine[..., None], actions, labels)
            row, cell = np.nonzero(mine)
            np.add.at(confusion, (kinds[row, cell], labels[row, cell, 0],
                                  actions[row, cell, 0]), 1)
            order = played[row, cell, 0] > 0
            names_before = list(source.env_players)
            batch = game.step(played.reshape(game.teacher_actions.shape))
            # an order the engine started shows in the unit's action planes next cycle
            ended = batch.terminated | batch.truncated
            r, c = row[order], cell[order]
            live = ~ended[r // game.num_seats]
            r, c, kind = r[live], c[live], played[r[live], c[live], 0]
            after = batch.obs.reshape(n, len(OBS_PLANES), -1)  # [N, C, HW]
            started = after[r, _ACTION_PLANE + kind, c] > 0
            np.add.at(ordered, kind, 1)
            np.add.at(refused, kind[~started], 1)
            ep = batch.episodes
            for e, s, outcome, length in zip(ep.env, ep.seat, ep.outcome, ep.length,
                                              strict=True):
                if names_before[e][int(game.players[e, s])] == teacher_name \
                        and finished < games:
                    outcomes[int(outcome) if int(outcome) in outcomes else 0] += 1
                    lengths.append(int(length))
                    finished += 1
    finally:
        game.close()
    wins = outcomes[1]
    per_unit = {}
    for u, name in enumerate(UNIT_TYPES):
        m = confusion[u]
        if m.sum():
            per_unit[name] = {"cells": int(m.sum()),
                              "type_agreement": float(np.trace(m) / m.sum()),
                              "confusion": m.tolist()}
    return {"teacher": teacher_name, "vs": vs_name, "games": games, "wins": wins,
            "losses": outcomes[-1], "draws": outcomes[0], "win_rate": wins / games,
            "ci95": list(wilson_interval(wins, games)), "lengths": lengths,
            "clone_units": list(clone_units), "action_types": list(ACTION_TYPES),
            "units": per_unit,
            "refused_orders": {ACTION_TYPES[k]: [int(refused[k]), int(ordered[k])]
                               for k in range(1, len(ACTION_TYPES)) if ordered[k]}}


def checkpoint_player(path: str, deterministic: bool, seed: int
                      ) -> tuple[Player, MicroRTSOptions]:
    """A checkpoint as a :data:`Player`, and the game options it was trained with."""
    config, agent, _ = load_agent(resolve_checkpoint(path))
    if resolve(config.game.name).name != "microrts":
        raise UserError(f"{path} plays {config.game.name}, not microrts")
    generator = torch.Generator().manual_seed(seed)
    policy = FrozenPolicy(agent, deterministic=deterministic, generator=generator)
    known = set(vars(MicroRTSOptions()))
    options = MicroRTSOptions(**{k: v for k, v in dict(config.game.options).items()
                                 if k in known})

    def player(obs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return policy.act(obs, mask, None)

    return player, options


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--checkpoint", required=True, help="a run directory or a checkpoint")
    parser.add_argument("--teacher", default="CoacAI")
    parser.add_argument("--vs", default="LightRush")
    parser.add_argument("--games", type=positive_int, default=8)
    parser.add_argument("--envs", type=positive_int, default=8)
    parser.add_argument("--map", default=None, help="default: the checkpoint's")
    parser.add_argument("--max-steps", type=positive_int, default=None)
    parser.add_argument("--clone-units", default=",".join(UNIT_TYPES),
                        help=f"unit types the checkpoint orders, of {','.join(UNIT_TYPES)}")
    parser.add_argument("--most-likely", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    clone_units = tuple(u for u in args.clone_units.split(",") if u)
    unknown = sorted(set(clone_units) - set(UNIT_TYPES))
    if unknown:
        parser.error(f"--clone-units: unknown {', '.join(unknown)}; "
                     f"known: {', '.join(UNIT_TYPES)}")
    torch.set_num_threads(1)
    player, options = checkpoint_player(args.checkpoint, args.most_likely, args.seed)
    if args.map:
        options.map, options.maps = args.map, []
    if args.max_steps:
        options.max_steps = args.max_steps
    result = diagnose(player, args.teacher, args.vs, args.games, args.envs, args.seed,
                      options, clone_units)
    print(json.dumps({"checkpoint": args.checkpoint, "map": options.map,
                      "component_names": list(ACTION_NAMES), **result}))


if __name__ == "__main__":
    run_tool(main)
