"""Matches of a checkpoint against a bot or another checkpoint (``selfplay play``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from games.core import Box, Outcome
from games.matchups import match_setup
from games.registry import make_game
from selfplay.checkpoint import CheckpointError, load_checkpoint
from selfplay.config import config_from_mapping
from selfplay.evaluate import load_agent, write_video
from selfplay.ppo import FrozenPolicy, Policy


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def play(checkpoint: str | Path, vs: str, games: int = 100, map_name: str | None = None,
         video: Path | None = None, seed: int = 0, num_envs: int | None = None,
         deterministic: bool = False) -> dict[str, Any]:
    """Play ``games`` games of ``checkpoint`` against ``vs`` (a bot name or a checkpoint path).

    Sides alternate between games (the games' own convention: seat 0 is player 0 in even envs
    and player 1 in odd ones). Each env plays a fixed quota of games, so short games are not
    over-counted. Returns wins / losses / draws of ``checkpoint`` with a 95 % interval.
    """
    if games < 1:
        raise ValueError("games must be >= 1")
    state = load_checkpoint(checkpoint)
    config = config_from_mapping(state["config"])
    opponent_path = Path(vs) if Path(vs).is_file() else None
    envs = num_envs or min(games, 16)
    setup = match_setup(config.game.name, None if opponent_path else vs, envs, seed, map_name)
    options = {**config.game.options, **setup.options}
    game = make_game(config.game.name, num_envs=envs, seed=seed, options=options)
    try:
        spec = game.spec
        _, agent, _ = load_agent(checkpoint, spec, state)
        generator = torch.Generator().manual_seed(seed)
        policies: list[Policy] = [FrozenPolicy(agent, deterministic, generator)]
        opponent_name = setup.opponent_name
        if opponent_path is not None:
            other_state = load_checkpoint(opponent_path)
            other_game = config_from_mapping(other_state["config"]).game.name
            if other_game != config.game.name:
                raise CheckpointError(f"{opponent_path} plays {other_game}, not "
                                      f"{config.game.name}")
            _, other, _ = load_agent(opponent_path, spec, other_state)
            policies.append(FrozenPolicy(other, deterministic, generator))
            opponent_name = str(opponent_path)
        elif setup.scripted is not None:
            policies.append(setup.scripted)
        elif spec.num_seats == 2:  # the opponent plays inside the engine: seat 1 never acts
            policies.append(_IdleSeat(spec.action_space.action_shape))
        if len(policies) != spec.num_seats:
            raise RuntimeError(f"{spec.name} has {spec.num_seats} seats for "
                               f"{len(policies)} players")
        outcomes = _run(game, policies, games, seed, video)
    finally:
        game.close()
    wins = int((outcomes == Outcome.WIN).sum())
    losses = int((outcomes == Outcome.LOSS).sum())
    draws = int(len(outcomes) - wins - losses)
    low, high = wilson_interval(wins, len(outcomes))
    return {"checkpoint": str(checkpoint), "opponent": opponent_name or vs,
            "game": config.game.name, "map": options.get("map"), "games": len(outcomes),
            "wins": wins, "losses": losses, "draws": draws,
            "win_rate": wins / len(outcomes), "ci95": [low, high],
            "video": str(video) if video is not None else None}


class _IdleSeat:
    """The policy of a seat that never acts (its opponent is the engine's own player)."""

    def __init__(self, action_shape: tuple[int, ...]) -> None:
        self.action_shape = action_shape

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        return np.zeros((len(obs), *self.action_shape), np.int64)


def _run(game: Any, policies: list[Policy], games: int, seed: int,
         video: Path | None) -> np.ndarray:
    """Outcomes of seat 0 over ``games`` games, a fixed quota per env."""
    spec = game.spec
    e = spec.num_envs
    quota = np.full(e, games // e) + (np.arange(e) < games % e)
    played = np.zeros(e, np.int64)
    outcomes: list[int] = []
    frames: list[np.ndarray] = []
    recording = video is not None
    batch = game.reset(seed=seed)
    dtype = np.float32 if isinstance(spec.action_space, Box) else np.int64
    actions = np.zeros((e, spec.num_seats, *spec.action_space.action_shape), dtype)
    while (played < quota).any():
        if recording:
            frames.append(game.render(0))
        for seat, policy in enumerate(policies):
            mask = batch.action_mask[:, seat] if batch.action_mask is not None else None
            state = batch.state[:, seat] if batch.state is not None else None
            actions[:, seat] = policy.act(batch.obs[:, seat], mask, state)
        batch = game.step(actions)
        ep = batch.episodes
        for env, seat, outcome in zip(ep.env.tolist(), ep.seat.tolist(), ep.outcome.tolist(),
                                      strict=True):
            if seat != 0:
                continue
            if env == 0:
                recording = False
            if played[env] < quota[env]:
                played[env] += 1
                outcomes.append(outcome)
    if video is not None:
        write_video(video, frames, spec.render_fps)
    return np.asarray(outcomes, np.int8)
