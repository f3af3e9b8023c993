"""How `selfplay league` names its --players in the league database."""

from __future__ import annotations

from pathlib import Path

import pytest

from league.db import LeagueDB, LeagueError
from selfplay.league_commands import register_player, resolve_player, tournament_settings


def _run_with_checkpoint(root: Path) -> Path:
    (root / "checkpoints").mkdir(parents=True)
    (root / "checkpoints" / "update_0000010.pt").write_bytes(b"weights")
    return root


def test_same_run_name_in_two_folders_gets_two_players(tmp_path: Path) -> None:
    """``expA/run1`` and ``expB/run1`` share the short name ``run1/update_0000010``: the second
    is registered under its full path, not merged into the first (whose results it would
    inherit); registering either again finds the same player."""
    a = _run_with_checkpoint(tmp_path / "expA" / "run1")
    b = _run_with_checkpoint(tmp_path / "expB" / "run1")
    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        name_a, new_a = register_player(db, *resolve_player(str(a), "tictactoe"))
        name_b, new_b = register_player(db, *resolve_player(str(b), "tictactoe"))
        assert new_a and new_b
        assert name_a == "run1/update_0000010"
        assert name_b == str(b.resolve() / "checkpoints" / "update_0000010.pt")
        assert db.player(name_a).path != db.player(name_b).path
        assert register_player(db, *resolve_player(str(b), "tictactoe")) == (name_b, False)
        assert register_player(db, *resolve_player(str(a), "tictactoe")) == (name_a, False)
        assert register_player(db, *resolve_player("Win_Or_Block", "tictactoe")) \
            == ("win_or_block", True)


def test_a_bot_name_taken_by_a_checkpoint_is_an_error(tmp_path: Path) -> None:
    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        db.add_player("random", "checkpoint", path=str(tmp_path / "random.pt"))
        with pytest.raises(LeagueError, match="kind 'checkpoint', not 'bot'"):
            register_player(db, *resolve_player("random", "tictactoe"))


def test_checkpoint_of_another_game_is_skipped_with_that_reason(tmp_path: Path,
                                                               capsys) -> None:
    from selfplay.config_files import build_config
    from selfplay.league_commands import tournament
    from selfplay.train import run_training

    run = tmp_path / "cartpole"
    run_training(build_config("CartPole-v1", overrides=["log.progress=false",
                                                        "log.tensorboard=false"],
                              total_steps=1024), run_dir=run)
    result = tournament("tictactoe", ["random", "win_or_block", str(run)],
                        str(tmp_path / "l.db"), games_per_pair=2, until_sigma=None,
                        map_name=None, num_envs=2, seed=0, quiet=True)
    assert result["played"] == 2 and len(result["skipped_players"]) == 1
    assert "plays CartPole-v1, not tictactoe" in capsys.readouterr().err
    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:  # guards (review): it stayed
        assert {p.name for p in db.players()} == {"random", "win_or_block"}  # as "broken"


def test_a_tournament_that_goes_on_plays_new_games(tmp_path: Path) -> None:
    """Guards (review): the same tournament given more games per pair played its new matches
    from --seed alone, replaying its first games move for move (same lengths, sides and
    outcomes, stored again as new results); the same command still plays the same games."""
    from selfplay.league_commands import tournament

    def games(db_path: Path) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
        by_pair: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        with LeagueDB(db_path) as db:
            for m in sorted(db.matches(), key=lambda m: m.id):
                by_pair.setdefault((m.player_a, m.player_b), []).append(
                    (m.side_a, m.length, m.outcome))
        return by_pair

    runs = []
    for name in ("a", "b"):
        for per_pair in (6, 12):
            tournament("tictactoe", ["random", "win_or_block"], str(tmp_path / f"{name}.db"),
                       per_pair, None, None, 2, 0, quiet=True)
        runs.append(games(tmp_path / f"{name}.db"))
    assert runs[0] == runs[1]  # the same commands, the same games
    (played,) = runs[0].values()
    assert len(played) == 12 and played[6:] != played[:6]


def test_tournament_settings_name_a_game_length_other_than_the_default() -> None:
    assert tournament_settings(None, 2000) == ""  # the game's default: the id of old databases
    assert tournament_settings(2000, 2000) == ""  # the same games, spelled out
    assert tournament_settings(300, 2000) == "max_steps=300"
    assert tournament_settings(300, None) == "max_steps=300"  # a game without a default


def test_a_training_runs_frozen_bots_and_snapshot_files_are_its_players(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: on a training run's database a bot (registered there as a frozen anchor) was
    refused ("give this one another name", impossible for a bot), and a snapshot file named
    by path, or one checkpoint named by two paths, became a second player of the same file."""
    snapshot = _run_with_checkpoint(tmp_path / "run") / "checkpoints" / "update_0000010.pt"
    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        db.add_player("random", "bot", frozen=True)
        db.add_player("run@0000010", "snapshot", path=snapshot.resolve())
        assert register_player(db, *resolve_player("random", "tictactoe")) == ("random", False)
        assert db.player("random").frozen
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        relative = Path("..") / snapshot.relative_to(tmp_path)  # ../run/checkpoints/...
        for spec in (str(snapshot), str(tmp_path / "run"), str(tmp_path / "run" / "checkpoints"),
                     str(relative), "../run"):
            assert register_player(db, *resolve_player(spec, "tictactoe")) == (
                "run@0000010", False), spec
        assert len(db.players()) == 2


@pytest.fixture(scope="module")
def ttt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from selfplay.config_files import build_config
    from selfplay.train import run_training

    run = tmp_path_factory.mktemp("league") / "ttt"
    run_training(build_config("tictactoe", overrides=["log.progress=false",
                                                      "log.tensorboard=false"],
                              total_steps=2048), run_dir=run)
    return run


def test_same_seed_same_games_and_one_checkpoint_is_one_player(ttt_run: Path,
                                                               tmp_path: Path) -> None:
    """Guards: checkpoints sampled from an unseeded generator (the same command and --seed
    gave 367 of 900 other outcomes); one file named twice played itself as two players."""
    import sqlite3

    from selfplay.league_commands import tournament

    checkpoint = sorted((ttt_run / "checkpoints").glob("*.pt"))[-1]
    outcomes = []
    for name in ("a.db", "b.db"):
        tournament("tictactoe", ["random", str(ttt_run)], str(tmp_path / name), 20, None, None,
                   4, 7, quiet=True)
        with sqlite3.connect(tmp_path / name) as conn:
            outcomes.append(conn.execute("SELECT key, outcome FROM matches ORDER BY key")
                            .fetchall())
    assert len(outcomes[0]) == 20 and outcomes[0] == outcomes[1]
    with pytest.raises(LeagueError, match="are the same checkpoint"):
        tournament("tictactoe", [str(checkpoint), str(ttt_run), "random"],
                   str(tmp_path / "c.db"), 2, None, None, 2, 0)
    assert not (tmp_path / "c.db").exists()  # refused before the database is opened


def test_a_failed_tournament_leaves_the_league_as_it_was(ttt_run: Path, tmp_path: Path,
                                                          capsys) -> None:
    """Guards: a typo'd checkpoint path became a permanent "broken" player, and a command
    failing on its input after registering its players left them (and a new database)."""
    from selfplay.league_commands import tournament

    db = tmp_path / "l.db"
    tournament("tictactoe", ["random", "win_or_block"], str(db), 2, None, None, 2, 0,
               quiet=True)
    result = tournament("tictactoe", ["random", "win_or_block", str(tmp_path / "typo.pt")],
                        str(db), 2, None, None, 2, 0, quiet=True)
    assert result["skipped_players"] == [str(tmp_path / "typo.pt")]
    assert "checkpoint" in capsys.readouterr().err
    with LeagueDB(db) as league:
        assert {p.name for p in league.players()} == {"random", "win_or_block"}
    with pytest.raises(LeagueError, match="only 1 of the players load"):
        tournament("tictactoe", ["random", str(tmp_path / "nothing")], str(db), 2, None,
                   None, 2, 0, quiet=True)
    other = tmp_path / "other"  # the same typed path, from another folder: a file there
    (other / "runs").mkdir(parents=True)
    import shutil

    shutil.copy(sorted((ttt_run / "checkpoints").glob("*.pt"))[-1], other / "runs" / "m.pt")
    cwd = Path.cwd()
    try:
        import os

        os.chdir(other)
        tournament("tictactoe", ["random", "runs/m.pt"], str(db), 2, None, None, 2, 0,
                   quiet=True)
        os.chdir(tmp_path)  # runs/m.pt does not exist here: not the league's runs/m.pt
        result = tournament("tictactoe", ["random", "win_or_block", "runs/m.pt"], str(db), 2,
                            None, None, 2, 0, quiet=True)
    finally:
        os.chdir(cwd)
    assert result["skipped_players"] == ["runs/m.pt"]
    with LeagueDB(db) as league:
        assert [p.broken for p in league.players() if p.kind == "checkpoint"] == [None]
    with pytest.raises(Exception, match="processes > 1"):  # after registering the checkpoint
        tournament("tictactoe", ["random", str(ttt_run)], str(db), 2, None, None, 2, 0,
                   quiet=True, processes=2)
    with LeagueDB(db) as league:
        assert {p.name for p in league.players()} == {"random", "win_or_block", "runs/m.pt"}
        assert league.match_count() == 4


def test_the_same_microrts_map_spelled_otherwise_is_the_same_tournament() -> None:
    """Guards: ``--map maps/8x8/basesWorkers8x8.xml``, ``8x8/basesWorkers8x8`` and
    ``basesworkers8x8`` were three tournaments: the same games played and counted again."""
    from games.registry import family_of

    family = family_of("microrts")
    spellings = ["maps/8x8/basesWorkers8x8.xml", "8x8/basesWorkers8x8", "basesworkers8x8",
                 "basesWorkers8x8"]
    assert {family.canonical_map("microrts", m) for m in spellings} == {"basesWorkers8x8"}


def test_leaderboard_text_escapes_control_characters_and_pads_wide_ones() -> None:
    """Guards: a run folder named with a newline split its row, an escape sequence reached the
    terminal, and CJK names shifted the number columns (padding counted code points)."""
    from selfplay.league_commands import format_leaderboard

    row = {"rank": 1, "mu": 25.0, "sigma": 8.0, "conservative": 1.0, "elo": 1200.0,
           "games": 3, "win_rate": 0.5, "broken": None, "frozen": False}
    text = format_leaderboard([{**row, "name": "nl\nfake \x1b[31mRED"},
                               {**row, "name": "日本語のラン", "rank": 2},
                               {**row, "name": "cafe\u0301_run", "rank": 4},  # NFD: é
                               {**row, "name": "anchor-bot", "rank": 3, "frozen": True}])
    lines = text.splitlines()
    assert len(lines) == 7 and "\x1b" not in text and "nl\\nfake \\x1b[31mRED" in lines[2]
    assert lines[6].startswith("(ranked by")  # the legend
    from selfplay.league_commands import _width

    columns = {_width(line[:line.index("25.00")]) for line in lines[2:6]}
    assert columns == {48}  # the same terminal column, wide characters counted twice
    assert lines[5].endswith("anchor")
    assert _width(lines[4][:lines[4].index("25.00")]) == 48  # a combining mark takes none


def test_a_folder_named_like_a_bot_is_the_bot_and_paths_must_be_utf8(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: ``--players random`` beside an empty folder ``random/`` was a checkpoint player
    that did not load; a folder name that is not UTF-8 was a UnicodeEncodeError traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "random").mkdir()
    assert resolve_player("random", "tictactoe") == ("random", "bot", None)
    assert resolve_player("./random", "tictactoe")[1] == "checkpoint"
    with pytest.raises(LeagueError, match=r"'bad\\\\xff': the path is not valid UTF-8"):
        resolve_player("bad\udcff", "tictactoe")


def test_a_lux_game_length_beyond_the_rules_names_the_flag(tmp_path: Path) -> None:
    """Guards: ``--max-steps 5000`` said ``game.options: max_steps must be between 1 and
    1000``, a key the user never set."""
    from games.core import GameError
    from selfplay.league_commands import tournament

    with pytest.raises(GameError, match="--max-steps 5000: Lux games last 1 to 1000"):
        tournament("lux", ["heuristic", "random"], str(tmp_path / "l.db"), games_per_pair=1,
                   until_sigma=None, map_name=None, num_envs=1, seed=0, quiet=True,
                   max_steps=5000)
    assert not (tmp_path / "l.db").exists()


def test_report_refuses_the_databases_rollback_journal_as_its_output(tmp_path: Path) -> None:
    """Guards: ``--out league.db-journal`` was written, and SQLite deleted it (or rolled it
    back into the database) the next time a writer opened the database."""
    from selfplay.league_commands import report

    with LeagueDB(tmp_path / "league.db", game="tictactoe"):
        pass
    with pytest.raises(LeagueError, match="is the league database"):
        report(str(tmp_path / "league.db"), None, str(tmp_path / "league.db-journal"))
    assert not (tmp_path / "league.db-journal").exists()


def test_report_replaces_only_an_earlier_report(tmp_path: Path) -> None:
    """Guards: ``--out`` naming another league's database (or a run's config.yaml) replaced
    it with the report without a word; an earlier report is still replaced."""
    from selfplay.league_commands import report

    with LeagueDB(tmp_path / "league.db", game="tictactoe"), \
            LeagueDB(tmp_path / "other.db", game="tictactoe"):
        pass
    kept = {name: (tmp_path / name).read_bytes() for name in ("other.db",)}
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    kept["config.yaml"] = b"seed: 1\n"
    for name in kept:
        with pytest.raises(LeagueError, match="exists and is not a league report: it is left"):
            report(str(tmp_path / "league.db"), None, str(tmp_path / name))
        assert (tmp_path / name).read_bytes() == kept[name]
    out = tmp_path / "r.html"
    report(str(tmp_path / "league.db"), None, str(out))
    out.write_text(out.read_text().replace("0 matches", "stale"))
    report(str(tmp_path / "league.db"), None, str(out))
    assert "stale" not in out.read_text()
    older = tmp_path / "older.html"  # as earlier versions wrote them, without the mark
    older.write_text('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
                     "<title>League report: tictactoe</title></head></html>")
    report(str(tmp_path / "league.db"), None, str(older))
    assert "0 players, 0 matches" in older.read_text()


def test_leaderboard_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """Guards: ``selfplay league leaderboard | head`` ended with "error: [Errno 32] Broken
    pipe"; a reader that leaves ends the command as 128 + SIGPIPE, without a message."""
    import subprocess
    import sys

    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        for n in range(1500):  # more than a pipe holds
            db.add_player(f"player-{n}", "bot")
    proc = subprocess.Popen([sys.executable, "-m", "selfplay.cli", "league", "leaderboard",
                             "--json", "--db", str(tmp_path / "league.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""


def test_a_bots_other_names_are_the_bot() -> None:
    """The names `selfplay record` and `play` take for a microRTS bot (its Java class's,
    say) are that bot in a tournament too (``randomai`` was refused there)."""
    assert resolve_player("randomai", "microrts") == ("Random", "bot", None)
    assert resolve_player("PassiveAI", "microrts") == ("Passive", "bot", None)
    with pytest.raises(LeagueError, match=r"bots: BS1_NaiveMCTS, .*, Random, "):
        resolve_player("randombot", "microrts")


def test_a_runs_checkpoint_in_its_own_league_is_its_snapshot(tmp_path: Path, capsys) -> None:
    """Guards: a run given to a tournament on its own league became a second player beside
    its snapshot of the same update (same weights, two ratings); now it is that snapshot.
    A checkpoint of another update (other weights) is a player of its own."""
    import torch

    from selfplay.config_files import build_config
    from selfplay.league_commands import tournament
    from selfplay.train import run_training

    run = tmp_path / "ttt"
    run_training(build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=1",
        "checkpoint.every_updates=1"], total_steps=2048), run_dir=run)
    db_path = run / "league.db"
    with LeagueDB(db_path, game="tictactoe") as db:
        before = {p.name for p in db.players()}
    assert {"ttt@0000001", "ttt@0000002"} <= before
    result = tournament("tictactoe", ["random", str(run)], str(db_path), 2, None, None, 2, 0,
                        quiet=True)
    assert {p["name"] for p in result["players"]} == {"random", "ttt@0000002"}
    assert result["other_players"] == len(before) - 2  # win_or_block, ttt@0000001: not shown
    assert "has the weights of the league's snapshot ttt@0000002" in capsys.readouterr().err
    snapshot = next((run / "snapshots").glob("*0000002.pt"))
    with pytest.raises(LeagueError, match=r"--players .*ttt and .*0000002.pt are "
                                          r"one player of this league \(ttt@0000002: the same "
                                          r"weights\); name it once"):
        tournament("tictactoe", ["random", str(run), str(snapshot)], str(db_path), 2, None,
                   None, 2, 0, quiet=True)
    first = run / "checkpoints" / "update_0000001.pt"
    state = torch.load(first, weights_only=True)
    with LeagueDB(db_path, game="tictactoe") as db:
        assert {p.name for p in db.players()} == before
        assert register_player(db, *resolve_player(str(first), "tictactoe"))[0] == "ttt@0000001"
        state["agent"] = {k: v + 1 for k, v in state["agent"].items()}  # other weights
        torch.save(state, tmp_path / "changed.pt")
        name, new = register_player(db, *resolve_player(str(tmp_path / "changed.pt"),
                                                        "tictactoe"))
        assert new and name == str(tmp_path / "changed.pt")


def test_matches_are_listed_as_csv_for_analysis(tmp_path: Path) -> None:
    """``league matches``: every stored match (or one player's) with both names, player a's
    seat and outcome, readable by the csv module; a player the league lacks is named."""
    import csv
    import io

    from selfplay.league_commands import format_matches, matches

    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        a, b, c = (db.add_player(n, "bot") for n in ("a,1", "b", "c"))
        db.record_match(a, b, 1, key="t1/0", side_a=1, length=7)
        db.record_match(b, c, 0, key="t1/1")
        db.record_match(c, a, -1, key="t2/0")
    every = matches(str(tmp_path / "league.db"), None, None)
    assert every["game"] == "tictactoe" and len(every["matches"]) == 3
    rows = list(csv.DictReader(io.StringIO(format_matches(every["matches"]))))
    assert [(r["tournament"], r["player_a"], r["player_b"], r["outcome_a"]) for r in rows] == [
        ("t1", "a,1", "b", "1"), ("t1", "b", "c", "0"), ("t2", "c", "a,1", "-1")]
    assert rows[0]["side_a"] == "1" and rows[0]["length"] == "7"
    mine = matches(str(tmp_path / "league.db"), None, "c")["matches"]
    assert [m["id"] for m in mine] == [2, 3]
    with pytest.raises(LeagueError, match=r"--player 'cc' is not a player of this league "
                                          r"\(did you mean c\?\)"):
        matches(str(tmp_path / "league.db"), None, "cc")
