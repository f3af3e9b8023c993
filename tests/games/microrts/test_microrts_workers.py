"""microRTS envs split over worker processes: same games as one process, errors, shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from games.core import GameError, Outcome
from games.microrts import make
from games.microrts.adapter import random_legal_actions
from games.microrts.workers import MicroRTSWorkers, split_ranges

OPTIONS = {"map": "basesWorkers8x8", "num_selfplay_envs": 2,
           "bots": ["WorkerRush", "LightRush", "Passive"], "max_steps": 120}


def test_split_ranges_cover_every_env_once() -> None:
    assert split_ranges(7, 3) == [(0, 2), (2, 5), (5, 7)]
    assert split_ranges(2, 5) == [(0, 1), (1, 2)]
    for n, w in [(24, 4), (5, 2), (1, 1), (9, 9)]:
        ranges = split_ranges(n, w)
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a < b for a, b in ranges)
        assert all(r[1] == s[0] for r, s in zip(ranges, ranges[1:], strict=False))


def test_workers_play_the_same_games_as_one_process(engine_home) -> None:
    """Same options, same actions: 3 worker processes reproduce the single-process adapter
    step for step (observations, masks, rewards, ends, episode statistics)."""
    single = make("microrts", num_envs=7, seed=0, **OPTIONS)
    split = make("microrts", num_envs=7, seed=0, workers=3, **OPTIONS)
    try:
        assert isinstance(split, MicroRTSWorkers)
        assert split.spec == single.spec
        np.testing.assert_array_equal(split.players, single.players)
        assert split.opponent_names == single.opponent_names
        a, b = single.reset(), split.reset()
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.action_mask, b.action_mask)
        rng = np.random.default_rng(3)
        episodes = 0
        for _ in range(300):
            actions = random_legal_actions(a.action_mask, rng)
            a, b = single.step(actions), split.step(actions)
            for field in ("obs", "action_mask", "state", "reward", "terminated", "truncated",
                          "alive"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field), field)
            for field in a.episodes._fields:
                np.testing.assert_array_equal(getattr(a.episodes, field),
                                              getattr(b.episodes, field), field)
            done = a.terminated | a.truncated
            if done.any():
                np.testing.assert_array_equal(a.final_obs[done], b.final_obs[done])
                np.testing.assert_array_equal(single.episode_reward_components(),
                                              split.episode_reward_components())
            episodes += len(a.episodes.env)
        assert episodes >= 7  # every env finished at least one game (max_steps 120)
        assert Outcome.LOSS in a.episodes.outcome or episodes
        np.testing.assert_array_equal(single.render(5), split.render(5))
        for e in (0, 5):
            np.testing.assert_array_equal(single.render_final(e), split.render_final(e))
        assert [m.name for m in split.env_map] == [m.name for m in single.env_map]
    finally:
        single.close()
        split.close()


def test_batches_come_through_shared_memory(engine_home) -> None:
    """The workers write their arrays into shared memory whose path is already gone (nothing
    is left behind, even after a SIGKILL); a batch stays valid until the step after next, like
    the in-process adapter's; bad actions are refused before they reach a worker."""
    game = make("microrts", num_envs=4, seed=0, workers=2, **OPTIONS)
    try:
        assert not game.transport._arrays.path.exists()
        rng = np.random.default_rng(1)
        first = game.step(random_legal_actions(game.reset().action_mask, rng))
        kept = first.obs.copy(), first.action_mask.copy()
        second = game.step(random_legal_actions(first.action_mask, rng))
        np.testing.assert_array_equal(first.obs, kept[0])
        np.testing.assert_array_equal(first.action_mask, kept[1])
        assert not np.shares_memory(first.obs, second.obs)
        part = game.parts[1]
        game.step_part_async(1, random_legal_actions(second.action_mask[part[0]:part[1]], rng))
        game.step_part_wait(1)
        game.step_part_async(0, random_legal_actions(second.action_mask[:part[0]], rng))
        game.step_part_wait(0)
        actions = random_legal_actions(second.action_mask, rng)
        with pytest.raises(GameError, match="actions must be integers of shape"):
            game.step(actions.astype(np.float32))
        with pytest.raises(GameError, match="actions must be integers of shape"):
            game.step(actions[:3])
        with pytest.raises(GameError, match="actions must be integers of shape"):
            game.step_part_async(0, actions)
    finally:
        game.close()


def test_a_dead_worker_is_a_game_error_and_close_ends_the_others(engine_home) -> None:
    game = make("microrts", num_envs=4, seed=0, workers=2, **OPTIONS)
    try:
        batch = game.reset()
        os.kill(game.transport._procs[1].pid, signal.SIGKILL)
        game.transport._procs[1].join(10)
        with pytest.raises(GameError, match="worker process of envs 2..3 died"):
            game.step(random_legal_actions(batch.action_mask, np.random.default_rng(0)))
    finally:
        game.close()
    assert not any(p.is_alive() for p in game.transport._procs)
    with pytest.raises(GameError, match="closed"):
        game.reset()


def test_an_out_of_range_action_in_a_worker_names_its_env(engine_home) -> None:
    """An action component out of its range is refused before any worker steps, naming the
    env in the whole layout (env 3 is worker 1's second): the envs stay in step (worker 0's
    had stepped, a cycle ahead of worker 1's, their batch lost)."""
    game = make("microrts", num_envs=4, seed=0, workers=2, **{**OPTIONS, "max_steps": 3})
    try:
        batch = game.reset()
        actions = np.zeros((4, 2, 64, 7), np.int64)
        cell = int(np.flatnonzero(batch.action_mask[3, 0, :, 4])[0])
        actions[3, 0, cell, [0, 5]] = (4, 99)  # produce unit type 99 (there are 7)
        with pytest.raises(GameError, match=f"action component unit_type = 99 \\(env 3, seat 0, "
                                            f"cell {cell}\\) is out of range 0..6"):
            game.step(actions)
        idle = np.zeros_like(actions)
        ends = [game.step(idle).truncated.tolist() for _ in range(3)]
        assert ends == [[False] * 4, [False] * 4, [True] * 4]  # every env: 3 cycles
    finally:
        game.close()


def test_java_exception_in_a_worker_is_a_game_error(engine_home, tmp_path, monkeypatch) -> None:
    """An out-of-range unit type makes the engine throw inside a worker's gameStep: the
    GameError carries the Java class and message, and a reset recovers every worker. (The
    adapter refuses such actions itself: the check is widened here and in the workers, which
    start with a sitecustomize module, to reach the engine's fault path.)"""
    (tmp_path / "sitecustomize.py").write_text(
        "import numpy as np\nimport games.microrts.conversions as c\n"
        "c._NVEC = np.full(7, 1000, np.int64)\n")
    monkeypatch.setattr("games.microrts.conversions._NVEC", np.full(7, 1000, np.int64))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), str(Path(__file__).resolve().parents[3]),
         os.environ.get("PYTHONPATH", "")]))
    game = make("microrts", num_envs=4, seed=0, workers=2, **OPTIONS)
    try:
        batch = game.reset()
        actions = np.zeros((4, 2, 64, 7), np.int64)
        cell = int(np.flatnonzero(batch.action_mask[3, 0, :, 4])[0])  # env 3: worker 1's
        actions[3, 0, cell, [0, 5]] = (4, 99)  # produce unit type 99 (there are 7)
        with pytest.raises(GameError, match=r"IndexOutOfBoundsException: Index 99 out of bounds"):
            game.step(actions)
        batch = game.reset()
        rng = np.random.default_rng(0)
        for _ in range(3):
            batch = game.step(random_legal_actions(batch.action_mask, rng))
        assert all(p.is_alive() for p in game.transport._procs)
        assert batch.obs[:, 0, 14:21].sum() > 0
    finally:
        game.close()


def test_workers_leave_ctrl_c_and_sigterm_to_the_trainer(engine_home, tmp_path,
                                                        monkeypatch) -> None:
    """A signal to the whole process group (Ctrl-C, a scheduler's SIGTERM) must not kill the
    workers: the trainer finishes its update on them, saves, then closes them."""
    monkeypatch.chdir(tmp_path)  # a JVM that crashes on the signal writes hs_err files here
    game = make("microrts", num_envs=4, seed=0, workers=2, **OPTIONS)
    try:
        batch = game.reset()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            for proc in game.transport._procs:
                os.kill(proc.pid, sig)
        rng = np.random.default_rng(0)
        for _ in range(5):
            batch = game.step(random_legal_actions(batch.action_mask, rng))
        assert all(p.is_alive() for p in game.transport._procs)
    finally:
        game.close()
    assert not list(tmp_path.glob("hs_err_pid*.log"))


def test_bad_worker_options_fail_before_spawning(engine_home) -> None:
    with pytest.raises(GameError, match="num_selfplay_envs=9 exceeds"):
        make("microrts", num_envs=4, workers=2, **{**OPTIONS, "num_selfplay_envs": 9})
    with pytest.raises(ValueError, match="workers must be >= 1"):
        make("microrts", num_envs=4, workers=0, **OPTIONS)


def test_set_bot_reaches_the_worker_owning_the_env(engine_home) -> None:
    """``set_bot`` through the workers plays the same games as one process's, from each env's
    next game on; ``opponent_names`` and ``ended_opponent_names`` (what a finished game is
    credited to) follow the games as in one process. Refused while the worker steps
    unattended (its pipe then carries a step's answer)."""
    options = {"map": "basesWorkers8x8", "num_selfplay_envs": 1, "bots": ["Passive"],
               "max_steps": 30}
    single = make("microrts", num_envs=4, seed=0, **options)
    split = make("microrts", num_envs=4, seed=0, workers=2, **options)
    try:
        assert isinstance(split, MicroRTSWorkers)
        a, b = single.reset(), split.reset()
        for game in (single, split):
            assert game.set_bot(3, "workerrush") == "WorkerRush"
            assert game.set_bot(1, "LightRush") == "LightRush"
        layout = ["selfplay", "Passive", "Passive", "Passive"]
        assert split.opponent_names == single.opponent_names == layout
        rng = np.random.default_rng(0)
        for t in range(1, 61):
            actions = random_legal_actions(a.action_mask, rng)
            a, b = single.step(actions), split.step(actions)
            np.testing.assert_array_equal(a.obs, b.obs)  # the same bots play
            assert split.opponent_names == single.opponent_names, t
            assert split.ended_opponent_names == single.ended_opponent_names, t
            if t == 30:  # every game ended: the new bots took over, the old ones credited
                assert single.opponent_names == ["selfplay", "LightRush", "Passive",
                                                 "WorkerRush"]
                assert single.ended_opponent_names == layout
        assert single.ended_opponent_names == single.opponent_names  # the second games
        split.step_part_async(0, random_legal_actions(b.action_mask[:2], rng))
        with pytest.raises(GameError, match="while its worker steps"):
            split.set_bot(1, "Passive")
        split.step_part_wait(0)
        with pytest.raises(GameError, match="self-play"):
            split.set_bot(0, "Passive")
    finally:
        single.close()
        split.close()


def test_a_java_home_passed_over_is_named_once_not_by_every_worker(tmp_path: Path) -> None:
    """Guards (review of the warning's first version): with workers the main process never
    looked for Java, so each worker process found JAVA_HOME unusable and said so."""
    code = ("from games.registry import make_game\n"
            "g = make_game('microrts', num_envs=4, seed=0, options={'workers': 2, "
            "'map': 'basesWorkers8x8', 'num_selfplay_envs': 4})\n"
            "g.reset(); g.close()\n")
    env = {k: v for k, v in os.environ.items() if k != "SELFPLAY_JAVA_HOME_WARNED"}
    env["JAVA_HOME"] = str(tmp_path)  # no Java in it
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"warning: JAVA_HOME={tmp_path} is not a usable Java") == 1
