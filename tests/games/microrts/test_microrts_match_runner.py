"""microRTS match runners (engine bots, policies) and league tournaments of engine bots,
against the real engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from games.core import EngineBot, GameError
from games.matches import MatchResult, MatchSpec
from games.microrts.botmatch import BotGame
from games.microrts.match_runner import BotMatchRunner, PolicyMatchRunner
from league.db import LeagueDB
from league.tournament import TournamentConfig, bot_tournament

BOTS = ["WorkerRush", "LightRush", "Passive"]  # all deterministic scripted bots
MAP = "basesWorkers8x8"


def test_match_maps_sides_to_engine_players() -> None:
    """side_a is player a's engine seat; per-match seeds pass through (no JVM needed)."""
    runner = BotMatchRunner({1: "workerrush", 2: "Passive"}, MAP, max_steps=400, parallel=2)
    assert runner.game_for(MatchSpec("k", 1, 2, 0, 7)) == BotGame("WorkerRush", "Passive", MAP,
                                                                  400, 7)
    assert runner.game_for(MatchSpec("k", 1, 2, 1, 7)) == BotGame("Passive", "WorkerRush", MAP,
                                                                  400, 7)
    with pytest.raises(GameError, match="not a bot"):
        runner.game_for(MatchSpec("k", 1, 3, 0, 7))


def test_round_robin_of_scripted_bots(engine_home, tmp_path: Path) -> None:
    """3 bots, 2 games per pair (both sides): 6 matches, WorkerRush first, Passive last;
    the same command again plays nothing (idempotent match keys)."""
    config = TournamentConfig(games_per_pair=2, map=MAP, num_envs=4)
    with LeagueDB(tmp_path / "league.db", game="microrts") as db:
        summary = bot_tournament(db, "microrts", BOTS, config, max_steps=500)
        assert (summary.played, summary.already_stored, summary.skipped_players) == (6, 0, [])
        assert db.match_count() == 6
        board = [s.name for s in db.leaderboard()]
        assert board == ["WorkerRush", "LightRush", "Passive"]
        ids = {name: db.player(name).id for name in BOTS}
        matches = db.matches()
        assert {m.side_a for m in matches} == {0, 1}
        assert all(m.map == MAP and 0 < m.length <= 500 for m in matches)
        for m in matches:  # the stronger bot wins from either side
            winner = m.player_a if m.outcome == 1 else m.player_b
            assert m.outcome != 0
            loser = m.player_b if winner == m.player_a else m.player_a
            assert BOTS.index(db.player(winner).name) < BOTS.index(db.player(loser).name)
        ratings_before = db.ratings()

        again = bot_tournament(db, "microrts", BOTS, config, max_steps=500)
        assert (again.played, again.already_stored) == (0, 6)
        assert db.match_count() == 6
        assert db.ratings() == ratings_before
        assert ids == {name: db.player(name).id for name in BOTS}


def test_worker_processes_play_the_same_games(engine_home, tmp_path: Path) -> None:
    """processes=2 (one game per spawned worker, a core each for search bots) stores the same
    results as the in-process arena: scripted bots play the same game for a match's seed."""
    config = TournamentConfig(games_per_pair=2, map=MAP, num_envs=4)
    stored = []
    for processes in (1, 2):
        with LeagueDB(tmp_path / f"league{processes}.db", game="microrts") as db:
            summary = bot_tournament(db, "microrts", BOTS, config, max_steps=500,
                                     processes=processes)
            assert summary.played == 6
            stored.append(sorted((m.key, m.side_a, m.outcome, m.length) for m in db.matches()))
    assert stored[0] == stored[1]
    with pytest.raises(GameError, match="parallel must be 1"):
        BotMatchRunner({1: "WorkerRush", 2: "Passive"}, MAP, parallel=4, processes=2)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("command", ["tournament", "record"])
def test_worker_processes_end_when_their_parent_is_killed(engine_home, tmp_path: Path,
                                                          command: str) -> None:
    """SIGKILL a bot tournament or a recorder while its workers are mid-game (two passive
    bots, a game that would last hours): the workers, which ignore stop signals, end on their
    own (the recorder's went on writing shards into the folder a rerun then held)."""
    script = textwrap.dedent(f"""
        from league.db import LeagueDB
        from league.tournament import TournamentConfig, bot_tournament
        if __name__ == "__main__":
            with LeagueDB({str(tmp_path / "l.db")!r}, game="microrts") as db:
                bot_tournament(db, "microrts", ["Passive", "ai.PassiveAI"],
                               TournamentConfig(games_per_pair=4, map="basesWorkers8x8"),
                               max_steps=10**8, processes=2)
        """)
    args = (["-c", script] if command == "tournament" else
            ["-m", "selfplay.cli", "record", "--game", "microrts", "--players", "Passive",
             "ai.PassiveAI", "--maps", "basesWorkers8x8", "--games", "4", "--shard-games", "1",
             "--max-steps", str(10**8), "--out", str(tmp_path / "rec"), "--processes", "2"])
    proc = subprocess.Popen([sys.executable, *args], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 2 and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(3)  # the workers start their JVMs and their games
        workers[:] = _children(proc.pid)
        assert proc.poll() is None and len(workers) >= 2, proc.communicate()[1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_running(w) for w in workers)
    finally:
        if proc.poll() is None:
            proc.kill()
        for w in workers or _children(proc.pid):
            if _running(w):
                os.kill(w, signal.SIGKILL)


def test_adaptive_tournament_stops_at_max_matches(engine_home, tmp_path: Path) -> None:
    """TrueSkill-adaptive mode: the runner keeps pulling as results arrive, and stops at the
    schedule's first ``None`` (here: ``max_matches``)."""
    config = TournamentConfig(until_sigma=0.5, max_matches=7, map=MAP, num_envs=3)
    with LeagueDB(tmp_path / "league.db", game="microrts") as db:
        summary = bot_tournament(db, "microrts", BOTS, config, max_steps=500)
        assert summary.played == 7 and db.match_count() == 7
        assert db.leaderboard()[-1].name == "Passive"


def test_runner_never_pulls_after_none(engine_home) -> None:
    """After ``next_match`` returned ``None`` the runner finishes the games in flight only."""
    runner = BotMatchRunner({1: "WorkerRush", 2: "Passive"}, MAP, max_steps=300, parallel=4)
    queue = [MatchSpec("a", 1, 2, 0, 0), MatchSpec("b", 1, 2, 1, 0), None,
             MatchSpec("never", 1, 2, 0, 0)]
    calls = 0

    def next_match() -> MatchSpec | None:
        nonlocal calls
        calls += 1
        return queue.pop(0)

    results: dict[str, MatchResult] = {}
    runner.run(next_match, lambda m, r: results.__setitem__(m.key, r))
    assert calls == 3
    assert {k: (r.outcome, r.length) for k, r in results.items()} == {"a": (1, 185),
                                                                      "b": (1, 185)}
    assert all(r.duration > 0 for r in results.values())


class _Idle:
    """A network policy stand-in that never acts (no-op at every cell)."""

    def act(self, obs, mask, state):  # type: ignore[no-untyped-def]
        return np.zeros((len(obs), mask.shape[1], 7), np.int64)


def test_mixed_runner_plays_bot_games_in_rounds(engine_home) -> None:
    """Bot-vs-bot matches wait for at most ``num_envs`` of them (then they are played and
    pulling resumes), so an adaptive schedule sees their results early; every pulled match is
    played exactly once, policy matches too."""
    policies = {1: _Idle(), 2: EngineBot("Passive"), 3: EngineBot("WorkerRush")}
    runner = PolicyMatchRunner(policies, {"map": MAP, "max_steps": 60}, num_envs=2)
    bot_pair = [MatchSpec(f"bb{k}", 2, 3, k % 2, 0) for k in range(5)]
    with_policy = [MatchSpec(f"p{k}", 1, 2 + k % 2, k % 2, 0) for k in range(3)]
    queue = [*bot_pair[:3], *with_policy, *bot_pair[3:], None]
    pulls, pulls_at_first_result = 0, None
    results: dict[str, MatchResult] = {}

    def next_match() -> MatchSpec | None:
        nonlocal pulls
        pulls += 1
        return queue.pop(0)

    def on_result(match: MatchSpec, result: MatchResult) -> None:
        nonlocal pulls_at_first_result
        if pulls_at_first_result is None:
            pulls_at_first_result = pulls
        assert match.key not in results
        results[match.key] = result

    runner.run(next_match, on_result)
    assert pulls_at_first_result == 2  # two bot games waiting: played before pulling more
    assert sorted(results) == sorted(m.key for m in bot_pair + with_policy)
    for k in range(5):  # WorkerRush (b) beats Passive (a) from either side within 60 cycles
        assert results[f"bb{k}"].outcome in (-1, 0)


class _BaseWatcher:
    """A no-op policy that notes the cell of its own base in every row it acts for."""

    _OWN, _BASE = 11, 15  # OBS_PLANES: owner_own, type_base

    def __init__(self) -> None:
        self.base_cells: set[int] = set()

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None = None) -> np.ndarray:
        own_base = (obs[:, self._OWN] & obs[:, self._BASE]).reshape(len(obs), -1)
        self.base_cells.update(int(c) for c in own_base.argmax(1))
        return np.zeros((len(obs), own_base.shape[1], 7), np.int64)


def test_checkpoint_matches_play_the_engine_side_scheduled(make_game) -> None:
    """Policy-vs-policy matches (VecGameRunner): player a of a match with ``side_a = s`` plays
    engine player ``s``, also in envs whose seat 0 is engine player 1."""
    from games.matches import VecGameRunner

    made = []

    def factory(num_envs: int, seed: int):  # type: ignore[no-untyped-def]
        made.append(make_game(num_envs, num_selfplay_envs=num_envs, max_steps=4))
        return made[-1]

    a, b = _BaseWatcher(), _BaseWatcher()
    queue = [MatchSpec("m0", 1, 2, 0, 0), MatchSpec("m1", 1, 2, 1, 1)]
    results: list[MatchSpec] = []
    VecGameRunner(factory, {1: a, 2: b}, num_envs=2, seed=0).run(
        lambda: queue.pop(0) if queue else None, lambda m, r: results.append(m))
    assert [m.key for m in results] == ["m0", "m1"]
    assert made[0].players.tolist() == [[0, 1], [1, 0]]  # env 1's seat 0 is engine player 1
    game = factory(2, 0)  # the runner closed its game: the same layout, to find the bases
    start = game.reset()
    base_of = {int(game.players[e, s]): int((start.obs[e, s, 11] & start.obs[e, s, 15])
                                            .reshape(-1).argmax())
               for e in range(2) for s in range(2)}
    assert base_of[0] != base_of[1]
    assert a.base_cells == {base_of[0], base_of[1]}  # a played both engine sides
    assert b.base_cells == {base_of[0], base_of[1]}


def test_policy_matches_on_maps_of_several_sizes(engine_home) -> None:
    """A training's rating games with maps of several sizes (the rater passes the run's
    options): policy matches are played on the padded batch, every pulled match once."""
    policies = {1: _Idle(), 2: _Idle(), 3: EngineBot("WorkerRush")}
    options = {"maps": ["basesWorkers8x8A", "NoWhereToRun9x8"], "max_steps": 40}
    runner = PolicyMatchRunner(policies, options, num_envs=4)  # each size in both halves
    queue = [MatchSpec(f"m{k}", 1, 2 + k % 2, k % 2, 0) for k in range(8)] + [None]
    results: dict[str, MatchResult] = {}
    runner.run(lambda: queue.pop(0), lambda m, r: results.__setitem__(m.key, r))
    assert sorted(results) == [f"m{k}" for k in range(8)]


def test_bot_games_play_the_trainings_maps_and_length() -> None:
    """Guards: bot-vs-bot games where the conditions named no map (a league run's anchor
    calibration) were played on basesWorkers16x16A for 5000 steps whatever the run trained
    on; a maps list now gives each match the map its seed picks (no JVM needed)."""
    from games.family import MatchConditions
    from games.registry import family_of

    family = family_of("microrts")
    bots = {1: family.opponent("microrts", "WorkerRush", 0),
            2: family.opponent("microrts", "LightRush", 0)}
    one = family.match_runner("microrts", bots, MatchConditions(
        options={"map": MAP, "max_steps": 700}, num_envs=2, seed=0), None)
    assert isinstance(one, BotMatchRunner)
    assert one.map_names == ["basesWorkers8x8"] and one.max_steps == 700
    maps = ["basesWorkers8x8A", "NoWhereToRun9x8"]
    mixed = family.match_runner("microrts", bots, MatchConditions(
        options={"maps": maps}, num_envs=2, seed=0), None)
    assert isinstance(mixed, BotMatchRunner)
    # games 2j and 2j+1 (the two sides) on map j: every map from both sides
    played = [(mixed.game_for(MatchSpec(f"k{k}", 1, 2, k % 2, 99, k)).map, k % 2)
              for k in range(4)]
    assert played == [(maps[0], 0), (maps[0], 1), (maps[1], 0), (maps[1], 1)]
    named = family.match_runner("microrts", bots, MatchConditions(
        options={"maps": maps}, num_envs=2, seed=0, map_name="basesWorkers10x10"), None)
    assert isinstance(named, BotMatchRunner) and named.map_names == ["basesWorkers10x10"]


def test_rating_games_cover_every_map_of_a_maps_list() -> None:
    """Guards: with league.eval_envs below two per map the rating games left the last maps
    of a training's maps list unplayed (all on the first with eval_envs 2)."""
    maps = ["basesWorkers8x8A", "NoWhereToRun9x8", "basesWorkers16x16A"]
    runner = PolicyMatchRunner({}, {"maps": maps}, num_envs=2)
    assert runner.num_envs == 6
    from games.microrts.options import env_layout

    # a training's map_weights ([3, 1, 1] left the third map unrated)
    weighted = PolicyMatchRunner({}, {"maps": maps, "map_weights": [3, 1, 1]}, num_envs=2)
    layout = env_layout(weighted.match_options(), 2 * weighted.num_envs)
    assert set(layout.maps) == {0, 1, 2}
