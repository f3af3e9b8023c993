"""Lux: how close a player comes to the rule-based heuristic, in its own games against it.

    .venv/bin/python tools/lux_heuristic_diagnosis.py --steering near --games 16
    .venv/bin/python tools/lux_heuristic_diagnosis.py --checkpoint RUN_DIR --games 8 --trace
    .venv/bin/python tools/lux_heuristic_diagnosis.py --bot heuristic-raid --games 16 --seed 3
    .venv/bin/python tools/lux_heuristic_diagnosis.py --checkpoint RUN_DIR \
        --labels heuristic-raid --breakdown
    .venv/bin/python tools/lux_heuristic_diagnosis.py --checkpoint RUN_DIR \
        --labels heuristic-raider --takeover 0.7:1 --games 16

``--steering near``: the heuristic whose robots steer by the observation's ``near_*`` planes
(:func:`games.lux.bots.near_plane_fields`, what a network sees) plays the heuristic: how much of
the heuristic's play the observation carries; ``--steering goals`` the same with its robots
going home and to ice by goal moves (the adapter steers them). ``--checkpoint``: a trained
policy (actions sampled, or ``--most-likely``) plays it, and at every step the heuristic also
labels the policy's own positions (not played): the confusion of its robots' action types
against those labels, the agreement of the move directions where both move, the factories'
actions; this is the agreement on the positions the policy reaches, where a clone's training
accuracy is measured on its teacher's. ``--bot``: one of the scripted players
(:data:`games.lux.bots.BOTS`) plays it, a teacher's level. ``--trace`` prints, every 50
steps, each side's factories, water and robots. ``--breakdown`` adds where the robots' action
types differ from the labels: counted by the label and the action played, the robot's kind,
the label's move (a direction or a goal), what the cell holds (ice, ore, rubble, own lichen,
bare), the cargo (empty, some, at least half) and the tenth of the game. ``--takeover
START:END``: the labeller plays the player's seat while the game's progress lies in that
window (``takeover`` in the output: the seat-steps it played), so the wins it adds tell which
part of the game a clone loses in. Sides alternate
between games; one JSON object on stdout, with each game's lichen (the score) of both sides
on its last step before the end, and ``by_seat``: the games, wins, agreements and mean lichen
margin with the player on each seat (seat 1 places its factories second).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from games.lux import bots
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.layout import FACTORY_ACTIONS, MOVES, NVEC, OBS_SCALE, PLANE, UNIT_TYPES
from selfplay.checkpoint import load_checkpoint, resolve_checkpoint
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.play import FrozenPolicy, load_agent, wilson_interval

Player = Callable[[np.ndarray, np.ndarray], np.ndarray]


def lichen_score(obs: np.ndarray) -> np.ndarray:
    """``[N]``: the lichen on the own strains' cells of seats ``obs [N, C, S, S]`` (the score
    that decides a game), from the planes: a cell's whole lichen is exact (the plane's step,
    100 / 255, is under 1)."""
    lichen = np.rint(obs[:, PLANE["lichen"]].astype(np.float64) * OBS_SCALE * 100)
    return (lichen * (obs[:, PLANE["own_lichen"]] > 0)).sum((1, 2))


def side_summary(obs: np.ndarray) -> dict[str, int]:
    """Factories, their water and the robots of seats ``obs [N, C, S, S]`` (summed)."""
    centre = obs[:, PLANE["own_factory_centre"]] > 0
    water = obs[:, PLANE["factory_water"]].astype(np.float64) * OBS_SCALE * 1000
    return {"factories": int(centre.sum()), "water": int(round(float((water * centre).sum()))),
            "heavy": int((obs[:, PLANE["own_heavy"]] > 0).sum()),
            "light": int((obs[:, PLANE["own_light"]] > 0).sum()),
            "lichen_cells": int((obs[:, PLANE["own_lichen"]] > 0).sum())}


class Breakdown:
    """Counts of the robot-steps whose action type differs from the label, by situation."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, ...]] = Counter()
        self.tenths: Counter[str] = Counter()
        self.robot_tenths: Counter[str] = Counter()  # every robot-step, differing or not
        self.by_tenth: dict[str, Counter[tuple[str, ...]]] = {}

    def add(self, obs: np.ndarray, labels: np.ndarray, acts: np.ndarray,
            robot: np.ndarray) -> None:
        """One step's seats ``obs [N, C, S, S]``, ``labels`` / ``acts`` ``[N, S * S, 6]`` and
        own robot cells ``robot [N, S * S]``."""
        n = len(obs)
        flat = obs.reshape(n, obs.shape[1], -1)
        progress = flat[:, PLANE["progress"]].astype(np.float64) * OBS_SCALE
        all_tenths = np.minimum(progress * 10, 9).astype(int)[robot]
        for t, count in zip(*np.unique(all_tenths, return_counts=True), strict=True):
            self.robot_tenths[str(t)] += int(count)
        differ = robot & (labels[..., 0] != acts[..., 0])
        env, cell = np.nonzero(differ)
        if not len(env):
            return
        plane = {name: flat[env, PLANE[name], cell] > 0
                 for name in ("own_heavy", "ice", "ore", "rubble", "own_lichen")}
        terrain = np.select([plane["ice"], plane["ore"], plane["rubble"], plane["own_lichen"]],
                            ["ice", "ore", "rubble", "own lichen"], "bare")
        carried = (flat[env, PLANE["unit_ice"], cell].astype(np.float64)
                   + flat[env, PLANE["unit_ore"], cell]) * OBS_SCALE
        cargo = np.select([carried >= 0.5, carried > 0], ["half or more", "some"], "empty")
        tenth = np.minimum(progress[env, cell] * 10, 9).astype(int)
        label, act = labels[env, cell], acts[env, cell]
        for k in range(len(env)):
            move = MOVES[label[k, 1]] if UNIT_TYPES[label[k, 0]] == "move" else "-"
            key = (UNIT_TYPES[label[k, 0]], UNIT_TYPES[act[k, 0]],
                   "heavy" if plane["own_heavy"][k] else "light", move, str(terrain[k]),
                   str(cargo[k]))
            self.counts[key] += 1
            self.tenths[str(tenth[k])] += 1
            self.by_tenth.setdefault(str(tenth[k]), Counter())[key] += 1

    def summary(self, top: int = 15, top_per_tenth: int = 4) -> dict[str, object]:
        """The ``top`` most common kinds of difference; per tenth of the game the differing
        and all robot-steps and that tenth's ``top_per_tenth`` most common kinds."""
        keys = ("label", "played", "robot", "label_move", "cell", "cargo")

        def rows(counts: Counter[tuple[str, ...]], n: int) -> list[dict[str, object]]:
            return [{**dict(zip(keys, key, strict=True)), "count": count}
                    for key, count in counts.most_common(n)]

        return {"differing_robot_steps": sum(self.counts.values()),
                "most_common": rows(self.counts, top),
                "by_tenth_of_the_game": {t: self.tenths[t] for t in sorted(self.tenths)},
                "robot_steps_by_tenth": {t: self.robot_tenths[t]
                                         for t in sorted(self.robot_tenths)},
                "most_common_by_tenth": {t: rows(self.by_tenth[t], top_per_tenth)
                                         for t in sorted(self.by_tenth)}}


def play(player: Player, games: int, seed: int, trace: bool = False,
         max_steps: int = 1000, labeller: str = "heuristic",
         breakdown: Breakdown | None = None,
         takeover: tuple[float, float] | None = None) -> dict[str, object]:
    """``games`` games of ``player`` against the heuristic, one per env, of at most
    ``max_steps`` steps; the outcomes and the ``labeller`` bot's labels of the player's
    positions against its actions. With ``takeover`` ``(start, end)`` the labeller plays the
    player's seat while the game's progress lies in ``[start, end)`` (the player still
    chooses, for the agreements, but is not played): which part of the game a player's
    losses come from."""
    label = bots.BOTS[labeller]
    game = LuxVecGame(LuxOptions(max_steps=max_steps), num_envs=games, seed=seed)
    rng = np.random.default_rng(seed)
    batch = game.reset(seed=seed)
    envs = np.arange(games)
    seat = envs % 2  # the player's seat in each game
    units = np.zeros((2, len(UNIT_TYPES), len(UNIT_TYPES)), np.int64)  # by the player's seat
    factories = np.zeros((len(FACTORY_ACTIONS), len(FACTORY_ACTIONS)), np.int64)
    moves = np.zeros((2, 2), np.int64)  # by seat: agreeing, both moving
    outcomes: dict[int, tuple[int, int]] = {}
    done = np.zeros(games, bool)
    last_lichen = np.zeros((games, 2))  # the player's, the heuristic's
    cells = batch.obs.shape[-1] * batch.obs.shape[-2]
    taken = np.zeros(2, np.int64)  # seat-steps the labeller played, all seat-steps
    start = time.perf_counter()
    step = 0
    while not done.all():
        assert batch.action_mask is not None  # Lux always has masks
        masks = batch.action_mask
        mine, theirs = batch.obs[envs, seat], batch.obs[envs, 1 - seat]
        mask = masks[envs, seat]
        last_lichen[~done] = np.stack([lichen_score(mine), lichen_score(theirs)], 1)[~done]
        acts = player(mine, mask)
        labels = label(mine, mask, rng)
        live = ~done[:, None]
        robot = ((mine[:, PLANE["own_light"]] > 0) | (mine[:, PLANE["own_heavy"]] > 0)
                 ).reshape(games, cells) & live
        seat_cells = np.broadcast_to(seat[:, None], robot.shape)
        np.add.at(units, (seat_cells[robot], labels[..., 0][robot], acts[..., 0][robot]), 1)
        if breakdown is not None:
            breakdown.add(mine, labels, acts, robot)
        both = robot & (labels[..., 0] == 1) & (acts[..., 0] == 1)
        agree = both & (labels[..., 1] == acts[..., 1])
        moves += np.stack([np.bincount(seat_cells[agree], minlength=2),
                           np.bincount(seat_cells[both], minlength=2)], 1)
        centre = (mine[:, PLANE["own_factory_centre"]] > 0).reshape(games, cells) & live
        np.add.at(factories, (labels[..., 5][centre], acts[..., 5][centre]), 1)
        if trace and step % 50 == 0:
            print(json.dumps({"step": step, "games_on": int((~done).sum()),
                              "player": side_summary(mine[~done]),
                              "heuristic": side_summary(theirs[~done])}), flush=True)
        both_seats = np.zeros((games, 2, cells, len(NVEC)), np.int64)
        played = acts
        if takeover is not None:
            progress = mine[:, PLANE["progress"], 0, 0] * OBS_SCALE
            take = (progress >= takeover[0]) & (progress < takeover[1])
            played = np.where(take[:, None, None], labels, acts)
            taken += [int((take & ~done).sum()), int((~done).sum())]
        both_seats[envs, seat] = played
        both_seats[envs, 1 - seat] = bots.heuristic(theirs, masks[envs, 1 - seat], rng)
        batch = game.step(both_seats)
        step += 1
        ep = batch.episodes
        for env, s, outcome, length in zip(ep.env.tolist(), ep.seat.tolist(),
                                           ep.outcome.tolist(), ep.length.tolist(), strict=True):
            if s == seat[env] and not done[env]:
                done[env] = True
                outcomes[env] = (outcome, length)
    game.close()
    results = np.array([outcomes[e][0] for e in range(games)])
    wins = int((results == 1).sum())
    by_seat = [{"games": int((seat == s).sum()), "wins": int((results[seat == s] == 1).sum()),
                "unit_agreement": _agreement(units[s]),
                "move_agreement": round(float(moves[s, 0] / max(moves[s, 1], 1)), 3),
                "mean_lichen_margin": round(float(np.mean(
                    last_lichen[seat == s, 0] - last_lichen[seat == s, 1])), 1)
                if (seat == s).any() else 0.0}
               for s in range(2)]
    units, moves = units.sum(0), moves.sum(0)
    return {"games": games, "wins": wins, "losses": int((results == -1).sum()),
            "draws": int((results == 0).sum()), "win_rate": wins / games,
            "ci95": [round(x, 3) for x in wilson_interval(wins, games)],
            "lengths": [outcomes[e][1] for e in range(games)],
            "lichen_before_end": last_lichen.astype(int).tolist(),
            "seconds": round(time.perf_counter() - start, 1),
            "unit_types": list(UNIT_TYPES), "unit_confusion": units.tolist(),
            "unit_agreement": _agreement(units),
            "unit_agreement_per_label": [round(float(units[k, k] / max(units[k].sum(), 1)), 3)
                                         for k in range(len(UNIT_TYPES))],
            "move_agreement": round(float(moves[0] / max(moves[1], 1)), 3),
            "factory_actions": list(FACTORY_ACTIONS), "factory_confusion": factories.tolist(),
            "by_seat": by_seat,
            **({} if takeover is None else {"takeover": {
                "window": list(takeover), "labeller": labeller, "seat_steps": int(taken[0]),
                "share": round(float(taken[0] / max(taken[1], 1)), 3)}})}


def _agreement(confusion: np.ndarray) -> float:
    """The share of a confusion matrix on its diagonal (0 when empty)."""
    return round(float(np.trace(confusion) / max(confusion.sum(), 1)), 3)


def _window(text: str) -> tuple[float, float]:
    """``START:END`` as two shares of the game, ``0 <= START < END``."""
    try:
        start, end = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END (e.g. 0.7:1), got {text!r}"
                                         ) from None
    if not 0 <= start < end:
        raise argparse.ArgumentTypeError(f"expected 0 <= START < END, got {text!r}")
    return start, end


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--steering", choices=["bfs", "near", "goals"],
                     help="the heuristic steering by its own fields (bfs), the planes (near), "
                          "or the planes' goal moves (goals: home and to ice)")
    who.add_argument("--checkpoint", help="a checkpoint or run directory")
    who.add_argument("--bot", choices=sorted(bots.BOTS), help="a scripted player")
    parser.add_argument("--games", type=positive_int, default=8)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--most-likely", action="store_true", help="the policy's modes")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--breakdown", action="store_true",
                        help="where the robots' action types differ from the labels")
    parser.add_argument("--labels", choices=sorted(bots.BOTS), default="heuristic",
                        help="the bot that labels the player's positions")
    parser.add_argument("--takeover", type=_window, metavar="START:END",
                        help="the labeller plays the player's seat while the game's progress "
                             "lies in [START, END) (e.g. 0.7:1: the last 30 %%)")
    parser.add_argument("--max-steps", type=positive_int, default=1000,
                        help="main-phase steps of a game (the rules: 1000)")
    args = parser.parse_args(argv)
    if args.max_steps > 1000:
        parser.error(f"--max-steps must be at most 1000 (the rules' main phase), got "
                     f"{args.max_steps}")
    rng = np.random.default_rng(args.seed + 1)
    player: Player
    if args.checkpoint is not None:
        path = resolve_checkpoint(args.checkpoint)
        state = load_checkpoint(path)
        spec = LuxVecGame(LuxOptions(), num_envs=1, seed=0).spec
        _, agent, _ = load_agent(path, spec, state)
        policy = FrozenPolicy(agent, args.most_likely, torch.Generator().manual_seed(args.seed))
        player = partial(policy.act, state=None)
        name = str(path)
    elif args.bot is not None:
        player = partial(bots.BOTS[args.bot], rng=rng)
        name = args.bot
    else:
        steering = bots.bfs_fields if args.steering == "bfs" else bots.near_plane_fields
        player = partial(bots.heuristic, rng=rng, steering=steering,
                         goals=args.steering == "goals")
        name = f"heuristic steering by {args.steering}"
    breakdown = Breakdown() if args.breakdown else None
    result = play(player, args.games, args.seed, args.trace, args.max_steps, args.labels,
                  breakdown, args.takeover)
    if breakdown is not None:
        result["breakdown"] = breakdown.summary()
    print(json.dumps({"player": name, "opponent": "heuristic", "labels": args.labels, **result}))


if __name__ == "__main__":
    run_tool(main)
