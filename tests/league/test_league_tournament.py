"""Tournaments on tic-tac-toe: schedules, sides, resuming after SIGKILL, skipped players."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from proc_helpers import count_matches
from ttt_players import BOTS, BotPolicy, game_factory, policy_factory

from games.core import GameError
from league.db import LeagueDB, LeagueError
from league.ratings import Rating, quality_matrix, win_probability
from league.tournament import MatchResult, MatchSpec, TournamentConfig, run_tournament

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


@pytest.fixture
def db(tmp_path: Path) -> Iterator[LeagueDB]:
    league = LeagueDB(tmp_path / "league.db", game="tictactoe")
    for name in BOTS:
        league.add_player(name, "bot")
    yield league
    league.close()


def test_round_robin_plays_every_pair_on_both_sides(db: LeagueDB) -> None:
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory,
                             TournamentConfig(games_per_pair=10, num_envs=7))
    assert summary.played == 30 and summary.already_stored == 0
    matches = db.matches()
    pairs = Counter((m.player_a, m.player_b) for m in matches)
    assert sorted(pairs.values()) == [10, 10, 10]
    sides = Counter((m.player_a, m.player_b, m.side_a) for m in matches)
    assert set(sides.values()) == {5}
    assert all(5 <= m.length <= 9 for m in matches)  # tic-tac-toe games last 5..9 moves
    assert len({m.seed for m in matches}) == 30
    assert db.replay_ratings() == db.ratings()


def test_rerun_plays_only_what_is_missing(db: LeagueDB) -> None:
    cfg = TournamentConfig(games_per_pair=4, num_envs=4)
    run_tournament(db, list(BOTS), policy_factory, game_factory, cfg)
    again = run_tournament(db, list(BOTS), policy_factory, game_factory, cfg)
    assert (again.played, again.already_stored) == (0, 12)
    more = run_tournament(db, list(BOTS), policy_factory, game_factory,
                          TournamentConfig(games_per_pair=6, num_envs=4))
    assert (more.played, more.already_stored) == (6, 12)
    assert db.match_count() == 18


def test_adaptive_runs_until_every_sigma_is_small(db: LeagueDB) -> None:
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory,
                             TournamentConfig(until_sigma=2.0, num_envs=8))
    board = db.leaderboard()
    assert summary.played > 10
    assert all(s.sigma < 2.0 for s in board)
    assert board[0].name == "win_or_block"
    again = run_tournament(db, list(BOTS), policy_factory, game_factory,
                           TournamentConfig(until_sigma=2.0, num_envs=8))
    assert again.played == 0
    assert summary.sigma_reached is True and again.sigma_reached is True


def test_a_sigma_target_cut_short_says_so_and_the_limit_counts_stored_games(
        db: LeagueDB) -> None:
    """Guards: a tournament stopped by its match limit exited as if the target were met, and
    every re-run played another ``max_matches`` (the limit counted only new matches)."""
    config = TournamentConfig(until_sigma=1.0, num_envs=4, max_matches=12)
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory, config)
    assert summary.played == 12 and summary.sigma_reached is False
    assert summary.to_json()["sigma_reached"] is False
    again = run_tournament(db, list(BOTS), policy_factory, game_factory, config)
    assert again.played == 0 and again.already_stored == 12 and again.sigma_reached is False
    more = run_tournament(db, list(BOTS), policy_factory, game_factory,
                          TournamentConfig(until_sigma=1.0, num_envs=4, max_matches=15))
    assert more.played == 3


def test_unloadable_player_is_reported_and_skipped(db: LeagueDB,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db.add_player("ghost", "checkpoint", path="/nowhere/ghost.pt")
    summary = run_tournament(db, [*BOTS, "ghost"], policy_factory, game_factory,
                             TournamentConfig(games_per_pair=2, num_envs=4))
    assert summary.skipped_players == ["ghost"] and summary.played == 6
    assert "skipping player 'ghost'" in capsys.readouterr().err
    assert db.player("ghost").broken is not None
    with pytest.raises(LeagueError, match="unknown player 'nobody'"):
        run_tournament(db, ["nobody"], policy_factory, game_factory, TournamentConfig())


def test_tournament_needs_two_seats(tmp_path: Path) -> None:
    from games.registry import make_game

    with LeagueDB(tmp_path / "c.db", game="CartPole-v1") as league:
        for name in ("x", "y"):
            league.add_player(name, "bot")

        class Zero:
            def act(self, obs: np.ndarray, mask: np.ndarray | None,
                    state: np.ndarray | None) -> np.ndarray:
                return np.zeros(len(obs), np.int64)

        with pytest.raises(GameError, match="two-seat game"):
            run_tournament(league, ["x", "y"], lambda name: Zero(),
                           lambda n, seed: make_game("CartPole-v1", num_envs=n, seed=seed),
                           TournamentConfig(games_per_pair=1))


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from ttt_players import BOTS, BotPolicy, game_factory, policy_factory
    from league.db import LeagueDB
    from league.tournament import MatchResult, MatchSpec, TournamentConfig, run_tournament
    db = LeagueDB(sys.argv[1], game="tictactoe")
    for name in BOTS:
        db.add_player(name, "bot")
    s = run_tournament(db, list(BOTS), policy_factory, game_factory,
                       TournamentConfig(games_per_pair=1000, num_envs=32, seed=3))
    print(s.played, s.already_stored)
""")


def kill_after_matches(command: list[str], path: Path, matches: int) -> None:
    """Run ``command`` and SIGKILL it once ``path`` holds ``matches`` matches."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while count_matches(path) < matches and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the tournament ended before it was killed"


def test_sigkill_mid_tournament_then_resume(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    command = [sys.executable, "-c", SCRIPT, str(path), str(HERE)]
    kill_after_matches(command, path, 300)
    with LeagueDB(path, game="tictactoe") as league:
        partial = league.match_count()
        assert 300 <= partial < 3000
        assert league._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # noqa: SLF001
        assert league.replay_ratings() == league.ratings()  # no half-written result

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    played, already = map(int, done.stdout.split())
    assert already == partial and played == 3000 - partial
    with LeagueDB(path, game="tictactoe") as league:
        matches = league.matches()
        assert len(matches) == 3000 and len({m.key for m in matches}) == 3000
        per_side = Counter((m.player_a, m.player_b, m.side_a) for m in matches)
        assert sorted(per_side.values()) == [500] * 6
        assert league.replay_ratings() == league.ratings()
        rating = {s.name: s for s in league.leaderboard()}
        assert rating["win_or_block"].mu > rating["random_legal"].mu + 3
        assert rating["win_or_block"].conservative > rating["random_legal"].mu


def test_gauntlet_plays_only_the_focus_player(db: LeagueDB) -> None:
    db.add_player("anchor", "bot", frozen=True)

    def factory(name: str) -> BotPolicy:
        return policy_factory("random_legal" if name == "anchor" else name)

    players = [*BOTS, "anchor"]
    summary = run_tournament(db, players, factory, game_factory,
                             TournamentConfig(games_per_pair=4, num_envs=4),
                             focus=["first_legal"])
    assert summary.played == 12
    focus_id = db.player("first_legal").id
    assert all(focus_id in (m.player_a, m.player_b) for m in db.matches())
    run_tournament(db, players, factory, game_factory,
                   TournamentConfig(until_sigma=3.0, num_envs=4, name="gauntlet"),
                   focus=["win_or_block"])
    assert db.rating("win_or_block").sigma < 3.0
    wob = db.player("win_or_block").id
    gauntlet = [m for m in db.matches() if m.key.startswith("gauntlet/")]
    assert gauntlet and all(wob in (m.player_a, m.player_b) for m in gauntlet)


class _StrongerWins:
    """A runner without a game: of two players, the one later in ``BOTS`` always wins."""

    def __init__(self, strength: dict[int, int]) -> None:
        self.strength = strength

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        while (match := next_match()) is not None:
            won = self.strength[match.a] > self.strength[match.b]
            on_result(match, MatchResult(1 if won else -1, 10, 0.0))


def stronger_wins(db: LeagueDB) -> Callable[[], _StrongerWins]:
    """A factory of :class:`_StrongerWins` runners for ``db``'s players."""
    strength = {db.player(name).id: rank for rank, name in enumerate(BOTS)}
    return lambda: _StrongerWins(strength)


def test_custom_runner_plugs_into_the_schedule(db: LeagueDB) -> None:
    """Engines whose bots are not seats bring their own runner; results flow the same way."""
    StrongerWins = stronger_wins(db)

    summary = run_tournament(db, list(BOTS), policy_factory, game_factory,
                             TournamentConfig(until_sigma=2.5), runner=lambda _: StrongerWins())
    assert summary.played > 0
    assert [s.name for s in db.leaderboard()] == list(reversed(BOTS))


def test_min_quality_ends_a_tournament_whose_sigmas_stall(db: LeagueDB) -> None:
    """Players that always beat (or lose to) everyone keep σ near 2: every game is almost
    certain, so it teaches less than TrueSkill's per-game drift adds. Without a quality floor
    the tournament runs to ``max_matches``; with one it ends once only lopsided pairings are
    left, and those are what it refused."""
    StrongerWins = stronger_wins(db)

    floor = TournamentConfig(until_sigma=1.2, min_quality=0.05, max_matches=600)
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory, floor,
                             runner=lambda _: StrongerWins())
    assert 0 < summary.played < 600
    ratings = db.ratings()
    ids = sorted(ratings)
    mu = np.array([ratings[i].mu for i in ids])
    sigma = np.array([ratings[i].sigma for i in ids])
    quality = quality_matrix(mu, sigma, db.config)
    np.fill_diagonal(quality, 0.0)
    stalled = sigma >= 1.2
    assert stalled.any() and (quality[stalled] < 0.05).all()
    for a in range(len(ids)):  # below the floor the favourite wins about 99 % of games
        for b in range(len(ids)):
            if a != b and quality[a, b] < 0.05:
                p = win_probability(Rating(mu[a], sigma[a]), Rating(mu[b], sigma[b]), db.config)
                assert min(p, 1 - p) < 0.015
    unbounded = TournamentConfig(until_sigma=1.2, max_matches=300, name="no-floor")
    again = run_tournament(db, list(BOTS), policy_factory, game_factory, unbounded,
                           runner=lambda _: StrongerWins())
    assert again.played == 300  # never converges on its own
    with pytest.raises(LeagueError, match="min_quality"):
        run_tournament(db, list(BOTS), policy_factory, game_factory,
                       TournamentConfig(until_sigma=1.2, min_quality=1.5),
                       runner=lambda _: StrongerWins())


def test_adaptive_tournament_can_open_with_a_round_robin(db: LeagueDB) -> None:
    """MicroRTS-Py's league protocol: every pair first plays the opening games (both sides),
    then adaptive pairings with game numbers after the opening's, until every σ is small; the
    opening's matches come first, in flight together, without clashing keys."""
    ids = {db.player(name).id: name for name in BOTS}
    strength = {pid: rank for rank, pid in enumerate(ids)}
    order: list[MatchSpec] = []

    class InFlight:  # four games in flight, finished oldest first: adaptive picks overlap
        def run(self, next_match: Callable[[], MatchSpec | None],
                on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
            flight: list[MatchSpec] = []
            while True:
                while len(flight) < 4 and (match := next_match()) is not None:
                    flight.append(match)
                    order.append(match)
                if not flight:
                    return
                match = flight.pop(0)
                on_result(match, MatchResult(1 if strength[match.a] > strength[match.b]
                                             else -1, 10, 0.0))

    cfg = TournamentConfig(until_sigma=2.5, opening_games_per_pair=4)
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory, cfg,
                             runner=lambda _: InFlight())
    assert cfg.tournament_id.startswith("rr4+ts:")
    assert summary.played == len(order) > 12
    opening = order[:12]
    assert Counter((m.a, m.b) for m in opening) == {pair: 4 for pair in
                                                    Counter((m.a, m.b) for m in opening)}
    assert Counter((m.a, m.b, m.side_a) for m in opening).most_common()[-1][1] == 2
    later = [int(m.key.rsplit("/", 1)[1]) for m in order[12:]]
    assert min(later) == 4 and len({m.key for m in order}) == len(order)
    assert all(s.sigma < 2.5 for s in db.leaderboard())
    assert [s.name for s in db.leaderboard()] == list(reversed(BOTS))
    again = run_tournament(db, list(BOTS), policy_factory, game_factory, cfg,
                           runner=lambda _: InFlight())
    assert again.played == 0 and again.already_stored == summary.played
    capped = run_tournament(db, list(BOTS), policy_factory, game_factory,
                            TournamentConfig(until_sigma=2.5, opening_games_per_pair=4,
                                             max_matches=5, name="capped"),
                            runner=lambda _: InFlight())
    assert capped.played == 5  # max_matches bounds the opening too


def test_sigkill_adaptive_cli_tournament_then_same_command(tmp_path: Path) -> None:
    """``selfplay league tournament --until-sigma`` SIGKILLed mid-run, then the same command:
    the stored matches stay whole, nothing is replayed twice, and the run ends converged."""
    path = tmp_path / "adaptive.db"
    command = [sys.executable, "-m", "selfplay.cli", "league", "tournament", "--game",
               "tictactoe", "--players", "random", "win_or_block", "--until-sigma", "1.0",
               "--db", str(path), "--json"]
    kill_after_matches(command, path, 20)
    with LeagueDB(path, game="tictactoe") as league:
        before = {m.key: m for m in league.matches()}
        assert before
        assert league.replay_ratings() == league.ratings()

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["already_stored"] == len(before)
    with LeagueDB(path, game="tictactoe") as league:
        after = {m.key: m for m in league.matches()}
        assert len(after) == len(before) + result["played"]
        assert all(after[key] == match for key, match in before.items())
        assert league.replay_ratings() == league.ratings()
        assert max(league.rating(n).sigma for n in ("random", "win_or_block")) < 1.0


def test_other_game_settings_are_another_tournament(db: LeagueDB) -> None:
    """Matches played with other game settings (say another game length) are not taken for
    this tournament's: their keys differ; the same settings resume."""
    plain = TournamentConfig(games_per_pair=2, num_envs=4)
    longer = TournamentConfig(games_per_pair=2, num_envs=4, settings="max_steps=9")
    assert plain.tournament_id == "rr:s0:"  # no settings: the id earlier versions stored
    assert longer.tournament_id == "rr:s0::max_steps=9"
    first = run_tournament(db, list(BOTS), policy_factory, game_factory, plain)
    other = run_tournament(db, list(BOTS), policy_factory, game_factory, longer)
    assert first.played == other.played == 6 and other.already_stored == 0
    again = run_tournament(db, list(BOTS), policy_factory, game_factory, longer)
    assert again.played == 0 and again.already_stored == 6
    assert len({m.key for m in db.matches()}) == 12


def test_an_odd_number_of_games_per_pair_spreads_the_extra_first_move() -> None:
    """Guards: game ``k`` put the lower id on seat ``k % 2``, so with an odd count the lower
    id had the extra first move in every pair (with one game per pair, every first move)."""
    from league.tournament import RoundRobin

    ids = list(range(1, 9))
    for games in (1, 3):
        schedule = RoundRobin(ids, TournamentConfig(games_per_pair=games), set())
        specs = [schedule.next() for _ in range(schedule.total)]
        first = [s.a if s.side_a == 0 else s.b for s in specs if s is not None]
        lower_first = sum(1 for s in specs if s is not None and s.side_a == 0)
        assert abs(2 * lower_first - len(first)) <= len(ids)  # about half, not all
        per_pair: dict[tuple[int, int], list[int]] = {}
        for s in specs:
            assert s is not None
            per_pair.setdefault((s.a, s.b), []).append(s.side_a)
        assert all(abs(2 * sum(v) - len(v)) <= 1 for v in per_pair.values())  # alternating


def test_tictactoe_tournament_sides_decide_who_opens(tmp_path: Path) -> None:
    """The family's tournament games let seat 0 open every game, so the side a match gives a
    player is whether it moves first, and the two alternate it. Two copies of a bot that
    plays the first free cell: the opener always wins; on one env, one of them opened both
    games of the pair (the game's own alternation undid the sides')."""
    from games.registry import family_of

    with LeagueDB(tmp_path / "league.db", game="tictactoe") as league:
        for name in ("first_a", "first_b"):
            league.add_player(name, "bot")
        factory = family_of("tictactoe").match_games("tictactoe", {})
        summary = run_tournament(league, ["first_a", "first_b"],
                                 lambda name: BotPolicy("first_legal"), factory,
                                 TournamentConfig(games_per_pair=2, num_envs=1))
        assert summary.played == 2
        outcomes = sorted((m.side_a, m.outcome) for m in league.matches())
    assert outcomes == [(0, 1), (1, -1)]  # a wins when it opens (seat 0), loses otherwise


def test_a_fault_of_the_loading_code_is_raised_not_recorded_as_a_broken_player(
        db: LeagueDB) -> None:
    """Guards: any exception while loading a player (a bug in the loading code, say an
    AttributeError) skipped it with a warning and flagged it broken in the database, so the
    fault looked like the player's file's and every later tournament left it out."""
    db.add_player("net", "checkpoint", path="/somewhere/net.pt")

    def faulty(name: str) -> BotPolicy:
        if name == "net":
            raise AttributeError("'NoneType' object has no attribute 'weights'")
        return policy_factory(name)

    with pytest.raises(AttributeError, match="has no attribute 'weights'"):
        run_tournament(db, [*BOTS, "net"], faulty, game_factory,
                       TournamentConfig(games_per_pair=2, num_envs=4))
    assert db.player("net").broken is None


class _Foregone:
    """Matches whose results are known in advance: ``strong`` wins every game, the others
    draw among themselves (the engine is not what is tested: the adaptive schedule is)."""

    def __init__(self, strong: int) -> None:
        self.strong = strong

    def run(self, next_match: Any, on_result: Any) -> None:
        while (match := next_match()) is not None:
            outcome = (1 if match.a == self.strong else -1 if match.b == self.strong else 0)
            on_result(match, MatchResult(outcome, 1, 0.0))


def test_an_adaptive_tournament_stops_when_a_sigma_stops_falling(db: LeagueDB) -> None:
    """Guards (review): a player whose every game is foregone (the strongest or weakest of
    a field) gains TrueSkill's drift in each game as much as the game teaches; its σ settled
    above --until-sigma and the tournament ran to its 100,000-match cap (a 4-bot microRTS
    tournament ran 47 minutes before it was stopped by hand)."""
    for name in BOTS:
        db.add_player(name, "bot")
    strong = db.player("win_or_block").id
    config = TournamentConfig(until_sigma=1.4, num_envs=4, max_matches=5000)
    summary = run_tournament(db, list(BOTS), policy_factory, game_factory, config,
                             runner=lambda _policies: _Foregone(strong))
    assert summary.sigma_reached is False
    assert summary.stalled_players == ["win_or_block"]
    assert db.rating("win_or_block").sigma > 1.4 > db.rating("first_legal").sigma
    assert summary.played < 1000  # stopped by the stall, not by max_matches
    assert summary.to_json()["stalled_players"] == ["win_or_block"]
