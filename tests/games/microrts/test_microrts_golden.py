"""Golden trajectories: a scripted action sequence on a small map reproduces stored hashes.

The hash covers every step's observations, masks, rewards and episode flags, so any change in
the engine, the encoding, the seat/side conventions, rotation, fog or episode handling shows up
here. The stored values were computed with the first adapter (gather-based conversions) and are
reproduced bit for bit by the current one. If a deliberate change of the encoding alters them,
update the constants and say why in the commit.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from games.microrts.adapter import ACTION_NVEC, PAD_PLANE, MicroRTSVecGame

_OFFSETS = np.cumsum((0, *ACTION_NVEC))
STEPS = 600
OPTIONS = dict(map="basesWorkers8x8", num_selfplay_envs=2, bots=["WorkerRush", "LightRush"],
               max_steps=250)
GOLDEN = {
    "plain": "039c7718efdef1ffe9ea0dc7213343eae249541d2f3662a622051485591cf30a",
    "rotated_fogged": "85c2441f9146886d7c65fa65ac11cbbd5def3f9fa004fd1249b26f9803162c57",
}


def scripted_actions(mask: np.ndarray, t: int) -> np.ndarray:
    """A deterministic policy without random numbers: per cell with a unit, the first legal
    type in a priority order that changes with ``t``, and for every other component the legal
    value at position ``(t + cell) % count`` among the legal ones."""
    out = np.zeros((*mask.shape[:-1], len(ACTION_NVEC)), np.int64)
    rows, flat = mask.reshape(-1, mask.shape[-1]), out.reshape(-1, len(ACTION_NVEC))
    order = [4, 2, 3, 5, 1] if t % 3 else [1, 5, 4, 2, 3]
    for i in np.flatnonzero(rows[:, 0]):
        row = rows[i]
        flat[i, 0] = next((a for a in order if row[a]), 0)
        for k in range(1, len(ACTION_NVEC)):
            legal = np.flatnonzero(row[_OFFSETS[k]:_OFFSETS[k + 1]])
            if len(legal):
                flat[i, k] = legal[(t + i) % len(legal)]
    return out


def trajectory_hash(game: MicroRTSVecGame, steps: int) -> tuple[str, list[tuple[int, ...]]]:
    """sha256 over ``steps`` steps' obs (the planes before off_map), masks, rewards
    (little-endian float32) and flags, and the finished episodes as (env, seat, outcome,
    length)."""
    digest = hashlib.sha256()
    episodes: list[tuple[int, ...]] = []
    batch = game.reset()
    for t in range(steps):
        assert batch.action_mask is not None
        # the planes before off_map (hashed since the first adapter); one map size: no padding
        assert not batch.obs[:, :, PAD_PLANE].any()
        for array in (batch.obs[:, :, :PAD_PLANE], batch.action_mask, batch.reward.astype("<f4"),
                      batch.terminated, batch.truncated):
            digest.update(np.ascontiguousarray(array).tobytes())
        batch = game.step(scripted_actions(batch.action_mask, t))
        stats = batch.episodes
        episodes += zip(stats.env.tolist(), stats.seat.tolist(), stats.outcome.tolist(),
                        stats.length.tolist(), strict=True)
    return digest.hexdigest(), episodes


@pytest.mark.parametrize("case", ["plain", "rotated_fogged"])
def test_scripted_trajectory_hash(make_game, case: str) -> None:
    extra = dict(rotate_player1=True, partial_obs=True) if case == "rotated_fogged" else {}
    game = make_game(4, **OPTIONS, **extra)
    digest, episodes = trajectory_hash(game, STEPS)
    assert any(length == 250 for _, _, _, length in episodes), "games were truncated"
    if case == "plain":
        assert (2, 0, -1, 185) in episodes, "WorkerRush won env 2 at cycle 185"
    assert digest == GOLDEN[case]
