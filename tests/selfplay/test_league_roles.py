"""Exploiter roles in training: who each role plays, config errors, an end-to-end exploiter run.

The opponent distributions are drawn by the real :class:`league.matchmaking.Matchmaker` inside
a :class:`selfplay.league_training.LeagueHook` over a real league database of snapshots.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from games.core import EpisodeStats
from games.options import to_mapping
from games.registry import make_game
from league.db import LeagueDB
from league.snapshots import save_snapshot, snapshot_name
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config
from selfplay.league_training import LEARNER, MAIN, LeagueHook, attach
from selfplay.networks import ActorCritic
from selfplay.ppo import Trainer

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["log.progress=false", "log.tensorboard=false"]


def add_snapshots(db_path: Path, players: list[tuple[str, int, str]],
                  config: TrainConfig | None = None) -> dict[str, int]:
    """Register untrained tic-tac-toe snapshots ``(run, update, role)``, each in its run's
    folder beside the database, trained with ``config`` (default: the family's); ids by
    name."""
    config = config or build_config("tictactoe")
    game = make_game("tictactoe", 1, 0)
    agent = ActorCritic(game.spec, config.network, config.normalize)
    game.close()
    with LeagueDB(db_path, game="tictactoe") as db:
        return {snapshot_name(run, update): save_snapshot(
            db, db_path.parent / run / "snapshots", snapshot_name(run, update),
            agent.state_dict(), to_mapping(config), 0, update=update, role=role)
            for run, update, role in players}


def hook_for(tmp_path: Path, db_path: Path, role: str, *sets: str, run: str = "me",
             own: bool = True, num_envs: int = 4) -> LeagueHook:
    """The league hook of a run named ``run`` (in ``tmp_path``) playing ``role`` in
    ``db_path``, at update 2; ``own``: its own snapshot ``<run>@2`` is in the database (saved
    with its settings, as the run would have) and so in the pool."""
    config = build_config("tictactoe", overrides=[
        *QUIET, f"league.role={role}", f"league.db={db_path}", *sets], seed=0)
    if own and db_path.is_file():
        add_snapshots(db_path, [(run, 2, role)], config)
    trainer = Trainer(config, make_game("tictactoe", num_envs, 0))
    trainer.update = 2
    hook = attach(trainer, tmp_path / run)
    assert hook is not None
    return hook


def frequencies(hook: LeagueHook, n: int = 20_000) -> dict[int, float]:
    """Share of each opponent over ``n`` draws: player ids, LEARNER for self-play."""
    players = [hook.player_of(int(p)) for p in hook.sample(n)]
    counts = Counter(LEARNER if p is None else p for p in players)
    return {p: c / n for p, c in counts.items()}


@pytest.fixture
def league(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """Main run ``main`` (3 snapshots), another main run ``other`` and a league exploiter
    ``lx`` (the run under test, ``me``, adds its own: :func:`hook_for`)."""
    path = tmp_path / "league.db"
    ids = add_snapshots(path, [("main", 2, "main"), ("main", 4, "main"), ("main", 6, "main"),
                               ("other", 2, "main"), ("lx", 2, "league_exploiter")])
    return path, ids


def test_main_plays_itself_and_pfsp_over_every_snapshot(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, ids = league
    hook = hook_for(tmp_path, path, "main", "league.self_play=0.4")
    ids = {**ids, "me@0000002": hook.db.player("me@0000002").id}
    for _ in range(30):
        hook.matchmaker.record(LEARNER, ids["main@0000002"], 1)  # p ~ 1: hard weight ~ 0
        hook.matchmaker.record(LEARNER, ids["lx@0000002"], -1)  # p ~ 0: hard weight ~ 1
    freq = frequencies(hook)
    assert freq[LEARNER] == pytest.approx(0.4, abs=0.015)
    # hard weights: lx 1, four unplayed at 0.25 each, main@2 ~0 -> total 2
    assert freq[ids["lx@0000002"]] == pytest.approx(0.6 * 1 / 2, abs=0.015)
    for name in ("main@0000004", "main@0000006", "other@0000002", "me@0000002"):
        assert freq[ids[name]] == pytest.approx(0.6 * 0.25 / 2, abs=0.01), name
    assert freq.get(ids["main@0000002"], 0.0) < 0.002
    hook.close()


def test_main_exploiter_plays_the_main_agents_newest_snapshot_then_pfsp_variance(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, ids = league
    hook = hook_for(tmp_path, path, "main_exploiter", "league.target=main")
    assert hook.targets == [ids["main@0000002"], ids["main@0000004"], ids["main@0000006"]]
    assert frequencies(hook) == {ids["main@0000006"]: 1.0}  # unplayed: p = 1/2 >= 0.1
    for _ in range(40):
        hook.matchmaker.record(LEARNER, MAIN, -1)  # it cannot beat the main agent yet
    hook.matchmaker.record(LEARNER, ids["main@0000002"], 1)
    hook.matchmaker.record(LEARNER, ids["main@0000004"], -1)
    hook.matchmaker.record(LEARNER, ids["main@0000004"], 1)
    freq = frequencies(hook)
    # PFSP over the main agent's snapshots only, AlphaStar's variance weighting p (1 - p):
    # p = 1, ~1/2, unplayed 1/2 -> 0, ~0.25, 0.25
    assert set(freq) == {ids["main@0000004"], ids["main@0000006"]}
    assert freq[ids["main@0000004"]] == pytest.approx(0.5, abs=0.02)
    # a new snapshot of the main run (written by its process) becomes the main agent
    new = add_snapshots(path, [("main", 8, "main")])["main@0000008"]
    for _ in range(200):
        hook.matchmaker.record(LEARNER, MAIN, 1)  # now it wins: back to the main agent
    hook.sync_pool()
    assert frequencies(hook, 2000) == {new: 1.0}
    hook.close()


def test_a_main_exploiter_below_the_threshold_returns_to_the_main_agent_once_it_wins(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, ids = league
    hook = hook_for(tmp_path, path, "main_exploiter", "league.target=main")
    newest = ids["main@0000006"]
    for _ in range(40):
        hook.matchmaker.record(LEARNER, MAIN, -1)  # below the threshold: snapshots only
    assert MAIN not in hook.sample(2000).tolist()
    # it now beats the main agent's newest snapshot, drawn among the snapshots: those games
    # are games against the main agent too, and it goes back to playing it
    envs = np.arange(4)
    wins = EpisodeStats(envs, np.zeros(4, np.int64), np.ones(4), np.full(4, 5, np.int64),
                        np.full(4, 1, np.int8))
    for _ in range(100):
        hook.on_episodes(wins, played=np.full(4, newest))
    assert hook.matchmaker.payoff.win_rates(LEARNER, np.array([MAIN]))[0] >= 0.1
    assert set(hook.sample(2000).tolist()) == {MAIN}
    hook.close()


@pytest.mark.parametrize(("role", "self_play"), [("league_exploiter", 0.0), ("main", 0.5)])
def test_a_snapshot_drawn_while_every_slot_is_busy_is_redrawn_among_the_loaded_ones(
        tmp_path: Path, league: tuple[Path, dict[str, int]], role: str,
        self_play: float) -> None:
    path, _ = league
    hook = hook_for(tmp_path, path, role, "league.max_active_opponents=1",
                    f"league.self_play={self_play}", num_envs=400)
    seat1 = hook.trainer.seats.of_seat(1)  # [E] owner slot of each env's opponent
    # one snapshot loaded for 400 envs drawn among 7 players: the others' envs got the loaded
    # one, not self-play (the share of self-play is the one drawn)
    assert len(hook.slots) == 1 and hook.redraws > 100
    assert (seat1 == 0).mean() == pytest.approx(self_play, abs=0.08)
    assert (hook.opponent[seat1 != 0] == next(iter(hook.slots))).all()
    assert (hook.opponent[seat1 == 0] == LEARNER).all()
    hook.close()


def test_opponents_turn_over_while_every_slot_plays_unfinished_games(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    """Guards (review): envs end their games at different times, so every one of the
    ``max_active_opponents`` slots always had a game going; nothing was ever evicted and a
    league exploiter played its first snapshots only (5 of 135 in a reviewer's run). The least
    recently drawn snapshot now starts no new game, so its slot frees for the next draw."""
    path, ids = league
    hook = hook_for(tmp_path, path, "league_exploiter", "league.max_active_opponents=2",
                    num_envs=8)
    played: set[int] = set()
    for step in range(200):  # one env's game ends per step, in turn
        env = np.array([step % 8])
        played.add(int(hook.opponent[env[0]]))
        hook.on_episodes(EpisodeStats(env, np.zeros(1, np.int64), np.zeros(1),
                                      np.ones(1, np.int64), np.zeros(1, np.int8)))
        assert len(hook.slots) <= 2
    pool = {*ids.values(), hook.db.player("me@0000002").id}
    assert played == pool  # every snapshot of the league, the exploiter's own included
    hook.close()


def test_the_opponents_played_follow_the_draw_whatever_their_ids(tmp_path: Path) -> None:
    """Guards (review of the fix above): a freed slot went to the lowest id drawn, so the
    games played leaned towards the oldest snapshots (0.21 of the games against the first of
    9 equally drawn snapshots, 0.03 against the last)."""
    path = tmp_path / "league.db"
    add_snapshots(path, [("main", 2 * i + 2, "main") for i in range(9)])
    hook = hook_for(tmp_path, path, "league_exploiter", "league.max_active_opponents=2",
                    num_envs=8, own=False)
    rng = np.random.default_rng(0)
    played: Counter[int] = Counter()
    for _ in range(1500):  # each env's game ends with probability 0.3 at every step
        ended = np.flatnonzero(rng.random(8) < 0.3)
        played.update(hook.opponent[ended].tolist())
        k = len(ended)
        hook.on_episodes(EpisodeStats(ended, np.zeros(k, np.int64), np.zeros(k),
                                      np.ones(k, np.int64), np.zeros(k, np.int8)))
    shares = np.array([played[p] for p in sorted(played)]) / sum(played.values())
    assert len(shares) == 9 and shares.min() > 0.06 and shares.max() < 0.17, shares
    hook.close()


def test_main_exploiter_without_target_takes_every_main_role_run(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, ids = league
    hook = hook_for(tmp_path, path, "main_exploiter")
    # every snapshot of role main but its own: the newest (other@2, registered after main@6)
    assert hook.targets == [ids[n] for n in ("main@0000002", "main@0000004", "main@0000006",
                                             "other@0000002")]
    assert frequencies(hook, 2000) == {ids["other@0000002"]: 1.0}
    hook.close()


def test_league_exploiter_pfsp_over_the_whole_league(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, ids = league
    hook = hook_for(tmp_path, path, "league_exploiter")
    ids = {**ids, "me@0000002": hook.db.player("me@0000002").id}
    for _ in range(30):
        hook.matchmaker.record(LEARNER, ids["other@0000002"], 1)
        hook.matchmaker.record(LEARNER, ids["main@0000006"], -1)
    freq = frequencies(hook)
    assert LEARNER not in freq  # exploiters never play themselves
    assert set(freq) <= set(ids.values())
    assert freq.get(ids["other@0000002"], 0.0) < 0.002
    # AlphaStar's linear_capped, min(1/2, 1 - p): main@6 1/2, four unplayed 1/2 each,
    # other@2 ~0 -> total 5/2
    assert freq[ids["main@0000006"]] == pytest.approx(0.2, abs=0.015)
    for name in ("main@0000002", "main@0000004", "lx@0000002", "me@0000002"):
        assert freq[ids[name]] == pytest.approx(0.2, abs=0.015), name
    hook.close()
    hard = hook_for(tmp_path, path, "league_exploiter", "league.weighting=hard", run="hard")
    assert hard.matchmaker.config.league_exploiter_weighting == "hard"
    hard.close()


def test_league_exploiter_in_an_empty_league_plays_itself(tmp_path: Path) -> None:
    LeagueDB(tmp_path / "empty.db", game="tictactoe").close()  # the main run's, no snapshot yet
    hook = hook_for(tmp_path, tmp_path / "empty.db", "league_exploiter", own=False)
    assert frequencies(hook, 100) == {LEARNER: 1.0}
    hook.close()


@pytest.mark.parametrize("role", ["main_exploiter", "league_exploiter"])
def test_an_exploiter_never_creates_the_database_it_joins(tmp_path: Path, role: str) -> None:
    """Guards: a mistyped league.db made a new database (and its folders), left behind by the
    refused run."""
    typo = tmp_path / "nodir" / "sub" / "typo.db"
    with pytest.raises(ConfigError, match=f"league.db: no league database at {typo}; an "
                                          f"exploiter \\(league.role={role}\\) joins"):
        hook_for(tmp_path, typo, role)
    assert not (tmp_path / "nodir").exists()


@pytest.mark.parametrize(("sets", "message"), [
    (["league.role=coach"], "league.role: 'coach' is not one of 'main', 'main_exploiter'"),
    (["league.role=main_exploiter"], "league.role=main_exploiter needs league.db"),
    (["league.target=main"], "league.target is only used with league.role=main_exploiter"),
    (["league.exploiter_threshold=1.5"], "league.exploiter_threshold must be in [0, 1]"),
    # guards below: each trained on, ignoring the setting, failing every rating with a warning
    # or with a traceback
    (["league.role=league_exploiter"], "league.role=league_exploiter needs league.db"),
    (["league.enabled=false", "league.role=main_exploiter", "league.db=x.db"],
     "league.enabled is false, yet league.role=main_exploiter and league.db=x.db ask"),
    (["league.bots=[random,Random]", "league.bot_share=0.2"], "league.bots names a bot twice"),
    (["league.anchors=[random,random]"], "league.anchors names a bot twice"),
    (["league.eval_games=0"], "league.eval_games must be >= 1"),
    (["league.eval_pool=-2"], "league.eval_pool must be >= 0"),
    (["league.eval_pool=0", "league.anchors=[]"], "league.eval_pool=0 without league.anchors"),
    (["league.eval_envs=0"], "league.eval_envs must be >= 1"),
    (["league.elo_k=1000"], "league.elo_k must be in (0, 400]"),
])
def test_bad_role_settings_name_the_key(sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config("tictactoe", overrides=sets)
    assert message in str(info.value)


def test_main_exploiter_without_main_snapshots_is_a_clear_error(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    path, _ = league
    with pytest.raises(ConfigError, match=r"no snapshot of a main agent of run 'mian' \(runs "
                                          r"with main snapshots: main, other\)"):
        hook_for(tmp_path, path, "main_exploiter", "league.target=mian")


@pytest.mark.parametrize(("role", "sets", "reason"), [
    ("main_exploiter", ["league.bot_share=0.2"], "a main_exploiter plays only the main"),
    ("main", ["league.bot_share=0"], "league.bot_share is 0"),
])
def test_league_bots_a_run_never_plays_are_named(
        tmp_path: Path, league: tuple[Path, dict[str, int]], capsys, role: str,
        sets: list[str], reason: str) -> None:
    """Guards: league.bots a main exploiter (or a share of 0) never plays were silently
    ignored (a warning: saved runs and family configs hold such settings)."""
    path, _ = league
    hook_for(tmp_path, path, role, "league.bots=[win_or_block]", *sets).close()
    assert f"warning: league.bots (win_or_block) are not played: {reason}" in \
        capsys.readouterr().err


def test_a_second_run_of_the_same_name_is_refused_before_it_trains(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    """Guards: a run folder named like the main run's, sharing its database, trained on with
    the main run's snapshots as its own until its own first snapshot clashed, mid-run."""
    path, _ = league
    with pytest.raises(ConfigError, match=r"holds snapshots main@… of another run \(.*/main/"
                                          r"snapshots\): runs sharing a league database"):
        hook_for(tmp_path / "elsewhere", path, "main", run="main", own=False)


def test_a_restart_with_other_settings_does_not_take_the_dead_starts_snapshots(
        tmp_path: Path, league: tuple[Path, dict[str, int]]) -> None:
    """Guards: a run killed before its first checkpoint, started again with another seed,
    adopted the first start's snapshots (other weights, their ratings) as its own."""
    path, _ = league
    first = build_config("tictactoe", overrides=[
        *QUIET, "league.role=main", f"league.db={path}"], seed=7)
    add_snapshots(path, [("me", 2, "main")], first)
    with pytest.raises(ConfigError, match=r"snapshots of an earlier start of this run "
                                          r"\(me@0000002, ...\) with other settings \(seed\)"):
        hook_for(tmp_path, path, "main", own=False)


def train(*args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "selfplay.cli", "train", "--no-progress",
                           "--json", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


SMALL = ["--set", "game.num_envs=8", "--set", "ppo.num_steps=16", "--set",
         "league.snapshot_every=2", "--set", "league.eval_every=2", "--set",
         "league.eval_games=2", "--set", "league.max_active_opponents=8", "--set",
         "log.tensorboard=false"]


@pytest.mark.parametrize("role", [
    "main_exploiter",
    pytest.param("league_exploiter", marks=pytest.mark.slow),  # ~17 s: make bench
])
def test_exploiter_training_run_end_to_end(tmp_path: Path, role: str) -> None:
    main_db = tmp_path / "main" / "league.db"
    train("--game", "tictactoe", "--run-dir", str(tmp_path / "main"), "--total-steps",
          str(4 * 128), *SMALL)
    summary = train("--game", "tictactoe", "--run-dir", str(tmp_path / "exp"), "--total-steps",
                    str(6 * 128), *SMALL, "--set", f"league.role={role}", "--set",
                    f"league.db={main_db}")
    assert summary["league_role"] == role and summary["league_db"] == str(main_db)
    with LeagueDB(main_db) as db:
        players = {p.name: p for p in db.players()}
        mine = [p for p in players.values() if p.name.startswith("exp@")]
        assert [p.name for p in mine] == ["exp@0000002", "exp@0000004", "exp@0000006"]
        assert all(p.metadata["role"] == role for p in mine)
        assert all(Path(str(p.path)).parent == tmp_path / "exp" / "snapshots" for p in mine)
        assert players["main@0000004"].metadata["role"] == "main"
        rated = {m.key.split("/")[0] for m in db.matches()}
        assert {"eval@exp@0000002", "eval@exp@0000006"} <= rated
        assert db.replay_ratings() == db.ratings()
    records = [json.loads(line) for line in (tmp_path / "exp" / "metrics.jsonl").open()]
    metrics = [r for r in records if "snapshot" not in r]  # the updates' (not the ratings')
    # the learner never plays itself: every env's seat 1 is a snapshot of the league
    assert all(m["league/opponent_share_selfplay"] == 0.0 for m in metrics)
    if role == "main_exploiter":  # its games against the main agent were counted
        assert metrics[-1]["league/win_rate_vs_main"] != 0.5


def test_the_leaderboard_shows_each_snapshots_role(tmp_path: Path) -> None:
    """Guards (review): roles lived only in the database's player metadata; the leaderboard,
    its JSON and the HTML report showed none."""
    from selfplay.league_commands import format_leaderboard, leaderboard

    path = tmp_path / "league.db"
    add_snapshots(path, [("main", 2, "main"), ("mx", 2, "main_exploiter"),
                         ("lx", 2, "league_exploiter")])
    board = leaderboard(str(path), None)
    assert {p["name"]: p.get("role") for p in board["players"]} == {
        "main@0000002": "main", "mx@0000002": "main_exploiter",
        "lx@0000002": "league_exploiter"}
    lines = {line.split()[1]: line for line in format_leaderboard(board["players"]).splitlines()
             if "@" in line}
    assert lines["mx@0000002"].endswith("main_exploiter")
    assert lines["lx@0000002"].endswith("league_exploiter")
    assert lines["main@0000002"].endswith("-")  # no games yet; the main agent is not marked
    from league.db import LeagueDB
    from league.report import write_report

    with LeagueDB(path) as db:
        page = write_report(db, tmp_path / "report.html").read_text()
    for name, role in (("mx@0000002", "main_exploiter"), ("lx@0000002", "league_exploiter")):
        row = next(r for r in page.split("<tr") if f">{name}<" in r)
        assert f"<td class='name'>{role}</td></tr>" in row
