"""GymVecGame over classic control, MuJoCo and Atari: shapes, golden runs against plain
gymnasium, autoreset, episode statistics, options, state round trips and rendering."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from games.batches import random_actions
from games.core import Box, Discrete, GameError, VecGame
from games.gym.atari import resolve_game
from games.options import OptionError
from games.registry import make_game
from selfplay.checkpoint import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[2]

CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
           "MountainCarContinuous-v0"]


def _random(game: VecGame, rng: np.random.Generator, mask: np.ndarray | None) -> np.ndarray:
    return random_actions(game.spec.action_space, mask, rng, (game.spec.num_envs, 1))


# --------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("name", CLASSIC + ["HalfCheetah-v5"])
def test_vector_games_shapes_and_dtypes(name: str) -> None:
    game = make_game(name, num_envs=3, seed=0)
    assert isinstance(game, VecGame)
    spec = game.spec
    assert spec.num_envs == 3 and spec.num_seats == 1 and spec.obs_kind == "vector"
    batch = game.reset()
    assert batch.obs.shape == (3, 1, *spec.obs_shape) and batch.obs.dtype == np.float32
    assert batch.state is None
    rng = np.random.default_rng(0)
    for _ in range(3):
        batch = game.step(_random(game, rng, batch.action_mask))
        assert batch.obs.shape == (3, 1, *spec.obs_shape) and batch.obs.dtype == np.float32
        assert batch.reward.shape == (3, 1) and batch.reward.dtype == np.float32
        assert batch.terminated.shape == (3,) and batch.terminated.dtype == bool
        assert batch.truncated.shape == (3,) and batch.alive.shape == (3, 1)
        assert batch.final_obs is not None and batch.final_obs.shape == batch.obs.shape
    if isinstance(spec.action_space, Discrete):
        assert batch.action_mask is not None and batch.action_mask.dtype == bool
        assert batch.action_mask.shape == (3, 1, spec.action_space.n) and batch.action_mask.all()
    else:
        assert isinstance(spec.action_space, Box) and batch.action_mask is None
    game.close()


def test_atari_shapes_and_dtypes() -> None:
    game = make_game("atari/Pong", num_envs=2, seed=0)
    spec = game.spec
    assert spec.name == "atari/Pong" and spec.obs_kind == "image"
    assert spec.obs_shape == (4, 84, 84) and spec.obs_dtype == np.uint8
    assert spec.action_space == Discrete(6)
    batch = game.reset()
    assert batch.obs.shape == (2, 1, 4, 84, 84) and batch.obs.dtype == np.uint8
    assert (batch.obs[:, :, 0] == batch.obs[:, :, 3]).all()  # the stack starts filled
    batch = game.step(np.zeros((2, 1), np.int64))
    assert batch.obs.shape == (2, 1, 4, 84, 84) and batch.action_mask is not None
    assert batch.action_mask.shape == (2, 1, 6)
    small = make_game("atari/Breakout", 1, seed=0, options={"frame_stack": 2, "screen_size": 64})
    assert small.spec.obs_shape == (2, 64, 64) and small.reset().obs.shape == (1, 1, 2, 64, 64)


# --------------------------------------------------------------------------- golden runs


def test_cartpole_matches_plain_gymnasium_with_autoreset() -> None:
    """Obs, autoreset obs, final obs, truncation and episode returns equal a plain loop's."""
    num_envs, seed, limit = 2, 3, 25
    game = make_game("CartPole-v1", num_envs, seed=seed, options={"max_episode_steps": limit})
    plain = [gym.make("CartPole-v1", max_episode_steps=limit) for _ in range(num_envs)]
    batch = game.reset()
    for i, env in enumerate(plain):
        obs, _ = env.reset(seed=seed + i)
        np.testing.assert_array_equal(batch.obs[i, 0], obs)
    rng = np.random.default_rng(0)
    returns, lengths = [0.0] * num_envs, [0] * num_envs
    episodes: list[tuple[int, float, int]] = []
    seen = {"terminated": 0, "truncated": 0}
    for _ in range(200):
        actions = rng.integers(0, 2, (num_envs, 1))
        batch = game.step(actions)
        for i, env in enumerate(plain):
            obs, reward, terminated, truncated, _ = env.step(int(actions[i, 0]))
            returns[i] += float(reward)
            lengths[i] += 1
            assert batch.reward[i, 0] == reward
            assert (batch.terminated[i], batch.truncated[i]) == (terminated, truncated)
            if terminated or truncated:
                seen["terminated" if terminated else "truncated"] += 1
                assert batch.final_obs is not None
                np.testing.assert_array_equal(batch.final_obs[i, 0], obs)
                episodes.append((i, returns[i], lengths[i]))
                returns[i], lengths[i] = 0.0, 0
                obs, _ = env.reset()
                assert not np.array_equal(batch.final_obs[i, 0], obs)
            np.testing.assert_array_equal(batch.obs[i, 0], obs)
        for env_index, ret, length in zip(batch.episodes.env, batch.episodes.ret,
                                          batch.episodes.length, strict=True):
            assert (int(env_index), float(ret), int(length)) in episodes
    assert seen["terminated"] > 3 and seen["truncated"] > 0
    assert len(episodes) == seen["terminated"] + seen["truncated"]


def test_halfcheetah_matches_plain_gymnasium() -> None:
    game = make_game("HalfCheetah-v5", 1, seed=7, options={"max_episode_steps": 30})
    plain = gym.make("HalfCheetah-v5", max_episode_steps=30)
    batch = game.reset()
    obs, _ = plain.reset(seed=7)
    np.testing.assert_array_equal(batch.obs[0, 0], obs.astype(np.float32))
    rng = np.random.default_rng(1)
    ret, finished = 0.0, []
    for _ in range(70):
        action = rng.uniform(-1, 1, (1, 1, 6)).astype(np.float32)
        batch = game.step(action)
        obs, reward, terminated, truncated, _ = plain.step(action[0, 0])
        ret += float(reward)
        assert batch.reward[0, 0] == np.float32(reward)
        if terminated or truncated:
            assert batch.final_obs is not None and batch.truncated[0]
            np.testing.assert_array_equal(batch.final_obs[0, 0], obs.astype(np.float32))
            finished.append(ret)
            ret = 0.0
            obs, _ = plain.reset()
            assert batch.episodes.ret.tolist() == [finished[-1]]  # raw float64 return, exact
            assert batch.episodes.length.tolist() == [30]
        np.testing.assert_array_equal(batch.obs[0, 0], obs.astype(np.float32))
    assert len(finished) == 2


def test_atari_matches_gymnasium_atari_preprocessing() -> None:
    """Freeway (no FIRE, no lives): same frames as AtariPreprocessing + FrameStackObservation."""
    import ale_py

    gym.register_envs(ale_py)
    game = make_game("atari/Freeway", 1, seed=5, options={"clip_rewards": False})
    ref = gym.make("ALE/Freeway-v5", frameskip=1, repeat_action_probability=0.0)
    ref = gym.wrappers.AtariPreprocessing(ref, noop_max=30, frame_skip=4, screen_size=84)
    ref = gym.wrappers.FrameStackObservation(ref, 4)
    batch = game.reset()
    obs, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(batch.obs[0, 0], obs)
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(250):
        action = int(rng.choice([0, 1, 1, 1, 1, 1, 2]))  # mostly UP, so the chicken scores
        batch = game.step(np.array([[action]]))
        obs, reward, terminated, truncated, _ = ref.step(action)
        np.testing.assert_array_equal(batch.obs[0, 0], obs)
        assert batch.reward[0, 0] == reward and not (terminated or truncated)
        total += float(reward)
    assert total > 0


def test_atari_clipped_rewards_raw_stats_and_episodic_life() -> None:
    """Learner rewards are signs, lives end learner episodes, stats report whole raw games."""
    seed, steps = 11, 1500
    clipped = make_game("atari/SpaceInvaders", 1, seed=seed)
    raw = make_game("atari/SpaceInvaders", 1, seed=seed, options={"clip_rewards": False})
    bc, br = clipped.reset(), raw.reset()
    rng = np.random.default_rng(0)
    game_reward, lives_lost, games = 0.0, 0, []
    for step in range(steps):
        action = rng.integers(0, 6, (1, 1))
        bc, br = clipped.step(action), raw.step(action)
        np.testing.assert_array_equal(bc.obs, br.obs)
        assert bc.reward[0, 0] == np.sign(br.reward[0, 0])
        game_reward += float(br.reward[0, 0])
        lives_lost += int(bc.terminated[0])
        assert len(bc.episodes.ret) == len(br.episodes.ret)
        if len(bc.episodes.ret):
            assert bc.episodes.ret[0] == br.episodes.ret[0] == game_reward
            games.append((lives_lost, float(bc.episodes.ret[0]), int(bc.episodes.length[0]),
                          step + 1))
            game_reward = 0.0
            if len(games) == 1:
                break
    assert games, "no game over within the step budget"
    lives, ret, length, step_count = games[0]
    assert lives == 3  # three lives, each one a learner episode
    assert length == step_count  # the game's length counts every agent step, across lives
    assert ret > lives  # raw score: invaders are worth 5 to 30 points


def test_atari_unknown_game_lists_close_names() -> None:
    with pytest.raises(GameError, match=r"unknown Atari game 'Pongg'.*atari/Pong"):
        make_game("atari/Pongg")
    assert resolve_game("atari/space_invaders") == "SpaceInvaders"
    assert resolve_game("atari/PongNoFrameskip-v4") == "Pong"


@pytest.mark.parametrize(("name", "key"), [("CartPole-v1", "max_episode_step"),
                                           ("HalfCheetah-v5", "rendr"),
                                           ("atari/Pong", "clip_reward")])
def test_option_typo_names_the_key(name: str, key: str) -> None:
    with pytest.raises(OptionError, match=rf"unknown key .*{key}\b.*did you mean"):
        make_game(name, options={key: True})


@pytest.mark.parametrize(("game", "kwargs", "message"), [
    ("Pendulum-v1", {"g": "abc"}, r"env_kwargs \{'g': 'abc'\} break the env \(TypeError"),
    ("CartPole-v1", {"max_episode_steps": 5},
     r"env_kwargs \['max_episode_steps'\] are gymnasium.make's own.*"
     "game.options.max_episode_steps"),
    ("CartPole-v1", {"render_mode": "human"},
     r"\['render_mode'\] are gymnasium.make's own, not the env's; the adapter sets them"),
])
def test_env_kwargs_that_break_or_bypass_the_env_are_refused(game: str, kwargs: dict[str, Any],
                                                              message: str) -> None:
    """Guards: ``g: abc`` was a TypeError traceback at the first training step;
    ``max_episode_steps`` went to gymnasium's time limit, which the adapter drops: ignored."""
    with pytest.raises(GameError, match=message):
        make_game(game, num_envs=2, seed=0, options={"env_kwargs": kwargs})
    make_game("Pendulum-v1", num_envs=2, seed=0, options={"env_kwargs": {"g": 9.0}}).close()


def test_atari_sizes_beyond_the_screen_and_other_observations_are_refused() -> None:
    """Guards: screen_size=4000 was an allocation traceback; a network trained on 4 stacked
    frames started on 2 blamed a change of selfplay's version, not frame_stack."""
    from games.registry import family_of

    with pytest.raises(OptionError, match="screen_size must be <= 512"):
        make_game("atari/Pong", options={"screen_size": 4000})
    assert family_of("atari/Pong").observation_difference(
        {"frame_stack": 4}, {"frame_stack": 2}) == ("frame_stack", 4, 2)


def test_atari_bad_option_value() -> None:
    with pytest.raises(OptionError, match="frame_skip must be >= 1"):
        make_game("atari/Pong", options={"frame_skip": 0})


def test_atari_mode_and_difficulty_the_rom_lacks_list_its_own() -> None:
    """The ALE's "Invalid game mode requested" named neither the value nor the choices."""
    with pytest.raises(GameError, match=r"^atari/Pong: game.options.mode 99 is not one of "
                                        r"\[0, 1\]$"):
        make_game("atari/Pong", options={"mode": 99})
    with pytest.raises(GameError, match=r"^atari/Pong: game.options.difficulty 9 is not one "
                                        r"of \[0, 1, 2, 3\]$"):
        make_game("atari/Pong", options={"difficulty": 9})
    game = make_game("atari/Pong", options={"mode": 1, "difficulty": 3})
    game.close()


# --------------------------------------------------------------------------- actions, seeds


def test_discrete_actions_out_of_range_are_rejected() -> None:
    game = make_game("CartPole-v1", 2, seed=0)
    game.reset()
    with pytest.raises(GameError, match=r"actions must be in \[0, 2\)"):
        game.step(np.array([[0], [2]]))
    with pytest.raises(GameError, match="actions must be"):
        game.step(np.zeros((3, 1), np.int64))


def test_box_actions_are_clipped_to_bounds() -> None:
    games = [make_game("Pendulum-v1", 1, seed=4) for _ in range(2)]
    for game in games:
        game.reset()
    for _ in range(5):
        a = games[0].step(np.full((1, 1, 1), 10.0, np.float32))
        b = games[1].step(np.full((1, 1, 1), 2.0, np.float32))
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.reward, b.reward)


def test_seeds_make_runs_reproducible() -> None:
    first = [make_game("CartPole-v1", 3, seed=s).reset().obs for s in (1, 1, 2)]
    np.testing.assert_array_equal(first[0], first[1])
    assert not np.array_equal(first[0], first[2])
    assert not np.array_equal(first[0][0], first[0][1])  # env i gets seed + i


# --------------------------------------------------------------------------- state


def _rollout(game: VecGame, steps: int, rng: np.random.Generator,
             mask: np.ndarray | None) -> list[Any]:
    out = []
    for _ in range(steps):
        batch = game.step(_random(game, rng, mask))
        out.append([batch.obs, batch.reward, batch.terminated, batch.truncated,
                    batch.final_obs, *batch.episodes])
        mask = batch.action_mask
    return out


@pytest.mark.parametrize(("name", "num_envs", "before", "after"), [
    ("CartPole-v1", 3, 30, 120),
    ("Pendulum-v1", 2, 150, 80),
    ("MountainCar-v0", 1, 150, 80),
    ("Ant-v5", 2, 40, 60),
    ("atari/Breakout", 2, 60, 200),
])
def test_state_round_trip_is_bit_exact(name: str, num_envs: int, before: int, after: int,
                                       tmp_path: Path) -> None:
    """get_state, checkpoint (weights_only load), set_state on a fresh game: same future."""
    game = make_game(name, num_envs, seed=21)
    batch = game.reset()
    rng = np.random.default_rng(0)
    _rollout(game, before, rng, batch.action_mask)
    state = game.get_state()  # type: ignore[attr-defined]
    path = save_checkpoint(tmp_path / "state.pt", {"game": state})
    rng_state = rng.bit_generator.state
    expected = _rollout(game, after, rng, batch.action_mask)
    assert any(step[2].any() or step[3].any() for step in expected), "no episode end covered"

    fresh = make_game(name, num_envs, seed=999)
    fresh.set_state(load_checkpoint(path)["game"])  # type: ignore[attr-defined]
    rng.bit_generator.state = rng_state
    got = _rollout(fresh, after, rng, batch.action_mask)
    for t, (want, have) in enumerate(zip(expected, got, strict=True)):
        for a, b in zip(want, have, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: step {t} after restore")


def test_set_state_rejects_another_game() -> None:
    state = make_game("CartPole-v1", 2, seed=0)
    state.reset()
    snapshot = state.get_state()  # type: ignore[attr-defined]
    with pytest.raises(GameError, match="state is for CartPole-v1 x2"):
        make_game("CartPole-v1", 3).set_state(snapshot)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- render


def test_atari_render_returns_rgb_frame() -> None:
    game = make_game("atari/Pong", 2, seed=0, options={"render": True})
    game.reset()
    frame = game.render(1)  # type: ignore[attr-defined]
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8 and frame.any()


def test_render_needs_the_option() -> None:
    game = make_game("CartPole-v1", 1, seed=0)
    game.reset()
    with pytest.raises(GameError, match="render: true"):
        game.render()  # type: ignore[attr-defined]


NO_GL = re.compile(r"OpenGL|\bE?GL\b|OSMesa|GLFW|[Dd]isplay")  # errors of a machine without GL


def test_mujoco_render_returns_rgb_frame() -> None:
    game = make_game("HalfCheetah-v5", 1, seed=0, options={"render": True})
    game.reset()
    try:
        frame = game.render()  # type: ignore[attr-defined]
    except Exception as exc:
        # only a machine without an OpenGL backend skips; any other error is a failure
        if not NO_GL.search(f"{type(exc).__name__}: {exc}"):
            raise
        pytest.skip(f"MuJoCo cannot render here (no OpenGL backend): {exc}")
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    game.close()


def test_mujoco_warnings_reach_stderr_not_a_log_file(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """HalfCheetah's model warns when it compiles; MuJoCo appended every warning to
    MUJOCO_LOG.TXT in the working folder (a training run's, the test suite's)."""
    import mujoco

    from games.gym import mujoco as adapter

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(adapter, "_WARNED", set())
    lines: list[str] = []
    monkeypatch.setattr(adapter, "print", lambda *a, **_: lines.append(" ".join(a)),
                        raising=False)
    game = make_game("HalfCheetah-v5", 2, seed=0)
    game.reset()
    game.close()
    assert mujoco.get_mju_user_warning() is not None
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert len(lines) == 1 and lines[0].startswith("warning: MuJoCo: compiler attribute "
                                                   "'settotalmass' is deprecated"), lines


def test_mujoco_warnings_of_one_kind_are_shown_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An instability warning names the time and the degree of freedom: one line per kind,
    not one per occurrence."""
    from games.gym import mujoco as adapter

    monkeypatch.setattr(adapter, "_WARNED", set())
    lines: list[str] = []
    monkeypatch.setattr(adapter, "print", lambda *a, **_: lines.append(" ".join(a)),
                        raising=False)
    for dof, time in ((0, "0.1200"), (3, "5.3400")):
        adapter._warn_once(f"Nan, Inf or huge value in QACC at DOF {dof}. The simulation is "
                           f"unstable. Time = {time}.")
    adapter._warn_once("another warning")
    assert lines == ["warning: MuJoCo: Nan, Inf or huge value in QACC at DOF 0. The simulation "
                     "is unstable. Time = 0.1200.", "warning: MuJoCo: another warning"]


def test_an_atari_game_ending_in_its_next_lifes_reset_is_reported() -> None:
    """The frame limit reached during the no-op and FIRE frames after a lost life ends the
    game: its episode is reported at that step (it began a new game silently, and the next
    reported episode held two games)."""
    def episodes(frame_limit: int) -> list[tuple[int, int]]:
        game = make_game("atari/Breakout", 1, seed=3,
                         options={"max_episode_steps": frame_limit})
        game.reset()
        rng = np.random.default_rng(1)
        out = []
        for t in range(60):
            batch = game.step(np.array([[int(rng.integers(4))]]))
            out += [(t, int(length)) for length in batch.episodes.length]
        game.close()
        return out

    # unlimited: the first life is lost at step 22 and its reset's frames end at frame 137
    assert episodes(10**6) == []
    assert episodes(132)[0] == (22, 23)  # the limit falls in that reset: the game ends there


def test_an_atari_rom_missing_from_ale_py_is_one_line_naming_it(tmp_path: Path) -> None:
    """Guards (review): a ROM missing from ale-py's install (a damaged install) was the bare
    "[Errno 2] No such file or directory: .../roms/pong.bin". ale-py is mirrored with links,
    its Pong ROM left out."""
    import ale_py

    source = Path(ale_py.__file__).parent
    shadow = tmp_path / "site" / "ale_py"
    (shadow / "roms").mkdir(parents=True)
    for item in source.iterdir():
        if item.name != "roms":
            (shadow / item.name).symlink_to(item)
    for rom in (source / "roms").iterdir():
        if rom.name != "pong.bin":
            (shadow / "roms" / rom.name).symlink_to(rom)
    libs = source.parent / "ale_py.libs"
    if libs.is_dir():
        (shadow.parent / "ale_py.libs").symlink_to(libs)
    proc = subprocess.run(
        [sys.executable, "-m", "selfplay.cli", "train", "--game", "atari/Pong", "--total-steps",
         "64", "--set", "game.num_envs=1", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(ROOT)])})
    assert proc.returncode == 2, proc.stderr[-1000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: atari/Pong: its ROM {shadow / 'roms' / 'pong.bin'} is missing from ale-py's "
        "install: pip install --force-reinstall ale-py")
    assert not (tmp_path / "run").exists()


def test_a_single_agent_game_has_no_opponent_and_says_what_scores_it() -> None:
    from games.registry import family_of

    for game in ("CartPole-v1", "atari/Pong"):
        with pytest.raises(GameError, match=re.escape(
                f"game {game!r} is single-agent: there is no opponent to play against "
                "(selfplay eval scores its checkpoints)")):
            family_of(game).match_setup(game, "builtin", 1, 0)


class _NeedsPackage(gym.Env[Any, Any]):
    """An env whose construction or drawing needs a package that is not installed, as
    gymnasium's MuJoCo envs (``mujoco``) and classic control's frames (``pygame``) say it."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, fail_at: str, render_mode: str | None = None) -> None:
        if fail_at == "make":
            raise gym.error.DependencyNotInstalled('mujoco is not installed, run `pip install '
                                                   '"gymnasium[mujoco]"`')
        self.render_mode = render_mode

    def render(self) -> None:
        raise gym.error.DependencyNotInstalled('pygame is not installed, run `pip install '
                                               '"gymnasium[classic-control]"`')


@pytest.mark.parametrize("fail_at", ["make", "render"])
def test_a_package_the_env_needs_is_a_game_error_naming_it(fail_at: str) -> None:
    """Guards: gymnasium's ``DependencyNotInstalled`` reached the CLI as gymnasium's own
    exception, which selfplay's commands knew only by looking it up in ``sys.modules``."""
    from games.gym.adapter import make_registered
    from games.gym.classic import ClassicCodec

    env_id = f"SelfplayNeedsPackage{fail_at.title()}-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_NeedsPackage, kwargs={"fail_at": fail_at},
                     max_episode_steps=10)
    package = "mujoco" if fail_at == "make" else "pygame"
    with pytest.raises(GameError, match=rf"^{env_id}: {package} is not installed, run `pip"):
        game = make_registered(env_id, 1, 0, max_episode_steps=None, render=True,
                               env_kwargs={}, codec=ClassicCodec())
        game.render(0)
