"""Our own agents' games recorded as replays (``selfplay play --record``, ``selfplay league
tournament --record``) against the real engine: every recorded game replays to its recorded
end with the results the command reported, a second recording appends to the folder without
touching it, and a family that cannot record says so in one line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from games.microrts.options import MicroRTSOptions
from games.microrts.orderlog import ReplayWriter
from games.microrts.replays import replay_logs
from games.microrts.teacher_game import TeacherGame
from games.replays import ReplayError, read_manifest, scan, shard_name
from league.db import LeagueDB
from selfplay.league_commands import tournament
from selfplay.play import play

MAP = "basesWorkers8x8"
STEPS = 300
SELFPLAY = [sys.executable, "-m", "selfplay.cli"]


def _untrained(path: Path, game: str, seed: int, *overrides: str) -> Path:
    """An untrained checkpoint of ``game`` (random weights from ``seed``)."""
    import torch

    from games.options import to_mapping
    from games.registry import make_game
    from selfplay.checkpoint import save_checkpoint
    from selfplay.config_files import build_config
    from selfplay.networks import ActorCritic

    config = build_config(game, overrides=list(overrides))
    options = {**config.game.options, **({"num_selfplay_envs": 1} if game == "microrts" else {})}
    made = make_game(game, num_envs=1, seed=0, options=options)
    spec = made.spec
    made.close()
    torch.manual_seed(seed)
    agent = ActorCritic(spec, config.network, config.normalize)
    return save_checkpoint(path, {"config": to_mapping(config), "agent": agent.state_dict()})


@pytest.fixture(scope="module")
def checkpoints(engine_home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two untrained 8x8 checkpoints ``a`` and ``b`` whose games stop after 300 cycles."""
    root = tmp_path_factory.mktemp("agents")
    options = (f"game.options.map={MAP}", f"game.options.max_steps={STEPS}",
               "network.channels=[8]", "network.hidden=[16]")
    return {name: _untrained(root / f"{name}.pt", "microrts", seed, *options)
            for seed, name in enumerate(("a", "b"))}


def recorded_games(folder: Path) -> list[dict[str, Any]]:
    return [game for shard in scan(folder) for game in shard.games]


def replay_all(folder: Path) -> int:
    """Replay every game of ``folder`` through the engine; the games whose replay ended
    otherwise than recorded (length, winner, final board)."""
    games = len(recorded_games(folder))
    logs, maps, max_steps = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
    game = TeacherGame(MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=4,
                                       max_steps=max_steps), 4, logs, seed=0)
    try:
        game.reset()
        steps = 0
        while logs.games_played < games:
            game.step(game.teacher_actions)
            steps += 1
            assert steps < 20 * max_steps
    finally:
        game.close()
    return logs.diverged


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob("shard-*.npz"))}


def test_played_games_replay_and_a_second_recording_appends(checkpoints: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """``play --record`` against an engine bot (staged as a teacher seat) and against another
    checkpoint: the recorded winners are the results ``play`` reported, every game replays to
    its recorded end, and the second recording adds shards after the first's, untouched."""
    folder = tmp_path / "replays"
    vs_bot = play(checkpoints["a"], "workerrush", games=5, seed=1, record=folder,
                  shard_games=2)
    assert vs_bot["record"] == {"folder": str(folder), "games": 5, "shards": 3}
    games = recorded_games(folder)
    assert len(games) == 5 and sorted(read_manifest(folder)) == [shard_name(k) for k in range(3)]
    assert all(sorted(g["players"]) == ["WorkerRush", "a"] for g in games)
    assert all(g["map"] == MAP and g["max_steps"] == STEPS for g in games)
    winners = Counter("draw" if g["winner"] < 0 else g["players"][g["winner"]] for g in games)
    assert (winners["a"], winners["WorkerRush"], winners["draw"]) == (
        vs_bot["wins"], vs_bot["losses"], vs_bot["draws"])
    assert sum(g["players"][0] == "a" for g in games) == vs_bot["sides"][0]["games"]
    assert winners["WorkerRush"] > 0  # a real game, not only time-outs

    before = digests(folder)
    vs_other = play(checkpoints["a"], str(checkpoints["b"]), games=3, seed=2, record=folder,
                    shard_games=2)
    assert vs_other["record"] == {"folder": str(folder), "games": 3, "shards": 2}
    after = digests(folder)
    assert {k: after[k] for k in before} == before  # old shards untouched
    assert sorted(after) == [shard_name(k) for k in range(5)]
    assert sorted(read_manifest(folder)) == sorted(after)
    new = recorded_games(folder)[5:]
    assert all(sorted(g["players"]) == ["a", "b"] for g in new)
    winners = Counter("draw" if g["winner"] < 0 else g["players"][g["winner"]] for g in new)
    assert (winners["a"], winners["b"], winners["draw"]) == (
        vs_other["wins"], vs_other["losses"], vs_other["draws"])
    assert replay_all(folder) == 0
    with pytest.raises(ReplayError, match=f"holds 8x8 games of max_steps {STEPS}; these are "
                       "8x8 games of max_steps 999: record into another folder"):
        ReplayWriter(folder).check((8, 8), 999)  # one game length per folder


def _stored_games(db_path: Path) -> Counter[tuple[str, str, str, int]]:
    """The league's matches as (player on engine side 0, on side 1, winner or draw, length)."""
    out: Counter[tuple[str, str, str, int]] = Counter()
    with LeagueDB(db_path, game="microrts") as db:
        for m in db.matches():
            a, b = db.player(m.player_a).name, db.player(m.player_b).name
            sides = (a, b) if m.side_a == 0 else (b, a)
            winner = "draw" if m.outcome == 0 else a if m.outcome > 0 else b
            out[(*sides, winner, m.length)] += 1
    return out


def _recorded(folder: Path) -> Counter[tuple[str, str, str, int]]:
    return Counter((g["players"][0], g["players"][1],
                    "draw" if g["winner"] < 0 else g["players"][g["winner"]], g["length"])
                   for g in recorded_games(folder))


def test_tournament_records_every_kind_of_match(checkpoints: dict[str, Path],
                                                tmp_path: Path) -> None:
    """A tournament of two checkpoints (policy vs policy), then one of a checkpoint and two
    bots (policy vs bot, bot vs bot) record every match with the players, sides, winner and
    length the league stored, into one folder; every game replays to its recorded end."""
    folder = tmp_path / "league-replays"
    common = dict(games_per_pair=2, until_sigma=None, map_name=MAP, num_envs=2, seed=3,
                  quiet=True, max_steps=STEPS, record=folder, shard_games=4)
    db_path = tmp_path / "league.db"
    policies = tournament("microrts", [str(checkpoints["a"]), str(checkpoints["b"])],
                          str(db_path), **common)  # type: ignore[arg-type]
    assert policies["played"] == 2 and policies["record"]["games"] == 2
    mixed = tournament("microrts", [str(checkpoints["a"]), "workerrush", "lightrush"],
                       str(db_path), **common)  # type: ignore[arg-type]
    assert mixed["played"] == 6 and mixed["record"]["games"] == 6
    assert _recorded(folder) == _stored_games(db_path)
    names = {name for g in recorded_games(folder) for name in g["players"]}
    assert names == {str(checkpoints["a"]), str(checkpoints["b"]), "WorkerRush", "LightRush"}
    assert sum(entry["games"] for entry in read_manifest(folder).values()) == 8
    assert replay_all(folder) == 0


def test_bot_tournament_records_in_one_process(engine_home: Path, tmp_path: Path) -> None:
    """Bots only: recorded through self-play games of bots thinking for their seats; with
    worker processes it is a one-line error before any match."""
    folder = tmp_path / "bots"
    result = tournament("microrts", ["workerrush", "lightrush"], str(tmp_path / "b.db"),
                        games_per_pair=2, until_sigma=None, map_name=MAP, num_envs=2, seed=0,
                        quiet=True, max_steps=STEPS, record=folder)
    assert result["played"] == 2 and result["record"] == {"folder": str(folder), "games": 2,
                                                          "shards": 1}
    assert _recorded(folder) == _stored_games(tmp_path / "b.db")
    assert replay_all(folder) == 0
    proc = subprocess.run([*SELFPLAY, "league", "tournament", "--game", "microrts", "--players",
                           "workerrush", "lightrush", "--processes", "2", "--record",
                           str(tmp_path / "x"), "--db", str(tmp_path / "x.db")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --record plays every game in this process; drop --processes"]


def test_families_that_cannot_record_say_so_in_one_line(tmp_path: Path) -> None:
    """``play --record`` and ``league tournament --record`` of a family without recording:
    one line on stderr, exit code 2, nothing written."""
    checkpoint = _untrained(tmp_path / "ttt.pt", "tictactoe", 0)
    out = tmp_path / "replays"
    commands = (["play", "--checkpoint", str(checkpoint), "--vs", "random", "--games", "2"],
                ["league", "tournament", "--game", "tictactoe", "--players", "random",
                 "win_or_block", "--db", str(tmp_path / "t.db")])
    for command in commands:
        proc = subprocess.run([*SELFPLAY, *command, "--record", str(out), "--json"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "error: tictactoe cannot record its games as replays; drop --record"], proc.stderr
        assert proc.stdout == ""
    assert not out.exists()


def test_recording_game_logs_only_cells_that_can_act(checkpoints: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """Random actions on every cell: only the orders at cells whose unit can act are logged,
    and the games still replay exactly."""
    from games.microrts.adapter import random_legal_actions
    from games.microrts.recording import RecordingGame

    folder = tmp_path / "random"
    game = RecordingGame(MicroRTSOptions(map=MAP, bots=[], num_selfplay_envs=2,
                                         max_steps=120), 2, seed=0)
    rng = np.random.default_rng(0)
    pending = np.zeros(2, np.int64)  # [E] orders of each env's game in progress
    logged = finished = 0
    try:
        game.start_recording(folder, ["x", "y"], shard_games=10)
        batch = game.reset()
        while finished < 4:
            acting = batch.action_mask[..., 0]  # [E, A, HW]
            actions = rng.integers(0, 4, (2, 2, 64, 7))  # garbage on the other cells too
            actions[acting] = random_legal_actions(batch.action_mask, rng)[acting]
            pending += ((actions[..., 0] != 0) & acting).sum((1, 2))
            batch = game.step(actions)
            for e in batch.episodes.env[batch.episodes.seat == 0].tolist():
                logged += int(pending[e])
                pending[e] = 0
                finished += 1
        summary = game.finish_recording()
    finally:
        game.close()
    assert summary == {"folder": str(folder), "games": finished, "shards": 1}
    shard = next(iter(scan(folder)))
    data = np.load(shard.path)
    assert len(data["orders"]) == logged  # nothing from the cells without a unit to act
    for meta in json.loads(data["meta"].tobytes())["games"]:  # env e's seat 0: player e % 2
        assert meta["players"] == (["x", "y"] if meta["seed"][1] % 2 == 0 else ["y", "x"])
    assert replay_all(folder) == 0


def test_a_rerun_of_play_record_appends_other_games(checkpoints: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """Guards: ``--seed`` defaulted to 0, so running ``play --record`` again appended exact
    copies of the games the folder held (deterministic bots), which cloning then learned
    twice; without ``--seed`` a rerun seeds its games by the games already recorded."""
    out = tmp_path / "rec"
    for _ in range(2):
        proc = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(checkpoints["a"]), "--vs",
                               "workerrush", "--games", "2", "--record", str(out), "--json"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    first, second = (np.load(out / shard_name(k)) for k in range(2))
    assert not np.array_equal(first["orders"], second["orders"])
