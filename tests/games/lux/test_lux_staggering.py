"""Staggered Lux games (:meth:`games.lux.adapter.LuxVecGame.stagger`): every Lux game lasts
the same number of steps, so envs reset together stay at the same step; staggering ends each
env's running game early, truncated, so that the envs spread over a game's phases, and live
cloning (``bc.stagger_games``) does it to its teacher games."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from games.batches import random_actions
from games.core import GameError, Outcome, SupportsGameProgress, SupportsStaggering
from games.family import Teachers
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.layout import PLANE
from games.registry import family_of

LENGTH, E = 12, 4  # env e's first game is cut at step 3 e


def _play(game: LuxVecGame, steps: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    """Per step: which envs ended by the rules, which were cut, the episodes' outcomes and the
    rewards."""
    rng = np.random.default_rng(seed)
    batch, out = game.reset(), []
    assert game.stagger()
    for _ in range(steps):
        mask = batch.action_mask
        batch = game.step(random_actions(game.spec.action_space, mask, rng, (E, 2)))
        out.append({"terminated": batch.terminated.copy(), "truncated": batch.truncated.copy(),
                    "env": batch.episodes.env.copy(), "outcome": batch.episodes.outcome.copy(),
                    "reward": batch.reward.copy(),
                    "progress": batch.obs[:, 0, PLANE["progress"], 0, 0].copy()})
    return out


def test_staggered_games_end_truncated_at_spread_steps_then_run_whole() -> None:
    game = LuxVecGame(LuxOptions(max_steps=LENGTH, reward_weights={"win": 1.0}), E, seed=3)
    assert isinstance(game, SupportsStaggering)
    steps = _play(game, 2 * LENGTH)
    ends = {e: [t + 1 for t, s in enumerate(steps) if s["terminated"][e] or s["truncated"][e]]
            for e in range(E)}
    # env e's first game is cut at step LENGTH * e / E; every later game runs its LENGTH
    assert ends == {0: [12, 24], 1: [3, 15], 2: [6, 18], 3: [9, 21]}
    for e in range(1, E):
        cut = steps[ends[e][0] - 1]
        assert cut["truncated"][e] and not cut["terminated"][e]
        assert (cut["outcome"][cut["env"] == e] == Outcome.NONE).all()  # no winner
        assert (cut["reward"][e] == 0).all()  # and no win reward
        later = steps[ends[e][1] - 1]
        assert later["terminated"][e] and not later["truncated"][e]
        assert set(later["outcome"][later["env"] == e]) <= {-1, 0, 1}
    # from then on the envs are at different steps of their games
    assert len(set(np.round(steps[10]["progress"], 3))) == E


def test_staggering_resumes_exactly_and_needs_a_reset() -> None:
    with pytest.raises(GameError, match="reset"):
        LuxVecGame(LuxOptions(max_steps=LENGTH), E, seed=3).stagger()
    a = LuxVecGame(LuxOptions(max_steps=LENGTH), E, seed=3)
    rng = np.random.default_rng(2)
    batch = a.reset()
    a.stagger()
    for _ in range(4):
        batch = a.step(random_actions(a.spec.action_space, batch.action_mask, rng, (E, 2)))
    saved = a.get_state()
    b = LuxVecGame(LuxOptions(max_steps=LENGTH), E, seed=3)
    b.reset()
    b.set_state(saved)
    for _ in range(8):
        acts = random_actions(a.spec.action_space, batch.action_mask, rng, (E, 2))
        batch, other = a.step(acts), b.step(acts)
        assert np.array_equal(batch.truncated, other.truncated)
        assert np.array_equal(batch.obs, other.obs)
    # a state saved before staggering existed has no countdown: nothing is cut
    b.set_state({k: v for k, v in saved.items() if k != "cut_in"})
    assert not any(b.step(random_actions(b.spec.action_space, batch.action_mask, rng,
                                         (E, 2))).truncated.any() for _ in range(4))


def test_live_cloning_staggers_its_teacher_games() -> None:
    """The cloner's teacher games (heuristic against random) are cut at spread steps with
    ``bc.stagger_games`` and all run in step without it. With ``bc.phase_weights`` each
    position weighs its part of the game's weight, read from how far its game has gone (and the
    grid network learns from them in bfloat16)."""
    from selfplay.cloning import Cloner
    from selfplay.config_files import build_config

    def first_ends(stagger: bool) -> list[int]:
        config = build_config("lux", overrides=[
            f"bc.num_envs={E}", f"bc.num_steps={LENGTH}", f"bc.stagger_games={stagger}",
            "bc.teachers=[heuristic,random]", "bc.imitate=[heuristic]", "bc.validate_every=0",
            "bc.snapshot_every=0", f"game.options.max_steps={LENGTH}",
            "network.channels=[8,8]", "network.hidden=[16]", "log.progress=false",
            *(["bc.phase_weights=[1, 2, 4]", "precision=bfloat16"] if stagger else [])])
        teachers = Teachers(bots=("heuristic", "random"), imitate=("heuristic",))
        game = family_of("lux").teacher_game("lux", teachers, E, 5, {"max_steps": LENGTH})
        assert isinstance(game, SupportsStaggering) and isinstance(game, SupportsGameProgress)
        cloner = Cloner(config, game)
        cloner.collect()
        done = cloner.dones.numpy()[:, :, 0] > 0  # [T, E]
        if stagger:  # thirds of the 12 steps: the progress plane is exact at 4 / 12, 8 / 12
            progress = cloner.obs[:, :, :, PLANE["progress"], 0, 0].double() / 255
            expected = torch.tensor([1.0, 2.0, 4.0])[(progress * 3).floor().long().clamp(0, 2)]
            weights = cloner.phase_weights()
            assert weights is not None and cloner.game_progress is not None
            assert torch.equal(weights, expected.float())
            assert set(weights.unique().tolist()) == {1.0, 2.0, 4.0}
            assert torch.allclose(cloner.game_progress, progress[:, :, 0].float(), atol=1 / 255)
            assert np.isfinite(cloner.learn()["loss/bc_policy"])
        else:
            assert cloner.phase_weights() is None
            assert cloner.game_progress is not None  # recorded, only not weighed
        cloner.close()
        return [int(np.flatnonzero(done[:, e])[0]) + 1 for e in range(E)]

    assert first_ends(True) == [12, 3, 6, 9]
    assert first_ends(False) == [12] * E


def test_ppo_rollouts_stagger_their_games() -> None:
    """``ppo.stagger_games``: the acting loop's fresh Lux games are cut at spread steps."""
    from games.registry import make_game
    from selfplay.config_files import build_config
    from selfplay.ppo import Trainer

    def first_ends(stagger: bool) -> list[int]:
        config = build_config("lux", overrides=[
            f"game.num_envs={E}", f"ppo.num_steps={LENGTH}", f"ppo.stagger_games={stagger}",
            f"game.options.max_steps={LENGTH}", "league.enabled=false",
            "network.channels=[8,8]", "network.hidden=[16]", "log.progress=false"])
        game = make_game("lux", E, seed=5, options={"max_steps": LENGTH})
        trainer = Trainer(config, game)
        trainer.collect()
        done = trainer.buffer.dones.numpy()[:, :, 0] > 0  # [T, E]
        game.close()
        return [int(np.flatnonzero(done[:, e])[0]) + 1 for e in range(E)]

    assert first_ends(True) == [12, 3, 6, 9]
    assert first_ends(False) == [12] * E
