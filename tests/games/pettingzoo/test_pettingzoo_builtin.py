"""Envs against the console's own single-player opponent (``builtin_opponent_share``), on the
real ROMs: layout, seat 1 never alive, rewards from the console's scoring, statistics, state,
errors, and the league leaving those envs alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from games.core import GameError, Outcome
from games.options import OptionError
from games.pettingzoo import PettingZooAtari, builtin_opponent_games, make
from selfplay.config_files import build_config
from selfplay.league_training import attach
from selfplay.opponent_stats import OpponentWinRates
from selfplay.ppo import Trainer
from selfplay.tracking import MetricSink, RunDir

# pong.bin RAM: the console's score and the player's (ALE's Pong reward is their difference)
PONG_CPU_SCORE, PONG_PLAYER_SCORE = 13, 14


def _random(game: PettingZooAtari, rng: np.random.Generator) -> np.ndarray:
    spec = game.spec
    return rng.integers(0, spec.action_space.n, (spec.num_envs, spec.num_seats))  # type: ignore[union-attr]


def test_the_games_with_a_builtin_opponent() -> None:
    assert builtin_opponent_games() == [
        "boxing_v2", "double_dunk_v3", "ice_hockey_v2", "othello_v3", "pong_v3",
        "surround_v2", "tennis_v3", "video_checkers_v4"]


@pytest.mark.parametrize("name", builtin_opponent_games())
def test_builtin_envs_layout_and_the_console_scores(name: str) -> None:
    """The last envs play the console: same obs layout, seat 1 never alive and without
    reward; within 2000 steps of random play the console scores against seat 0 (a negative
    reward), which the single-player modes without an opponent never do."""
    game = make(f"pettingzoo/{name}", num_envs=2, seed=0, builtin_opponent_share=0.5,
                clip_rewards=False)
    assert game.opponent_names == ["selfplay", "builtin"] and game.num_builtin_envs == 1
    assert game.players.tolist() == [[0, 1], [0, -1]]
    batch = game.reset()
    rng = np.random.default_rng(0)
    for _ in range(2000):
        assert batch.obs.shape == (2, 2, 6, 84, 84)
        assert batch.alive[1].tolist() == [True, False]
        assert (batch.obs[1, 0, 4] == 255).all() and (batch.obs[1, 0, 5] == 0).all()
        batch = game.step(_random(game, rng))
        assert batch.reward[1, 1] == 0 and 1 not in batch.episodes.env[batch.episodes.seat == 1]
        if batch.reward[1, 0] < 0:
            break
    else:
        pytest.fail(f"the console never scored in {name}")
    game.close()


def test_builtin_envs_report_seat_0_episodes_only() -> None:
    game = make("pettingzoo/pong_v3", num_envs=3, seed=0, builtin_opponent_share=0.5,
                max_cycles=40)  # 10 steps; 0.5 * 3 rounds down to 1 builtin env
    assert game.opponent_names == ["selfplay", "selfplay", "builtin"]
    game.reset()
    rng = np.random.default_rng(0)
    for _ in range(10):
        batch = game.step(_random(game, rng))
    assert batch.truncated.all()
    assert batch.episodes.env.tolist() == [0, 0, 1, 1, 2]
    assert batch.episodes.seat.tolist() == [0, 1, 0, 1, 0]
    assert (batch.episodes.length == 10).all()
    assert (batch.episodes.outcome == Outcome.NONE).all()  # truncated: no winner
    assert batch.alive.tolist() == [[True, True], [True, True], [True, False]]
    game.close()


def test_pong_rewards_come_from_the_console_scoring() -> None:
    """Seat 0's raw reward is its score's rise minus the console's (read from the RAM); the
    game ends when the console reaches 21; the episode and its outcome go to seat 0 only and
    reach the per-opponent win rate as ``builtin``."""
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0, builtin_opponent_share=1.0,
                clip_rewards=False)
    assert game.opponent_names == ["builtin", "builtin"]
    win_rates = OpponentWinRates(game.opponent_names)
    batch = game.reset()
    rng = np.random.default_rng(0)

    def scores() -> np.ndarray:  # [E, 2] (console, player)
        rams = [ale.getRAM() for ale in game._em.ales]
        return np.array([[r[PONG_CPU_SCORE], r[PONG_PLAYER_SCORE]] for r in rams], np.int64)

    before, returns, steps = scores(), np.zeros(2), 0
    while not batch.terminated.any():
        assert steps < 5000, "pong against the console should end within 5000 steps"
        batch = game.step(_random(game, rng))
        steps += 1
        if batch.terminated.any():
            break
        now = scores()
        np.testing.assert_array_equal(batch.reward[:, 0], (now - before) @ [-1, 1])
        assert (batch.reward[:, 1] == 0).all() and not batch.alive[:, 1].any()
        returns += batch.reward[:, 0]
        before = now
    ended = np.flatnonzero(batch.terminated)
    returns[ended] += batch.reward[ended, 0]
    episodes = batch.episodes
    assert episodes.env.tolist() == ended.tolist() and (episodes.seat == 0).all()
    np.testing.assert_array_equal(episodes.ret, returns[ended])
    assert (episodes.ret <= -1).all() and (episodes.ret >= -21).all()  # the console got 21
    assert (episodes.outcome == Outcome.LOSS).all() and (episodes.length == steps).all()
    win_rates.add(episodes)
    assert win_rates.metrics() == {"win_rate/builtin": 0.0}
    game.close()


def test_state_round_trip_with_builtin_envs() -> None:
    options = {"builtin_opponent_share": 0.5, "max_cycles": 200}
    game = make("pettingzoo/pong_v3", num_envs=2, seed=0, **options)
    game.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        game.step(_random(game, rng))
    state = game.get_state()
    actions = [_random(game, rng) for _ in range(40)]
    first = [game.step(a) for a in actions]
    other = make("pettingzoo/pong_v3", num_envs=2, seed=5, **options)
    other.set_state(state)
    for a, b in zip(first, [other.step(a) for a in actions], strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.reward, b.reward)
        np.testing.assert_array_equal(a.alive, b.alive)
        np.testing.assert_array_equal(a.episodes.env, b.episodes.env)
    with pytest.raises(GameError, match="1 envs against the built-in opponent, this game 0"):
        make("pettingzoo/pong_v3", num_envs=2, max_cycles=200).set_state(state)
    game.close()
    other.close()


def test_bad_requests_are_errors() -> None:
    with pytest.raises(GameError, match="combat_plane_v2 has no built-in single-player "
                       "opponent; set builtin_opponent_share: 0, or train one of "
                       "pettingzoo/boxing_v2"):
        make("pettingzoo/combat_plane_v2", num_envs=1, builtin_opponent_share=0.25)
    with pytest.raises(GameError, match="only the default variant"):
        make("pettingzoo/pong_v3", builtin_opponent_share=1.0,
             game_kwargs={"game_version": "hockey"})
    with pytest.raises(OptionError, match=r"builtin_opponent_share must be in \[0, 1\]"):
        make("pettingzoo/pong_v3", builtin_opponent_share=1.5)


def test_league_leaves_the_builtin_envs_alone(tmp_path: Path) -> None:
    """With the default pong config (league, a quarter of the envs against the console),
    snapshots are taken and rated, and seat 1 of the builtin env is never given a
    snapshot while the self-play envs are."""
    config = build_config("pettingzoo/pong_v3", overrides=[
        "game.num_envs=4", "game.options.max_cycles=200", "ppo.num_steps=16",
        "ppo.num_minibatches=2", "ppo.update_epochs=1", "log.progress=false",
        "log.tensorboard=false", "league.snapshot_every=1", "league.eval_every=2",
        "league.eval_games=1", "league.eval_pool=1", "league.eval_envs=2",
        "league.eval_process=false",  # rated between updates: logged at updates 2 and 4
        "league.self_play=0.0"], total_steps=4 * 16 * 4)
    game = make(config.game.name, config.game.num_envs, config.seed, **config.game.options)
    assert game.opponent_names == ["selfplay", "selfplay", "selfplay", "builtin"]
    trainer = Trainer(config, game)
    hook = attach(trainer, tmp_path)
    assert hook is not None and hook.contested.tolist() == [True, True, True, False]
    owners: list[np.ndarray] = []  # seat 1's owner per env after each update

    def record() -> dict[str, float]:
        owners.append(trainer.owner[:, 1].copy())
        return {}

    trainer.add_update_hook(record)
    run = RunDir(tmp_path)
    sink = MetricSink(run, config)
    hook.log_ratings_to(sink)
    trainer.train(sink)
    sink.close()
    hook.close()
    game.close()
    assert all(o[3] == 0 for o in owners), owners
    assert any((o[:3] > 0).any() for o in owners), "no self-play env played a snapshot"
    assert len(list((tmp_path / "snapshots").glob("*.pt"))) == 4
    records = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    ratings = [r for r in records if "snapshot" in r]
    assert len(records) - len(ratings) == 4 and [r["step"] for r in ratings] == [128, 256]
    assert all({"league/mu", "league/elo"} <= set(r) for r in ratings)


def test_a_share_that_rounds_to_no_console_env_is_named(capsys) -> None:
    """Guards (review): num_envs lowered below 4 with the default share 0.25 trained without a
    single game against the console, and without a word."""
    from games.registry import family_named

    family = family_named("pettingzoo")
    assert family.check_run("pettingzoo/pong_v3", {"builtin_opponent_share": 0.25}, 2) == [
        "game.options.builtin_opponent_share 0.25 of 2 env(s) is no env: no game is "
        "played against the console (nor win_rate/builtin logged); use at least 4 envs (per "
        "rank of a data-parallel run) or set it to 0"]
    assert family.check_run("pettingzoo/pong_v3", {"builtin_opponent_share": 0.25}, 4) == []
    assert family.check_run("pettingzoo/pong_v3", {"builtin_opponent_share": 0.0}, 2) == []
    assert capsys.readouterr().err == ""


def test_a_runs_warnings_come_once_it_starts_not_before_its_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards (review): a run refused for a bad ROM folder (or an --init-from that does not
    fit) printed the share warning first, a misleading line above the error."""
    from selfplay.train import run_training

    overrides = ["game.num_envs=2", "ppo.num_steps=8", "total_steps=16",
                 "log.progress=false", "league.enabled=false"]
    bad = build_config("pettingzoo/pong_v3", overrides=[
        *overrides, f"game.options.rom_dir={tmp_path / 'nowhere'}"])
    with pytest.raises(GameError, match="rom_dir"):
        run_training(bad, run_dir=tmp_path / "bad")
    assert "warning" not in capsys.readouterr().err
    good = build_config("pettingzoo/pong_v3", overrides=overrides)
    run_training(good, run_dir=tmp_path / "good")
    assert capsys.readouterr().err.count("warning: game.options.builtin_opponent_share") == 1


def test_the_console_player_is_refused_by_tournaments_before_anything_is_written(
        tmp_path: Path) -> None:
    """Guards (review): `league tournament --players builtin <run>` loaded the checkpoints,
    made an empty database, then said the console player cannot play matches."""
    from league.db import LeagueError
    from selfplay.league_commands import tournament

    with pytest.raises(LeagueError, match=r"^builtin play\(s\) inside the pettingzoo/pong_v3 "
                                          r"engine, not through a seat: .*play --vs builtin"):
        tournament("pettingzoo/pong_v3", ["builtin", str(tmp_path / "missing.pt")],
                   str(tmp_path / "t.db"), 2, None, None, 2, 0, quiet=True)
    assert not (tmp_path / "t.db").exists()
