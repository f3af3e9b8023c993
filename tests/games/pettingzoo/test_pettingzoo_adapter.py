"""The two-player Atari adapter on the real emulator: PettingZoo's API test on the facade, a
golden run against PettingZoo's own env, observation layout, rewards, autoreset, statistics."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from games.core import Batch, GameError, Outcome, VecGame
from games.facades_pz import make_parallel_env
from games.pettingzoo import PettingZooAtari, make, two_player_games
from games.pettingzoo.catalog import rom_directory
from selfplay.checkpoint import load_checkpoint, save_checkpoint

PONG_ACTIONS = 6


def _random(game: PettingZooAtari, rng: np.random.Generator) -> np.ndarray:
    spec = game.spec
    return rng.integers(0, spec.action_space.n, (spec.num_envs, spec.num_seats))  # type: ignore[union-attr]


def test_parallel_api_test_on_the_facade() -> None:
    env = make_parallel_env("pettingzoo/pong_v3", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=500)
    assert env.render() is not None and env.render().shape == (210, 160, 3)  # type: ignore[union-attr]


def _golden(base: str, max_steps: int) -> tuple[Batch, np.ndarray, int, int]:
    """Step our game and PettingZoo's own env (grayscale obs, the same preprocessing done here)
    with the same random actions until game over or ``max_steps``; compare rewards, frames,
    game over and which seats are in the game. Returns the last batch, the raw returns, the
    steps played and the number of steps on which a seat was out of the game."""
    game = make(f"pettingzoo/{base}", num_envs=1, seed=0, clip_rewards=False)
    batch = game.reset()
    module = importlib.import_module(f"pettingzoo.atari.{base}.{base}")
    pz = module.parallel_env(auto_rom_install_path=str(rom_directory()),
                             obs_type="grayscale_image")
    obs, _ = pz.reset(seed=0)
    agents = list(pz.possible_agents)

    def resized(frame: np.ndarray) -> np.ndarray:
        return cv2.resize(frame, (84, 84), interpolation=cv2.INTER_LINEAR)

    if base == "pong":  # same start; other games may draw theirs from the ALE's RNG
        assert (batch.obs[0, :, :4] == resized(obs[agents[0]][:, :, 0])).all()
    state = np.frombuffer(game._em.save(0), np.uint8).copy()
    pz.unwrapped.restore_full_state(state)  # the same emulator state (and RNG) in both
    rng = np.random.default_rng(1)
    returns = np.zeros(2)
    steps = out = 0
    over = False
    while steps < max_steps and not over:
        steps += 1
        actions = rng.integers(0, game.spec.action_space.n, 2)  # type: ignore[union-attr]
        reward, frames = np.zeros(2), []
        for _ in range(4):
            obs, rew, _, _, _ = pz.step({a: actions[i] for i, a in enumerate(agents)
                                         if a in pz.agents})
            reward += [rew.get(a, 0) for a in agents]
            frames.append(obs[next(iter(obs))][:, :, 0])
            over = not pz.agents
            if over:
                break
        batch = game.step(actions[None])
        returns += reward
        np.testing.assert_array_equal(batch.reward[0], reward)
        expected = resized(np.maximum(frames[-2], frames[-1]) if len(frames) > 1 else frames[0])
        assert batch.final_obs is not None
        np.testing.assert_array_equal(batch.final_obs[0, 0, 3], expected)
        assert bool(batch.terminated[0]) == over
        if not over:
            assert batch.alive[0].tolist() == [a in pz.agents for a in agents]
            out += int(not batch.alive.all())
    game.close()
    return batch, returns, steps, out


def test_golden_run_against_pettingzoo_until_game_over() -> None:
    batch, returns, steps, _ = _golden("pong", 3000)
    assert batch.terminated[0], "pong with random play should end within 3000 steps"
    episodes = batch.episodes
    assert episodes.seat.tolist() == [0, 1] and episodes.length.tolist() == [steps] * 2
    np.testing.assert_array_equal(episodes.ret, returns)
    winner = int(np.argmax(returns))
    assert episodes.outcome[winner] == Outcome.WIN and episodes.outcome[1 - winner] == Outcome.LOSS


def test_golden_run_with_a_seat_out_of_the_game() -> None:
    """In mario_bros a seat that lost its lives is out while the other plays on."""
    _, _, _, out = _golden("mario_bros", 800)
    assert out > 0


def test_observation_layout_and_agent_indicator() -> None:
    game = make("pettingzoo/pong_v3", num_envs=3, seed=0)
    assert isinstance(game, VecGame)
    spec = game.spec
    assert spec.obs_shape == (6, 84, 84) and spec.state_shape == (6, 84, 84)
    assert spec.obs_kind == "image" and spec.num_seats == 2 and spec.zero_sum
    assert spec.action_space.n == PONG_ACTIONS  # type: ignore[union-attr]
    batch = game.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        batch = game.step(_random(game, rng))
    obs = batch.obs
    assert obs.shape == (3, 2, 6, 84, 84) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs[:, 0, :4], obs[:, 1, :4])  # the same screen
    assert (obs[:, 0, 4] == 255).all() and (obs[:, 0, 5] == 0).all()
    assert (obs[:, 1, 4] == 0).all() and (obs[:, 1, 5] == 255).all()
    assert batch.state is not None
    np.testing.assert_array_equal(batch.state, obs)
    assert batch.action_mask is not None and batch.action_mask.shape == (3, 2, PONG_ACTIONS)
    assert batch.alive.all() and batch.reward.dtype == np.float32
    assert game.render(2).shape == (210, 160, 3)
    game.close()


def test_options_change_the_layout() -> None:
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0, frame_stack=2, screen_size=64,
                agent_indicator=False, global_state=False)
    batch = game.reset()
    assert game.spec.obs_shape == (2, 64, 64) and batch.obs.shape == (2, 2, 2, 64, 64)
    assert batch.state is None and game.spec.state_shape is None
    game.close()


def test_mirror_second_seat_flips_its_frames_not_the_state() -> None:
    game = make("pettingzoo/pong_v3", num_envs=1, seed=0, mirror_second_seat=True)
    game.reset()
    rng = np.random.default_rng(0)
    for _ in range(20):
        batch = game.step(_random(game, rng))
    np.testing.assert_array_equal(batch.obs[0, 1, :4], batch.obs[0, 0, :4, :, ::-1])
    assert batch.state is not None
    np.testing.assert_array_equal(batch.state[0, 1, :4], batch.obs[0, 0, :4])
    np.testing.assert_array_equal(batch.state[0, 1, 4:], batch.obs[0, 1, 4:])
    game.close()


def test_pong_rewards_are_zero_sum_between_seats() -> None:
    game = make("pettingzoo/pong_v3", num_envs=4, seed=0)
    game.reset()
    rng = np.random.default_rng(0)
    scored = 0
    for _ in range(400):
        batch = game.step(_random(game, rng))
        np.testing.assert_array_equal(batch.reward[:, 0], -batch.reward[:, 1])
        assert set(np.unique(batch.reward)) <= {-1.0, 0.0, 1.0}
        scored += int(np.count_nonzero(batch.reward[:, 0]))
    assert scored > 0
    game.close()


def test_frame_stack_resets_at_episode_end() -> None:
    """A truncated episode (max_cycles frames) restarts with its first frame stacked 4 times;
    final_obs keeps the last stack of the finished one."""
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0, max_cycles=400)  # 100 steps
    first = game.reset().obs.copy()
    assert (first[:, :, :4] == first[:, :, :1]).all()
    rng = np.random.default_rng(0)
    for step in range(100):
        batch = game.step(_random(game, rng))
        assert bool(batch.truncated.any()) == (step == 99)
    assert batch.truncated.all() and not batch.terminated.any()
    np.testing.assert_array_equal(batch.obs, first)  # the game is deterministic
    assert batch.final_obs is not None and batch.final_state is not None
    assert not (batch.final_obs[:, :, :4] == batch.final_obs[:, :, :1]).all()
    np.testing.assert_array_equal(batch.final_state, batch.final_obs)
    episodes = batch.episodes
    assert episodes.env.tolist() == [0, 0, 1, 1] and episodes.seat.tolist() == [0, 1, 0, 1]
    assert (episodes.length == 100).all()
    assert (episodes.outcome == Outcome.NONE).all()  # truncated: no winner
    np.testing.assert_array_equal(episodes.ret[0::2], -episodes.ret[1::2])
    assert not (game.render_final(0) == game.render(0)).all()
    batch = game.step(_random(game, rng))  # the new episode's stack: first frame x3, new one
    np.testing.assert_array_equal(batch.obs[:, :, :3], first[:, :, :3])
    assert not batch.truncated.any() and len(batch.episodes.env) == 0
    game.close()


def test_state_round_trip_through_a_checkpoint_continues_exactly(tmp_path: Path) -> None:
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0, max_cycles=200)  # 50-step episodes
    game.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        game.step(_random(game, rng))
    path = save_checkpoint(tmp_path / "state.pt", {"game": game.get_state()})
    actions = [_random(game, rng) for _ in range(40)]
    first = [game.step(a) for a in actions]
    assert any(b.truncated.any() for b in first), "no episode end covered"
    other = make("pettingzoo/pong_v3", num_envs=2, seed=5, max_cycles=200)
    snapshot = load_checkpoint(path)["game"]
    other.set_state(snapshot)
    second = [other.step(a) for a in actions]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.reward, b.reward)
        np.testing.assert_array_equal(a.truncated, b.truncated)
        np.testing.assert_array_equal(a.episodes.ret, b.episodes.ret)
    with pytest.raises(GameError, match="state is for pettingzoo/pong_v3 x2"):
        make("pettingzoo/pong_v3", num_envs=1).set_state(snapshot)
    game.close()
    other.close()


def test_seeds_reproduce_sticky_actions() -> None:
    """Env i's emulator RNG (sticky actions) is seeded with seed + i; reset(seed) re-seeds."""

    def play(game: PettingZooAtari, seed: int | None) -> np.ndarray:
        rng = np.random.default_rng(0)
        frames = [game.reset(seed=seed).obs]
        for _ in range(60):
            actions = np.repeat(_random(game, rng)[:1], 2, axis=0)  # the same in both envs
            frames.append(game.step(actions).obs)
        return np.stack(frames)  # [T, E, A, C, H, W]

    options = {"repeat_action_probability": 0.25}
    game = make("pettingzoo/pong_v3", num_envs=2, seed=3, **options)
    first = play(game, None)
    assert not np.array_equal(first[:, 0], first[:, 1])  # seeds 3 and 4 diverge
    again = make("pettingzoo/pong_v3", num_envs=2, seed=3, **options)
    np.testing.assert_array_equal(play(again, None), first)
    other = make("pettingzoo/pong_v3", num_envs=2, seed=0, **options)
    np.testing.assert_array_equal(play(other, 3), first)
    np.testing.assert_array_equal(play(other, 3), first)
    for g in (game, again, other):
        g.close()


@pytest.mark.parametrize("num_envs,builtin_share", [(3, 0.0), (4, 0.5)])
def test_threads_give_the_same_results(num_envs: int, builtin_share: float) -> None:
    """1 and 2 stepping threads agree, also with envs against the console's own player."""
    games = [make("pettingzoo/pong_v3", num_envs=num_envs, seed=0, num_threads=n,
                  builtin_opponent_share=builtin_share) for n in (1, 2)]
    batches = [g.reset() for g in games]
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = _random(games[0], rng)
        batches = [g.step(actions) for g in games]
        np.testing.assert_array_equal(batches[0].obs, batches[1].obs)
        np.testing.assert_array_equal(batches[0].reward, batches[1].reward)
    for g in games:
        g.close()


def test_bad_actions_and_closed_game() -> None:
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0)
    with pytest.raises(GameError, match="reset"):
        game.step(np.zeros((2, 2), np.int64))
    game.reset()
    with pytest.raises(GameError, match=r"actions must be \[E, A\] = \[2, 2\]"):
        game.step(np.zeros((2, 3), np.int64))
    with pytest.raises(GameError, match=r"actions must be in \[0, 6\)"):
        game.step(np.full((2, 2), 6))
    game.close()
    with pytest.raises(GameError, match="closed"):
        game.reset()


@pytest.mark.parametrize("name", two_player_games())
def test_every_two_player_game_runs(name: str) -> None:
    game = make(f"pettingzoo/{name}", num_envs=1, seed=0, max_cycles=40)
    batch = game.reset()
    assert batch.obs.shape == (1, 2, 6, 84, 84)
    rng = np.random.default_rng(0)
    for _ in range(10):
        batch = game.step(_random(game, rng))
    assert batch.truncated.all() and len(batch.episodes.env) == 2
    assert (batch.episodes.outcome == Outcome.NONE).all()  # truncated: no winner
    game.close()
