"""Loading a trained policy from a checkpoint and measuring it (``selfplay eval``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from games.core import GameSpec, SupportsFinalFrame, SupportsRender, VecGame
from games.registry import make_game
from selfplay.checkpoint import CheckpointError, load_checkpoint
from selfplay.config import TrainConfig, config_from_mapping
from selfplay.networks import ActorCritic
from selfplay.policy import FrozenPolicy


def load_agent(path: str | Path, spec: GameSpec | None = None,
               state: dict[str, Any] | None = None
               ) -> tuple[TrainConfig, ActorCritic, dict[str, Any]]:
    """Config, network and raw checkpoint of ``path`` (or of its already loaded ``state``).

    ``spec`` defaults to the spec of a 1-env instance of the checkpoint's game.
    """
    if state is None:
        state = load_checkpoint(path)
    try:
        config = config_from_mapping(state["config"])
        weights = state["agent"]
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{path} lacks the training config or weights") from exc
    if spec is None:
        game = make_game(config.game.name, num_envs=1, seed=config.seed,
                         options=config.game.options)
        spec = game.spec
        game.close()
    agent = ActorCritic(spec, config.network, config.normalize)
    try:
        agent.load_state_dict(weights)
    except RuntimeError as exc:
        raise CheckpointError(f"{path} does not match the network of game "
                              f"{config.game.name}: {str(exc).splitlines()[0][:160]}") from exc
    return config, agent.eval(), state


def run_episodes(game: VecGame, policy: FrozenPolicy, episodes: int, seed: int,
                 video: Path | None = None, max_steps: int = 10_000_000) -> list[float]:
    """Returns of ``episodes`` finished episodes of seat 0; the policy plays every seat.

    Each env contributes a fixed share (``episodes`` split evenly over the envs, in env
    order), not whichever episodes end first: those would be the short ones, and biased.
    """
    spec = game.spec
    e, a = spec.num_envs, spec.num_seats
    batch = game.reset(seed=seed)
    quota = np.full(e, episodes // e, np.int64) + (np.arange(e) < episodes % e)  # [E]
    per_env: list[list[float]] = [[] for _ in range(e)]
    frames: list[np.ndarray] = []
    render = game.render if video is not None and isinstance(game, SupportsRender) else None
    recording = render is not None
    steps = 0
    while any(len(r) < q for r, q in zip(per_env, quota, strict=True)) and steps < max_steps:
        if recording and render is not None:
            frames.append(render(0))
        mask = (batch.action_mask.reshape(e * a, *batch.action_mask.shape[2:])
                if batch.action_mask is not None else None)
        state = (batch.state.reshape(e * a, *batch.state.shape[2:])
                 if batch.state is not None else None)
        actions = policy.act(batch.obs.reshape(e * a, *spec.obs_shape), mask, state)
        batch = game.step(actions.reshape(e, a, *spec.action_space.action_shape))
        steps += 1
        stats = batch.episodes
        seat0 = stats.seat == 0
        for env, ret in zip(stats.env[seat0].tolist(), stats.ret[seat0].tolist(), strict=True):
            if len(per_env[env]) < quota[env]:
                per_env[env].append(ret)
        if recording and (stats.env[seat0] == 0).any():
            recording = False  # one full episode of env 0 is in the video
            add_final_frame(game, frames)
    if video is not None:
        write_video(video, frames, spec.render_fps)
    return [ret for env_returns in per_env for ret in env_returns]


def add_final_frame(game: VecGame, frames: list[np.ndarray]) -> None:
    """Append the last position of env 0's finished episode, where the game can draw it (the
    frames grabbed before each step stop one move short of the end)."""
    if isinstance(game, SupportsFinalFrame):
        frames.append(game.render_final(0))


def write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    if not frames:
        raise RuntimeError("this game cannot render frames, so no video was written")
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(str(path), list(frames), fps=fps,  # type: ignore[arg-type]
                     macro_block_size=1)


def evaluate(checkpoint: str | Path, episodes: int = 10, video: Path | None = None,
             deterministic: bool = False, seed: int | None = None,
             num_envs: int | None = None) -> dict[str, Any]:
    """Mean/std return of a checkpoint's policy over ``episodes`` episodes."""
    state = load_checkpoint(checkpoint)
    config = config_from_mapping(state["config"])
    options = dict(config.game.options)
    if video is not None:
        options["render"] = True
    envs = num_envs or (1 if video is not None else min(episodes, 8))
    eval_seed = seed if seed is not None else config.seed + 10_000
    game = make_game(config.game.name, num_envs=envs, seed=eval_seed, options=options)
    try:
        _, agent, _ = load_agent(checkpoint, game.spec, state)
        policy = FrozenPolicy(agent, deterministic=deterministic,
                              generator=torch.Generator().manual_seed(eval_seed))
        returns = run_episodes(game, policy, episodes, eval_seed, video)
    finally:
        game.close()
    arr = np.asarray(returns, dtype=np.float64)
    return {"checkpoint": str(checkpoint), "game": config.game.name, "episodes": len(returns),
            "mean_return": float(arr.mean()) if len(arr) else float("nan"),
            "std_return": float(arr.std()) if len(arr) else float("nan"),
            "returns": [float(r) for r in returns],
            "video": str(video) if video is not None else None}
