"""Training inside a league: snapshots enter the pool, opponents come from it, ratings rise."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from games.core import Outcome
from games.registry import make_game
from league.db import LeagueDB
from selfplay.checkpoint import load_checkpoint
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config
from selfplay.league_bot_envs import ENGINE_BOT, LEARNER
from selfplay.league_rating import bot_results
from selfplay.league_training import LeagueHook, attach
from selfplay.ppo import Trainer
from selfplay.train import run_training


def train_in_league(tmp_path: Path, overrides: list[str], seed: int, total_steps: int,
                    per_update: Callable[[Trainer], Any]) -> tuple[LeagueHook, list[Any]]:
    """Train tic-tac-toe in a league in ``tmp_path``; the hook (closed) and ``per_update`` of
    the trainer after every update."""
    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", *overrides], seed=seed,
        total_steps=total_steps)
    trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed))
    hook = attach(trainer, tmp_path)
    assert hook is not None
    seen: list[Any] = []
    trainer.add_update_hook(lambda: seen.append(per_update(trainer)) or {})
    trainer.train()
    hook.finish()  # the rater process's last tournaments
    hook.close()
    return hook, seen


def test_tictactoe_league_mechanics(tmp_path: Path) -> None:
    """test_tictactoe_league_training's run over 8 updates (rated between updates): snapshots
    join the league with their files, the anchors are players, envs play past snapshots, the
    stored ratings replay (the mechanics, not the rise in rating)."""
    _, seen_opponents = train_in_league(
        tmp_path, ["league.snapshot_every=2", "league.eval_every=2", "league.eval_games=2",
                   "league.self_play=0.3", "league.eval_process=false"],
        seed=4, total_steps=32 * 32 * 8, per_update=lambda t: (t.owner[:, 1] > 0).sum())
    with LeagueDB(tmp_path / "league.db") as db:
        snapshots = [p for p in db.players() if p.kind == "snapshot"]
        assert len(snapshots) == 4
        assert all(Path(str(p.path)).is_file() for p in snapshots)
        assert {"random", "win_or_block"} <= {p.name for p in db.players() if p.kind == "bot"}
        assert max(seen_opponents) > 0, "no env ever played a past snapshot"
        assert db.match_count() > 0
        assert db.replay_ratings() == db.ratings()


@pytest.mark.slow  # a learning run (`make bench`): 15 s on the 2-core machine
def test_tictactoe_league_training(tmp_path: Path) -> None:
    # 64 updates: after 32 the learner was about as strong as the random bot (anchored at
    # 25), so "beats random" passed or failed with the rating games' draws (seeds 1-5 pass
    # by 1.6-7 points at 64)
    _, seen_opponents = train_in_league(
        tmp_path, ["league.snapshot_every=8", "league.eval_every=8", "league.eval_games=8",
                   "league.self_play=0.3"], seed=4, total_steps=32 * 32 * 64,
        per_update=lambda t: (t.owner[:, 1] > 0).sum())
    db = LeagueDB(tmp_path / "league.db")
    snapshots = [p for p in db.players() if p.kind == "snapshot"]
    assert len(snapshots) == 8
    assert all(Path(str(p.path)).is_file() for p in snapshots)
    assert {"random", "win_or_block"} <= {p.name for p in db.players() if p.kind == "bot"}
    assert max(seen_opponents) > 0, "no env ever played a past snapshot"
    first, last = db.rating(snapshots[0].name), db.rating(snapshots[-1].name)
    assert last.mu > first.mu, (first, last)
    assert db.rating(snapshots[-1].name).mu > db.rating("random").mu
    assert db.replay_ratings() == db.ratings()
    db.close()


def test_rater_process_plays_the_same_tournaments_and_leaves_training_alone(
        tmp_path: Path) -> None:
    """Rating in a rater process (league.eval_process) versus between updates, same seed:
    training is bit for bit the same (rating games draw on no generator of training's), the
    same rating tournaments are scheduled (same matches, sides and seeds, each stored once),
    and the rater's results reach the metrics, tagged with the snapshot's update."""
    import json

    runs = {}
    for rater in (False, True):
        config = build_config("tictactoe", overrides=[
            "log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
            "league.eval_every=2", "league.eval_games=4", "league.eval_pool=2",
            "league.anchors=[random, win_or_block]", f"league.eval_process={rater}",
            "game.num_envs=8", "ppo.num_steps=16"], seed=6, total_steps=8 * 16 * 10)
        run_dir = tmp_path / f"rater_{rater}" / "run"
        summary = run_training(config, run_dir=run_dir)
        checkpoint = load_checkpoint(sorted((run_dir / "checkpoints").glob("*.pt"))[-1])
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
        with LeagueDB(run_dir / "league.db") as db:
            matches = {m.key: (db.player(m.player_a).name, db.player(m.player_b).name,
                               m.side_a, m.seed) for m in db.matches()}
            assert db.replay_ratings() == db.ratings()
            names = [p.name for p in db.players() if p.kind == "snapshot"]
        runs[rater] = (checkpoint, rows, matches, summary, names)
    (inline_ckpt, inline_rows, inline_matches, _, names), (ckpt, rows, matches, summary, _) = \
        runs[False], runs[True]
    for key, value in inline_ckpt["agent"].items():
        assert torch.equal(value, ckpt["agent"][key]), key
    updates, inline_updates = ([r for r in x if "snapshot" not in r] for x in (rows, inline_rows))
    assert [r["loss/policy_loss"] for r in updates] == [
        r["loss/policy_loss"] for r in inline_updates]
    assert len(names) == 5 and matches == inline_matches
    assert len(matches) == sum(4 * (min(2, i) + 2) for i in range(5))
    assert not any("league/mu" in row for row in updates + inline_updates)

    def ratings(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        """Each rating record: at its snapshot's step, the anchors' results with it."""
        return [(r["step"], r["snapshot"], r["league/rated_update"], r["league/mu"],
                 r["eval/win_rate/random"], r["eval/win_rate/win_or_block"])
                for r in rows if "snapshot" in r]

    # every snapshot's rating logged once, at its own step, in the rater's run too (those
    # finished after the last update included), equal to the ratings played between updates
    assert ratings(rows) == ratings(inline_rows)
    assert [(step, name, update) for step, name, update, *_ in ratings(rows)] == [
        (u * 8 * 16, f"run@{u:07d}", float(u)) for u in (2, 4, 6, 8, 10)]
    assert summary["league/mu"] == ratings(rows)[-1][3]


def test_scripted_bots_in_the_training_mix(tmp_path: Path) -> None:
    """league.bots with league.bot_share: envs are handed scripted opponents, picked by PFSP
    from the learner's results against them."""
    hook, shares = train_in_league(
        tmp_path, ["league.snapshot_every=100", "league.eval_every=100", "league.self_play=0.4",
                   "league.bots=[random, win_or_block]", "league.bot_share=0.6",
                   "league.weighting=variance"], seed=5, total_steps=32 * 32 * 6,
        per_update=lambda t: (t.owner[:, 1] > 0).mean())
    config = hook.trainer.config
    assert 0.4 < float(np.mean(shares)) < 0.8  # about bot_share of the envs face a bot
    payoff = hook.matchmaker.payoff
    ids = list(hook.bots)
    slots = sorted(slot for slot, _ in hook.bots.values())
    assert slots == [config.league.max_active_opponents + 1, config.league.max_active_opponents + 2]
    assert not set(hook.slots.values()) & set(slots)  # snapshots never take a bot's slot
    # a checkpoint holds each bot's generator: a restored league draws the same moves
    saved = hook.state_dict()
    ahead = [policy.rng.random() for _, policy in hook.bots.values()]
    hook._load_state(saved)
    assert [policy.rng.random() for _, policy in hook.bots.values()] == ahead
    games = [payoff.games[payoff.index[-1], payoff.index[pid]] for pid in ids]  # -1: learner
    assert all(g > 10 for g in games), games  # the learner's results against both bots
    with pytest.raises(ConfigError, match="league.bot_share > 0 needs league.bots"):
        build_config("tictactoe", overrides=["league.bot_share=0.3"])


def test_shared_database_with_another_network(tmp_path: Path, capsys) -> None:
    """Two runs share one league database; the second has another network. It trains
    without loading the first run's snapshots (reported once), and does not flag them."""
    shared = tmp_path / "shared.db"
    common = ["league.snapshot_every=4", "league.eval_every=4", "league.eval_games=4",
              "league.self_play=0.2", f"league.db={shared}"]
    train_in_league(tmp_path / "a", [*common, "network.hidden=[32]"], seed=1,
                    total_steps=32 * 32 * 8, per_update=lambda t: None)
    with LeagueDB(shared) as db:
        first_run = {p.id for p in db.players() if p.kind == "snapshot"}
    assert len(first_run) == 2
    capsys.readouterr()
    hook, _ = train_in_league(tmp_path / "b", [*common, "network.hidden=[16, 16]"], seed=2,
                              total_steps=32 * 32 * 12, per_update=lambda t: None)
    err = capsys.readouterr().err
    assert hook.fit.incompatible == first_run  # tried (as opponents or in rating games), left out
    assert err.count("does not fit this run's network") == len(first_run)  # once each
    with LeagueDB(shared) as db:
        assert all(p.broken is None for p in db.players())
        ours = [p for p in db.players() if p.kind == "snapshot" and p.id not in first_run]
        assert len(ours) == 3 and all(db.rating(p.name).sigma < 25 / 3 for p in ours)


def test_unreadable_snapshot_rejoins_when_its_file_is_back(tmp_path: Path, capsys) -> None:
    """A snapshot whose file cannot be read is dropped from the pool and flagged; once the
    file is back it loads again, loses the flag and rejoins the pool."""
    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
        "league.eval_every=100"], seed=3, total_steps=32 * 32 * 4)
    trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed))
    hook = attach(trainer, tmp_path)
    assert hook is not None
    try:
        trainer.train()
        first = next(p for p in hook.db.players() if p.kind == "snapshot")
        row = hook.matchmaker.payoff.index[first.id]
        path = Path(str(first.path))
        away = path.with_suffix(".away")
        path.rename(away)
        assert not hook._load_into(first.id, 1)
        assert hook.db.player(first.id).broken is not None and not hook.matchmaker.active[row]
        hook.sync_pool()  # still missing: still out, no second load attempt
        assert first.id in hook.dropped and not hook.matchmaker.active[row]
        away.rename(path)
        hook.sync_pool()
        assert first.id not in hook.dropped and hook.matchmaker.active[row]
        assert hook.db.player(first.id).broken is None
        assert hook._load_into(first.id, 1)
        assert capsys.readouterr().err.count(f"skipping player {first.name!r}") == 1
    finally:
        hook.close()
        trainer.game.close()


def test_unknown_anchor_is_an_error(tmp_path: Path) -> None:
    config = build_config("tictactoe", overrides=["league.anchors=[nobody]"])
    trainer = Trainer(config, make_game("tictactoe", 2, 0))
    with pytest.raises(ConfigError, match="league.anchors: unknown tictactoe bot 'nobody'"):
        attach(trainer, tmp_path)


def test_an_unknown_training_bot_is_refused_before_the_anchors_play(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards: ``league.bots=[nosuchbot]`` placed the anchors first (games played, a line
    of ratings) and warned that the bots are not played before refusing the name."""
    config = build_config("tictactoe", overrides=["league.bots=[nosuchbot]"])
    trainer = Trainer(config, make_game("tictactoe", 2, 0))
    try:
        with pytest.raises(ConfigError, match="league.bots: unknown tictactoe bot 'nosuchbot'"):
            attach(trainer, tmp_path)
        assert capsys.readouterr().err == ""
        with LeagueDB(tmp_path / "league.db") as db:
            assert db.match_count() == 0
    finally:
        trainer.game.close()


def test_bot_env_pfsp_needs_engine_bots(tmp_path: Path) -> None:
    config = build_config("tictactoe", overrides=["league.bot_env_pfsp=true"])
    trainer = Trainer(config, make_game("tictactoe", 2, 0))
    with pytest.raises(ConfigError, match="league.bot_env_pfsp: tictactoe has no engine bots"):
        attach(trainer, tmp_path)


def test_league_needs_two_seats(tmp_path: Path) -> None:
    config = build_config("CartPole-v1", overrides=["league.enabled=true"])
    trainer = Trainer(config, make_game("CartPole-v1", 2, 0))
    with pytest.raises(ValueError, match="two-seat game"):
        attach(trainer, tmp_path)


def test_resumed_league_run_continues_exactly(tmp_path: Path) -> None:
    """Stopped after a snapshot the checkpoint predates, then resumed: the league draws the
    same opponents and the learner ends bit-identical to an uninterrupted run."""
    overrides = ["log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
                 "league.eval_every=2", "league.eval_games=4", "league.self_play=0.3",
                 "checkpoint.every_updates=3", "ppo.anneal_lr=false"]
    per_update = 32 * 32

    def config(updates: int) -> TrainConfig:
        return build_config("tictactoe", overrides=overrides, seed=5,
                            total_steps=updates * per_update)

    run_training(config(8), tmp_path / "straight")
    run_training(config(5), tmp_path / "stopped")
    stopped = tmp_path / "stopped"
    (stopped / "checkpoints" / "update_0000005.pt").unlink()  # lost with the crash
    db = LeagueDB(stopped / "league.db")
    assert "stopped@0000004" in {p.name for p in db.players()}, "no snapshot after the checkpoint"
    db.close()
    run_training(config(8), resume=stopped, total_steps=8 * per_update)

    want = load_checkpoint(tmp_path / "straight" / "checkpoints" / "update_0000008.pt")
    got = load_checkpoint(stopped / "checkpoints" / "update_0000008.pt")
    for key, tensor in want["agent"].items():
        assert torch.equal(got["agent"][key], tensor), f"{key} differs after the resume"
    league_want, league_got = want["extra"]["league"], got["extra"]["league"]
    assert np.array_equal(league_got["opponent"], league_want["opponent"])
    payoff_want = league_want["matchmaker"]["payoff"]
    payoff_got = league_got["matchmaker"]["payoff"]
    assert np.array_equal(payoff_got["ids"], payoff_want["ids"])
    assert np.array_equal(payoff_got["games"], payoff_want["games"])
    assert payoff_want["games"].sum() > 0, "no training game against a snapshot was recorded"
    assert league_got["rng"] == league_want["rng"]
    assert torch.equal(got["rng"]["torch"], want["rng"]["torch"])  # torch's global state too


def test_a_dead_rater_is_replaced_and_its_job_played(tmp_path: Path, capsys) -> None:
    """The rater process killed (as by the OOM killer) while it holds a job: the next
    collect starts another, which plays the job; training is never stopped by it."""
    import os
    import signal
    import time

    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=1",
        "league.eval_every=100", "league.eval_games=400", "league.eval_pool=1",
        "league.eval_envs=4", "league.eval_process=true"], seed=2, total_steps=32 * 32 * 2)
    trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed))
    hook = attach(trainer, tmp_path)
    assert hook is not None and hook.ratings.rater is not None
    try:
        trainer.train()
        assert hook.latest is not None
        job = hook.ratings.job(hook.latest)
        assert job is not None and len(job.pool) == 3  # a snapshot and the two anchors
        total = 3 * 400
        hook.ratings.rater.submit(job)
        pool = hook.ratings.rater._pool  # noqa: SLF001 - killing the rater is the point
        assert pool is not None
        deadline = time.monotonic() + 60
        while not hook.db.match_keys(f"eval@{job.latest}/") and time.monotonic() < deadline:
            time.sleep(0.05)  # the rater has started playing the job
        pids = list(pool._processes)  # noqa: SLF001
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        partial = len(hook.db.match_keys(f"eval@{job.latest}/"))
        assert 0 < partial < total
        (finished,) = hook.ratings.rater.collect(wait=True)
        assert "league/mu" in finished.metrics
        assert len(hook.db.match_keys(f"eval@{job.latest}/")) == total  # finished, none twice
        assert hook.db.replay_ratings() == hook.db.ratings()
        assert "the rater process died; starting another" in capsys.readouterr().err
    finally:
        hook.close()


# --------------------------------------------------------------------------- microRTS bot envs

MICRORTS_BOT_ENVS = [
    "game.num_envs=5", "game.options.map=basesWorkers8x8", "game.options.num_selfplay_envs=1",
    "game.options.bots=[Passive, WorkerRush, LightRush]", "game.options.max_steps=40",
    "ppo.num_steps=40", "ppo.num_minibatches=1", "ppo.update_epochs=1",
    "league.bot_env_pfsp=true", "league.anchors=[]", "league.snapshot_every=1000",
    "league.eval_every=1000", "league.eval_process=false", "log.progress=false",
    "log.tensorboard=false", "network.channels=[8,16]", "network.hidden=[16]"]


def engine_bot(game: Any, env: int) -> str:
    """The bot playing env ``env``'s game in progress, read from the engine (its Java class
    as a bot name), not from the adapter's bookkeeping."""
    from games.microrts.bots import bot_names, resolve_bot

    gi, kind, k = game._env_slot[env]  # noqa: SLF001 - the engine's own view is the point
    assert kind == "bot"
    java = str(game.groups[gi].client.clients[k].ai2.getClass().getName())
    return next(name for name in bot_names() if resolve_bot(name).java_class == java)


def test_microrts_bot_envs_draw_their_next_bot_by_pfsp(tmp_path: Path) -> None:
    """league.bot_env_pfsp on 8x8: at each episode end in a bot env the bot of the game after
    the one just begun is drawn by PFSP; the learner's results go to the payoff table against
    the bot actually played (read from the engine), and so do the per-opponent statistics.
    A learner that beats Passive and LightRush and loses to WorkerRush meets WorkerRush."""
    from selfplay.opponent_stats import OpponentWinRates
    from selfplay.train import build_trainer

    config = build_config("microrts", overrides=MICRORTS_BOT_ENVS, seed=3,
                          total_steps=5 * 40 * 5)
    trainer = build_trainer(config, None)
    game: Any = trainer.game
    hook = attach(trainer, tmp_path)
    assert hook is not None
    try:
        bot_envs = hook.bot_envs.tolist()
        assert bot_envs == [1, 2, 3, 4] and hook.bot_draws.names == ["Passive", "WorkerRush",
                                                                "LightRush"]
        assert [game.players[e, 0] for e in bot_envs] == [0, 1, 0, 1]  # sides: the layout's
        payoff = hook.matchmaker.payoff
        ids = {name: ENGINE_BOT - k for k, name in enumerate(hook.bot_draws.names)}
        for _ in range(50):  # the learner's history: it beats two bots, loses to WorkerRush
            hook.matchmaker.record(LEARNER, ids["Passive"], 1)
            hook.matchmaker.record(LEARNER, ids["LightRush"], 1)
            hook.matchmaker.record(LEARNER, ids["WorkerRush"], -1)
        played = {e: [engine_bot(game, e)] for e in bot_envs}  # each game's bot, in order
        drawn = {e: [hook.bot_draws.name(int(hook.bot_draws.next[e]))] for e in bot_envs}
        assert [played[e][0] for e in bot_envs] == ["Passive", "Passive", "WorkerRush",
                                                    "WorkerRush"]  # the env layout's
        credited: list[tuple[str, int]] = []
        per_opponent = OpponentWinRates(lambda: game.ended_opponent_names)

        def check(stats: Any) -> None:  # runs after the league's hook
            per_opponent.add(stats)
            for env, seat, outcome in zip(stats.env.tolist(), stats.seat.tolist(),
                                          stats.outcome.tolist(), strict=True):
                if env not in played:
                    continue
                assert seat == 0
                assert game.ended_opponent_names[env] == played[env][-1]  # credited right
                credited.append((played[env][-1], outcome))
                now = engine_bot(game, env)
                assert now == drawn[env][-1] == game.opponent_names[env]  # set_bot's, begun
                assert hook.bot_draws.name(int(hook.bot_draws.now[env])) == now
                played[env].append(now)
                drawn[env].append(hook.bot_draws.name(int(hook.bot_draws.next[env])))

        trainer.add_episode_listener(check)
        trainer.train()
        assert all(len(played[e]) >= 5 for e in bot_envs), played
        later = [name for e in bot_envs for name in played[e][2:]]  # drawn after the history
        assert later.count("WorkerRush") >= 0.9 * len(later), played
        assert any(played[e][0] != "WorkerRush" for e in bot_envs)  # bots did change
        # the payoff table holds the learner's games against each bot actually played (50
        # from its history, then every finished game; each new one decays the pair's by 0.99)
        games = Counter(bot for bot, outcome in credited if outcome != Outcome.NONE)
        learner = payoff.index[LEARNER]
        for name, pid in ids.items():
            want = sum(0.99 ** k for k in range(50 + games[name]))
            assert payoff.games[learner, payoff.index[pid]] == pytest.approx(want), name
        logged = Counter({name: len(results) for name, results in per_opponent.outcomes.items()
                          if name != "selfplay"})
        assert logged == games and games["WorkerRush"] > games["Passive"]
        metrics = hook.after_update()
        assert sum(metrics[f"league/bot_env_share/{n}"] for n in hook.bot_draws.names) == 1.0
        # the self-play share is of the envs a policy plays seat 1 of (the bot envs' engine
        # seat has owner 0 too: the share could not fall below 4 / 5 here)
        assert metrics["league/opponent_share_selfplay"] == 1.0
        trainer.seats.assign(np.array([0]), 1, 7)  # env 0's opponent: another policy's slot
        assert hook.after_update()["league/opponent_share_selfplay"] == 0.0
    finally:
        hook.close()
        game.close()


def test_microrts_bot_env_draws_survive_a_resume(tmp_path: Path) -> None:
    """A checkpoint holds the bot envs' generator and each one's drawn next bot: a resumed
    run draws what the uninterrupted one would, and the game after the one begun at the resume
    (microRTS restarts its games, against the env layout's bots) is the drawn bot's."""
    from selfplay.tracking import RunDir
    from selfplay.train import build_trainer

    def config(updates: int) -> TrainConfig:
        return build_config("microrts", overrides=[*MICRORTS_BOT_ENVS,
                                                   "checkpoint.every_updates=1"],
                            seed=4, total_steps=5 * 40 * updates)

    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    trainer = build_trainer(config(2), run)
    hook = attach(trainer, run.path)
    assert hook is not None
    try:
        trainer.train()
        state = load_checkpoint(sorted(run.checkpoints.glob("*.pt"))[-1])
        saved = state["extra"]["league"]["bot_envs"]
        assert saved["names"] == hook.bot_draws.names
        np.testing.assert_array_equal(saved["next"], hook.bot_draws.next)
        ahead = hook.bot_draws.sample(50)  # what the uninterrupted run draws next
        assert len(set(ahead.tolist())) > 1
    finally:
        hook.close()
        trainer.game.close()

    resumed = build_trainer(config(4), run)
    assert not resumed.load_state_dict(state)  # microRTS starts new games
    hook = attach(resumed, run.path)
    assert hook is not None
    game: Any = resumed.game
    try:
        bot_envs = hook.bot_envs.tolist()
        np.testing.assert_array_equal(hook.bot_draws.next, saved["next"])
        assert [engine_bot(game, e) for e in bot_envs] == [
            hook.bot_draws.name(int(hook.bot_draws.now[e])) for e in bot_envs] == [
            "Passive", "Passive", "WorkerRush", "WorkerRush"]  # the layout's, begun again
        rng = hook.bot_draws.rng.bit_generator.state
        np.testing.assert_array_equal(hook.bot_draws.sample(50), ahead)
        hook.bot_draws.rng.bit_generator.state = rng
        after_first: dict[int, str] = {}

        def check(stats: Any) -> None:
            for env in stats.env.tolist():
                if env in bot_envs and env not in after_first:
                    after_first[env] = engine_bot(game, env)

        resumed.add_episode_listener(check)
        resumed.train()
        assert after_first == {e: hook.bot_draws.name(int(saved["next"][e])) for e in bot_envs}
    finally:
        hook.close()
        game.close()


def test_microrts_bot_env_draws_with_worker_processes(tmp_path: Path) -> None:
    """The same with the envs in two worker processes, stepped part by part (pipelined):
    the draws reach the workers between their steps, and the run's per-opponent win rates
    and bot-env shares reach the metrics."""
    import json

    config = build_config("microrts", overrides=[*MICRORTS_BOT_ENVS, "game.options.workers=2"],
                          seed=5, total_steps=5 * 40 * 3)
    assert config.pipeline
    run_training(config, run_dir=tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    last = [row for row in rows if "snapshot" not in row][-1]  # the last update's
    shares = {k: v for k, v in last.items() if k.startswith("league/bot_env_share/")}
    assert set(shares) == {f"league/bot_env_share/{n}" for n in ("Passive", "WorkerRush",
                                                                 "LightRush")}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert any(k.startswith("win_rate/") and k != "win_rate/selfplay" for k in last)
    checkpoint = load_checkpoint(sorted((tmp_path / "run" / "checkpoints").glob("*.pt"))[-1])
    payoff = checkpoint["extra"]["league"]["matchmaker"]["payoff"]
    learner = list(payoff["ids"]).index(LEARNER)
    bots = [list(payoff["ids"]).index(ENGINE_BOT - k) for k in range(3)]
    assert payoff["games"][learner, bots].sum() >= 8  # 4 bot envs, 3 x 40 steps each


def test_a_rating_finished_but_never_logged_is_logged_when_the_run_resumes(
        tmp_path: Path) -> None:
    """A trainer killed after its rater finished a tournament, before it collected the
    result, leaves a complete tournament in the database and no rating in metrics.jsonl; the
    resumed run logs it (its rater plays nothing), each snapshot once."""
    import json

    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
        "league.eval_every=2", "league.eval_games=2", "league.eval_pool=1",
        "league.anchors=[random]", "league.eval_process=true", "game.num_envs=8",
        "ppo.num_steps=16"], seed=4, total_steps=8 * 16 * 4)
    run_dir = tmp_path / "run"
    run_training(config, run_dir=run_dir)
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(line for line in lines if '"snapshot"' not in line))
    with LeagueDB(run_dir / "league.db") as db:
        stored = db.match_count()
    run_training(config, resume=run_dir, total_steps=8 * 16 * 6)
    rows = [json.loads(line) for line in metrics.open()]
    assert sorted((r["step"], r["snapshot"]) for r in rows if "snapshot" in r) == [
        (u * 8 * 16, f"run@{u:07d}") for u in (2, 4, 6)]
    with LeagueDB(run_dir / "league.db") as db:  # only the new snapshot's games were played
        assert db.match_count() == stored + 2 * 2


@pytest.mark.parametrize("rater", [False, True])
def test_a_snapshot_still_the_newest_at_the_next_rating_is_logged_once(
        tmp_path: Path, rater: bool) -> None:
    """league.eval_every below league.snapshot_every: the newest snapshot was rated (a
    replay) and logged again at every rating update; a resumed run neither repeats the
    ratings its metrics hold."""
    import json

    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=4",
        "league.eval_every=2", "league.eval_games=2", "league.eval_pool=1",
        "league.anchors=[random]", f"league.eval_process={rater}", "game.num_envs=8",
        "ppo.num_steps=16", "checkpoint.every_updates=3"], seed=4, total_steps=8 * 16 * 8)
    run_dir = tmp_path / "run"
    run_training(config, run_dir=run_dir)
    run_training(config, resume=run_dir, total_steps=8 * 16 * 12)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    assert [(r["step"], r["snapshot"]) for r in rows if "snapshot" in r] == [
        (u * 8 * 16, f"run@{u:07d}") for u in (4, 8, 12)]


def test_tensorboard_shows_the_learners_rating_over_time(tmp_path: Path) -> None:
    """The league's ratings reach the TensorBoard event files (what a user opens), one point
    per rated snapshot, at increasing steps, equal to the values in metrics.jsonl."""
    import json

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=true", "league.snapshot_every=2",
        "league.eval_every=2", "league.eval_games=4", "league.eval_pool=2",
        "league.anchors=[random]", "league.eval_process=false", "game.num_envs=8",
        "ppo.num_steps=16"], seed=3, total_steps=8 * 16 * 8)
    run_dir = tmp_path / "run"
    run_training(config, run_dir=run_dir)
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    for tag in ("league/mu", "league/sigma", "league/conservative", "league/elo"):
        assert tag in events.Tags()["scalars"], tag
    points = events.Scalars("league/mu")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    logged = [(r["step"], r["league/mu"]) for r in rows if "league/mu" in r]
    assert len(points) == len(logged) == 4  # snapshots of updates 2, 4, 6, 8
    assert [p.step for p in points] == sorted(p.step for p in points)
    assert [(p.step, round(p.value, 4)) for p in points] == [
        (step, round(mu, 4)) for step, mu in logged]


def test_bot_results_count_the_snapshots_own_rating_games(tmp_path: Path) -> None:
    """eval/win_rate/<bot>: only the snapshot's own tournament, from its side of each game,
    only against bots; draws are counted apart."""
    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:
        snap, other = (db.add_player(f"r@00000{u}", "snapshot") for u in (10, 20))
        rush, rand = db.add_player("rush", "bot"), db.add_player("rand", "bot")
        games = [(snap, rush, 1), (rush, snap, 1), (snap, rush, 0), (rush, snap, -1),  # vs rush
                 (rand, snap, -1), (snap, rand, 1), (snap, other, 1)]
        for k, (a, b, outcome) in enumerate(games):
            db.record_match(a, b, outcome, key=f"eval@r@0000010/x/{k}")
        db.record_match(other, rush, 1, key="eval@r@0000020/x/0")  # another snapshot's
        db.record_match(snap, rush, 1, key="eval@r@0000010x/y/0")  # another tournament id
        assert bot_results(db, "r@0000010") == {
            "eval/win_rate/rand": 1.0, "eval/draw_rate/rand": 0.0,
            "eval/win_rate/rush": 0.5, "eval/draw_rate/rush": 0.25}


def test_snapshots_of_a_run_of_the_same_name_in_a_shared_database_are_refused(
        tmp_path: Path) -> None:
    """Snapshots are named ``<run folder name>@<update>``: a second run of the same folder
    name sharing a database would have taken the first run's snapshots for its own (its own
    never saved); it is refused naming the owner. The same run's snapshot file, cut short by a
    kill, is written again when the resumed run reaches its update."""
    from types import SimpleNamespace

    from league.db import LeagueError
    from league.snapshots import load_snapshot
    from selfplay.snapshot_ratings import register_snapshot

    config = build_config("tictactoe", overrides=["log.progress=false"])
    trainer = Trainer(config, make_game("tictactoe", 2, 0))
    try:
        weights = trainer.agent.state_dict()
        run = SimpleNamespace(config=config, spec=trainer.spec, device=trainer.device, update=5)
        with LeagueDB(tmp_path / "shared.db", game="tictactoe") as db:
            first = tmp_path / "a" / "run" / "snapshots"
            pid = register_snapshot(db, first, "run", run, weights, 100, None, "main")
            file = Path(str(db.player(pid).path))
            assert file.parent == first.resolve()
            file.write_bytes(file.read_bytes()[:100])  # cut short by a kill
            assert register_snapshot(db, first, "run", run, weights, 100, None, "main") == pid
            assert load_snapshot(file).info.update == 5  # written again
            with pytest.raises(LeagueError, match=r"snapshot run@0000005 in .*shared.db belongs "
                                                  r"to another run \(.*/a/run/snapshots\)"):
                register_snapshot(db, tmp_path / "b" / "run" / "snapshots", "run", run,
                                  weights, 100, None, "main")
        folder = tmp_path / "afolder"
        folder.mkdir()
        with pytest.raises(LeagueError, match=f"{folder} is a folder, not a league database"):
            LeagueDB(folder, game="tictactoe")
    finally:
        trainer.game.close()


def test_a_relative_league_db_is_the_same_file_when_resumed_from_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: ``league.db=shared.db`` was read against the working directory of each start:
    resumed from another folder, the run made an empty database there and failed on it."""
    from selfplay.config_files import read_yaml

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    overrides = ["log.progress=false", "log.tensorboard=false", "league.snapshot_every=1",
                 "league.eval_process=false", "league.eval_every=100", "game.num_envs=4",
                 "ppo.num_steps=16", "league.db=shared.db"]
    monkeypatch.chdir(tmp_path / "a")
    config = build_config("tictactoe", overrides=overrides, seed=1, total_steps=4 * 16 * 2)
    run_training(config, tmp_path / "run")
    saved = read_yaml(tmp_path / "run" / "config.yaml")["league"]["db"]
    assert saved == str(tmp_path / "a" / "shared.db")
    run_training(config, tmp_path / "run")  # the same command again: the same run, resumed
    monkeypatch.chdir(tmp_path / "b")
    run_training(None, resume=tmp_path / "run", total_steps=4 * 16 * 4)
    assert not (tmp_path / "b" / "shared.db").exists()
    with LeagueDB(tmp_path / "a" / "shared.db") as db:
        assert "run@0000004" in {p.name for p in db.players()}


def test_a_moved_run_folder_resumes_with_its_snapshots(tmp_path: Path, capsys) -> None:
    """Guards: the league held the snapshots' old absolute paths: a moved run marked every
    snapshot broken, and one registered after its last checkpoint stopped the resume."""
    import shutil

    overrides = ["log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
                 "league.eval_process=false", "game.num_envs=4", "ppo.num_steps=16",
                 "checkpoint.every_updates=5"]
    config = build_config("tictactoe", overrides=overrides, seed=2, total_steps=4 * 16 * 8)
    run_training(config, tmp_path / "a" / "run")
    (tmp_path / "a" / "run" / "checkpoints" / "update_0000008.pt").unlink()  # lost in a crash
    shutil.move(tmp_path / "a", tmp_path / "b")
    capsys.readouterr()
    run_training(None, resume=tmp_path / "b" / "run", total_steps=4 * 16 * 10)
    assert "warning" not in capsys.readouterr().err
    with LeagueDB(tmp_path / "b" / "run" / "league.db") as db:
        snapshots = [p for p in db.players() if p.kind == "snapshot"]
        assert len(snapshots) == 5 and all(p.broken is None for p in snapshots)
        assert all(Path(str(p.path)).parent == tmp_path / "b" / "run" / "snapshots"
                   for p in snapshots)


def test_frozen_anchors_start_apart_from_games_between_them(tmp_path: Path) -> None:
    """Guards: every frozen anchor sat at the TrueSkill prior, random and win_or_block at one
    μ (the leaderboard ranked the strongest bot last, below random): anchors new to a league
    now start at ratings from games between the anchors, played outside the league; one
    joining later is placed against those already there, which keep theirs."""
    from selfplay.config import LeagueConfig
    from selfplay.snapshot_ratings import register_anchors

    game = make_game("tictactoe", num_envs=1, seed=0)
    spec = game.spec
    game.close()
    both = LeagueConfig(anchors=["random", "win_or_block"])
    placed = []
    for n in range(2):  # the same seed places them alike
        with LeagueDB(tmp_path / f"l{n}.db", game="tictactoe") as db:
            assert register_anchors(db, spec, both, 3, {}) == ["random", "win_or_block"]
            placed.append((db.rating("random"), db.rating("win_or_block")))
            assert db.match_count() == 0 and db.replay_ratings() == db.ratings()
            assert all(p.frozen for p in db.players())
    (weak, strong), again = placed
    assert again == (weak, strong)
    assert strong.mu > weak.mu + 1 and max(weak.sigma, strong.sigma) < 8
    with LeagueDB(tmp_path / "later.db", game="tictactoe") as db:
        register_anchors(db, spec, LeagueConfig(anchors=["random"]), 3, {})
        prior = db.rating("random")
        assert prior.mu == 25.0  # one anchor: nothing to place it against
        register_anchors(db, spec, both, 3, {})
        assert db.rating("random") == prior and db.rating("win_or_block").mu > 25.0
    with LeagueDB(tmp_path / "off.db", game="tictactoe") as db:
        register_anchors(db, spec, LeagueConfig(anchors=["random", "win_or_block"],
                                                anchor_calibration_games=0), 3, {})
        assert db.rating("random") == db.rating("win_or_block")  # both the prior
