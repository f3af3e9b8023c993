"""Teachers, recording and replays against the real engine: bot orders converted to GridNet
and back, recorded games replayed to the same end, labels legal under the masks, corrupt
shards skipped, bad replay folders refused, a killed recorder resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from games.core import GameError, SupportsReplayPosition, SupportsStudents, SupportsTeachers
from games.family import Teachers
from games.microrts.bots import make_bot, resolve_bot
from games.microrts.options import OBS_PLANES, MicroRTSOptions
from games.microrts.orderlog import ReplayWriter
from games.microrts.orders import order_list, orders_to_rows, rows_to_orders
from games.microrts.recorder import RecordPlan, check_plan, check_resumed_plan, record
from games.microrts.replays import ReplayLogs, replay_logs
from games.microrts.teacher_game import LiveBots, TeacherGame, pair_schedule
from games.registry import family_of
from games.replays import (
    MANIFEST,
    CorruptShard,
    ReplayError,
    read_manifest,
    read_shard,
    scan,
    shard_name,
)

MAP = "basesWorkers8x8"
PLAYERS = ("WorkerRush", "LightRush", "CoacAI")


@pytest.fixture(scope="module")
def recorded(engine_home, tmp_path_factory) -> Path:
    """12 games of three bots on 8x8, two shards."""
    folder = tmp_path_factory.mktemp("replays")
    summary = record(RecordPlan(PLAYERS, (MAP,), games=12, shard_games=6, max_steps=800,
                                seed=3, parallel=6), folder)
    assert summary["recorded"] == 12
    return folder


def replay_until(game: TeacherGame, logs: ReplayLogs, games: int,
                 check=None) -> int:  # type: ignore[no-untyped-def]
    steps = 0
    game.reset()
    while logs.games_played < games:
        if check is not None:
            check(game)
        game.step(game.teacher_actions)
        steps += 1
        assert steps < 20_000
    return steps


def test_bot_orders_survive_gridnet_and_back(make_game) -> None:
    """Every order of CoacAI and LightRush over a game, converted to GridNet rows and decoded
    by the engine, is the same order."""
    game = make_game(2, map=MAP, num_selfplay_envs=2, bots=[], max_steps=400)
    game.reset()
    engine = game._engine  # noqa: SLF001 - the Java side is the point here
    bots = [make_bot(resolve_bot("CoacAI"), engine.utt), make_bot(resolve_bot("LightRush"),
                                                                 engine.utt)]
    checked = 0
    for _ in range(300):
        state = engine.game_state(0)
        for player, bot in enumerate(bots):
            action = bot.getAction(player, state)
            rows = orders_to_rows(action, game.width)
            again = rows_to_orders(rows, state, engine.utt, player)
            assert order_list(again) == order_list(action)
            checked += len(rows)
        game.step(np.zeros((2, 2, 64, 7), np.int64))
    assert checked > 100


def test_recorded_games_replay_to_their_recorded_end(recorded: Path) -> None:
    """Each replayed game ends on the recorded step with the recorded winner and final
    board (checked by the source: ``diverged``), also seen rotated and through fog of war;
    every recorded order of a game comes back as a label legal under the masks."""
    shards = {p.name: read_shard(p) for p in recorded.glob("shard-*.npz")}

    def recorded_orders(ref) -> int:  # type: ignore[no-untyped-def]
        offsets = shards[ref.shard.name].arrays["offsets"]
        return int(offsets[ref.index + 1] - offsets[ref.index])

    for extra in ({}, {"rotate_player1": True, "partial_obs": True}):
        logs, maps, max_steps = replay_logs(recorded, [], False, False, 0.0, 1, (8, 8))
        options = MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=4,
                                  max_steps=max_steps, **extra)
        game = TeacherGame(options, 4, logs, seed=0)
        labels = np.zeros(4, np.int64)
        compared = 0
        try:
            batch = game.reset()
            while logs.games_played < 12:
                kind = game.teacher_actions[..., 0]  # [E, A, HW]
                e, s, c = np.nonzero(kind)
                assert batch.action_mask[e, s, c, kind[e, s, c]].all()  # legal labels
                np.add.at(labels, e, 1)
                playing = [x[0] if x is not None else None for x in logs.current]
                batch = game.step(game.teacher_actions)
                for env in np.unique(batch.episodes.env):
                    assert labels[env] == recorded_orders(playing[env])
                    labels[env] = 0
                    compared += 1
        finally:
            game.close()
        assert logs.diverged == 0
        assert compared >= 12


def test_replay_stream_resumes_at_its_position(recorded: Path) -> None:
    """A stream resumed from its saved position draws the same games next, and the steps
    already played of the games in progress come back unlabelled."""
    def make() -> TeacherGame:
        game = family_of("microrts").teacher_game(
            "microrts", Teachers(replays=recorded, validation_share=0.0), 3, 5,
            {"map": MAP, "max_steps": 800})
        assert isinstance(game, SupportsReplayPosition) and isinstance(game, SupportsTeachers)
        return game  # type: ignore[return-value]

    def draws(game: TeacherGame, steps: int) -> list[tuple[str, int]]:
        """The games the envs start, in the order they are drawn."""
        logs = game.logs  # type: ignore[attr-defined]
        seen = [x[0] for x in logs.current]
        out = []
        for _ in range(steps):
            game.step(game.teacher_actions)
            for e, entry in enumerate(logs.current):
                if entry[0] is not seen[e]:
                    out.append((entry[0].shard.name, entry[0].index))
                    seen[e] = entry[0]
        return out

    game = make()
    game.reset()
    for _ in range(150):
        game.step(game.teacher_actions)
    position = game.replay_position()
    json.dumps(position)  # plain values, for a checkpoint
    steps = np.array(position["steps"])
    assert steps.min() > 0
    uninterrupted = draws(game, 600)
    game.close()

    resumed = make()
    resumed.resume_at(position)
    assert not resumed.imitate.any()  # every env replays a game already learned from
    assert [(x[0].shard.name, x[0].index) for x in resumed.logs.current] == [
        tuple(x) for x in position["current"]]
    for _ in range(50):
        resumed.step(resumed.teacher_actions)
        labelled = resumed.game_step >= steps
        assert (resumed.imitate.any(1) == labelled).all()  # off before, back on after
    later = draws(resumed, 550)
    resumed.close()
    assert later and later == uninterrupted[:len(later)]


def test_live_teachers_play_only_pairings_with_an_imitated_side() -> None:
    """Live cloning wasted most engine steps on games nobody imitated: with --imitate, every
    env's game has an imitated side, and the imitated bot meets every teacher, itself
    included, from both sides."""
    assert pair_schedule(["A", "B", "C"], ["B"]) == [
        ("A", "B"), ("B", "A"), ("B", "B"), ("B", "B"), ("B", "C"), ("C", "B")]
    assert len(pair_schedule(["A", "B", "C"])) == 12  # no imitation: every pairing
    bots = LiveBots(["CoacAI", "WorkerRush", "LightRush"], imitate=["coacai"], seed=1)
    games = [bots.schedule(e, 0) for e in range(12)]
    assert all("CoacAI" in pair for pair in games)
    assert {pair for pair in games} == {("CoacAI", "CoacAI"), ("CoacAI", "WorkerRush"),
                                        ("WorkerRush", "CoacAI"), ("CoacAI", "LightRush"),
                                        ("LightRush", "CoacAI")}


def test_live_teachers_play_every_pairing_and_validate_on_other_games() -> None:
    """Guards: env ``e`` played pair ``e`` for ever, so with fewer envs than sides some
    pairings were never played (16 envs, 4 bots: LightRush never met WorkerRush); the
    deterministic bots played the validation games exactly as the training games (every
    validation position was a training position)."""
    from dataclasses import replace

    bots = LiveBots(["CoacAI", "WorkerRush", "LightRush"], seed=1)
    family = family_of("microrts")
    teachers = Teachers(bots=("WorkerRush", "LightRush"))
    options = {"map": MAP, "max_steps": 300}
    train = family.teacher_game("microrts", teachers, 4, 0, options)
    held_out = family.teacher_game("microrts", replace(teachers, held_out=True), 4, 10007,
                                   options)
    game = TeacherGame(MicroRTSOptions(map=MAP, bots=[], num_selfplay_envs=4, max_steps=300),
                       4, bots, seed=1)
    try:
        game.reset()
        assert len(bots.pairs) == 12
        assert {bots.schedule(e, g) for e in range(4) for g in range(3)} == set(bots.pairs)
        a, b = train.reset(seed=0), held_out.reset(seed=10007)
        seen, repeated = set(), 0
        for _ in range(60):
            seen.update(a.obs[e].tobytes() for e in range(4))
            repeated += sum(b.obs[e].tobytes() in seen for e in range(4))
            a, b = train.step(train.teacher_actions), held_out.step(held_out.teacher_actions)
        assert repeated < 60, repeated  # of 240 validation positions (was 240)
    finally:
        for g in (game, train, held_out):
            g.close()


def test_live_teachers_label_legal_actions_and_imitate_by_name(make_game) -> None:
    bots = LiveBots(["CoacAI", "WorkerRush"], imitate=["coacai"], seed=1)
    game = TeacherGame(MicroRTSOptions(map=MAP, bots=[], num_selfplay_envs=4, max_steps=300),
                       4, bots, seed=1)
    try:
        batch = game.reset()
        ordered = 0
        for _ in range(200):
            kind = game.teacher_actions[..., 0]
            e, s, c = np.nonzero(kind)
            assert batch.action_mask[e, s, c, kind[e, s, c]].all()
            ordered += len(e)
            for env in range(4):
                for seat in range(2):
                    name = bots.env_players[env][int(game.players[env, seat])]
                    assert game.imitate[env, seat] == (name == "CoacAI")
            batch = game.step(np.zeros_like(game.teacher_actions))
        assert ordered > 50
    finally:
        game.close()


def test_students_play_their_seats_while_the_bots_go_on_labelling_them(engine_home) -> None:
    """DAgger in the engine: seat 0 of every env is the learner's (here it only ever says
    no-op), seat 1 stays WorkerRush's. Seat 0's base never trains a worker although its
    labels keep ordering one; seat 1's army grows; every label stays legal."""
    bots = LiveBots(["WorkerRush"], seed=3)
    game = TeacherGame(MicroRTSOptions(map=MAP, bots=[], num_selfplay_envs=2, max_steps=300),
                       2, bots, seed=3)
    own = OBS_PLANES.index("owner_own")
    try:
        assert isinstance(game, SupportsStudents)
        batch = game.reset()
        start = batch.obs[:, :, own].reshape(2, 2, -1).sum(-1)
        game.let_students_play(np.array([[True, False], [True, False]]))
        produce_labels = 0
        for _ in range(100):
            kind = game.teacher_actions[..., 0]
            e, s, c = np.nonzero(kind)
            assert batch.action_mask[e, s, c, kind[e, s, c]].all()
            assert game.imitate.all()
            produce_labels += int((kind[:, 0] == 4).sum())
            batch = game.step(np.zeros_like(game.teacher_actions))
            assert not batch.terminated.any()
        units = batch.obs[:, :, own].reshape(2, 2, -1).sum(-1)
        assert (units[:, 0] <= start[:, 0]).all()  # the learner's no-ops built nothing
        assert (units[:, 1] >= start[:, 1] + 2).all()  # WorkerRush trained workers
        assert produce_labels >= 4  # while its labels at seat 0 kept asking for them
    finally:
        game.close()


def test_replayed_games_refuse_students(recorded: Path) -> None:
    game = family_of("microrts").teacher_game(
        "microrts", Teachers(replays=recorded, validation_share=0.0), 2, 5,
        {"map": MAP, "max_steps": 800})
    try:
        game.let_students_play(np.zeros((2, 2), bool))  # nobody: nothing to refuse
        with pytest.raises(GameError, match="replayed games follow their record"):
            game.let_students_play(np.ones((2, 2), bool))
    finally:
        game.close()


def test_an_imitated_player_absent_from_a_share_is_one_line(recorded: Path) -> None:
    """Guards: a player of the folder absent from the held-out share validated on nothing
    (val/labelled_cells 0, no word); absent from the training share, trained on nothing."""
    from games.microrts.replays import select_games

    held = select_games(recorded, [], False, True, 0.05, (8, 8))
    assert len(held) == 1
    playing = {name.lower() for name in held[0].meta["players"]}
    absent = next(p.lower() for p in PLAYERS if p.lower() not in playing)
    with pytest.raises(ReplayError, match=f"--imitate {absent}: no game of .*'s held-out share "
                                          r"\(1 games\) has them, so there is nothing to "
                                          "validate on"):
        replay_logs(recorded, [absent], False, True, 0.05, 0, (8, 8))
    replay_logs(recorded, [absent], False, False, 0.05, 0, (8, 8))  # the training share has


def test_a_shard_damaged_since_the_checkpoint_loses_only_its_own_games(
        engine_home: Path, tmp_path: Path) -> None:
    """Guards: a shard read before the checkpoint and unreadable at the resume moved the
    stream's cursor past the next shard, never read that epoch."""
    folder = tmp_path / "three"
    record(RecordPlan(PLAYERS, (MAP,), games=6, shard_games=2, max_steps=300, seed=5,
                      parallel=6), folder)
    logs = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))[0]
    first, _ = logs._next_game(MAP)  # one game of the first shard read, one queued
    position = logs.position(np.zeros(0, np.int64))
    order = position["maps"][MAP]["order"]  # type: ignore[index]
    assert len(order) == 3 and first.shard.name == order[0]
    (folder / order[0]).write_bytes(b"damaged")
    resumed = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))[0]
    resumed.restore(position)
    assert resumed._next_game(MAP)[0].shard.name == order[1]


def test_bad_replay_input_is_one_line(recorded: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReplayError, match="holds no shards"):
        replay_logs(empty, [], False, False, 0.0, 0, (8, 8))
    with pytest.raises(ReplayError, match="no such player in .*its players: coacai"):
        replay_logs(recorded, ["mayari"], False, False, 0.0, 0, (8, 8))
    with pytest.raises(ReplayError, match="holds 8x8 games .* this run plays 16x16 \\(--set "
                                          "game.options.map=basesWorkers8x8 clones on the"):
        replay_logs(recorded, [], False, False, 0.0, 0, (16, 16))
    other = tmp_path / "other"
    other.mkdir()
    data = np.load(recorded / shard_name(0))
    meta = json.loads(data["meta"].tobytes())
    for key, value, pattern in (("version", 99, "format version 99"),
                                ("engine", {"microrts_sdist_sha256": "f00"},
                                 "engine files f00"),
                                ("engine", {**meta["engine"], "unit_type_table": "finetuned"},
                                 "the engine's unit_type_table 'finetuned'; this selfplay "
                                 "plays 'original'")):
        np.savez_compressed(other / shard_name(0), orders=data["orders"],
                            offsets=data["offsets"],
                            meta=np.frombuffer(json.dumps({**meta, key: value}).encode(),
                                               np.uint8))
        with pytest.raises(ReplayError, match=pattern):
            replay_logs(other, [], False, False, 0.0, 0, (8, 8))
    drawn = tmp_path / "drawn"  # every game a draw: --winners-only has nothing to imitate
    drawn.mkdir()
    games = [{**game, "winner": -1} for game in meta["games"]]
    np.savez_compressed(drawn / shard_name(0), orders=data["orders"], offsets=data["offsets"],
                        meta=np.frombuffer(json.dumps({**meta, "games": games}).encode(),
                                           np.uint8))
    with pytest.raises(ReplayError, match="--winners-only: no game of .* training share has a "
                                          "winner"):
        replay_logs(drawn, [], True, False, 0.0, 0, (8, 8))
    assert replay_logs(drawn, [], False, False, 0.0, 0, (8, 8))
    with pytest.raises(Exception, match="--winners-only needs replays"):
        family_of("microrts").teacher_game("microrts", Teachers(bots=("CoacAI",),
                                                                winners_only=True),
                                           2, 0, {"map": MAP})


def test_other_games_and_malformed_metadata_are_one_line(recorded: Path,
                                                        tmp_path: Path) -> None:
    """A shard of another game names that game (not an engine hash it lacks); a game whose
    metadata misses a key names the shard and the key."""
    data = np.load(recorded / shard_name(0))
    meta = json.loads(data["meta"].tobytes())
    cases = (({**meta, "game": "lux", "engine": {"source": "kaggle"}}, "games of 'lux'"),
             ({**meta, "games": [{k: v for k, v in g.items() if k != "height"}
                                 for g in meta["games"]]},
              "game 0's metadata is malformed .*height"),
             ({**meta, "games": [{**g, "players": 3} for g in meta["games"]]},
              "game 0's metadata is malformed .*players must be two names"))
    for k, (changed, pattern) in enumerate(cases):
        folder = tmp_path / f"case{k}"
        folder.mkdir()
        np.savez_compressed(folder / shard_name(0), orders=data["orders"],
                            offsets=data["offsets"],
                            meta=np.frombuffer(json.dumps(changed).encode(), np.uint8))
        with pytest.raises(ReplayError, match=pattern) as caught:
            replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
        assert str(folder / shard_name(0)) in str(caught.value)
        assert "\n" not in str(caught.value)


def test_a_shard_without_its_orders_is_skipped_with_a_warning(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shard whose metadata reads but which holds no order arrays (not written by
    ``selfplay record``) is skipped when the stream reaches it, never a crash."""
    folder = tmp_path / "no-orders"
    shutil.copytree(recorded, folder)
    with np.load(recorded / shard_name(1)) as shard:
        np.savez_compressed(folder / shard_name(1), meta=shard["meta"])
    logs, maps, steps = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
    game = TeacherGame(MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=2,
                                       max_steps=steps), 2, logs, seed=0)
    try:
        replay_until(game, logs, 8)
        played = {x[0].shard.name for x in logs.current if x is not None}
    finally:
        game.close()
    err = capsys.readouterr().err
    assert f"{shard_name(1)} lacks its arrays (orders, offsets)" in err
    assert "6 games lost" in err
    assert played == {shard_name(0)}


def test_played_games_never_join_a_planned_recording_or_malformed_games(
        recorded: Path, tmp_path: Path) -> None:
    """`play --record` / tournament `--record` (:class:`ReplayWriter`) refuse, in one line and
    before changing anything: a `selfplay record` folder (its rerun would count the games
    as its own shards) and a folder whose games' metadata is malformed."""
    with pytest.raises(ReplayError, match="holds a recording of `selfplay record`"):
        ReplayWriter(recorded)
    folder = tmp_path / "malformed"
    folder.mkdir()
    data = np.load(recorded / shard_name(0))
    meta = json.loads(data["meta"].tobytes())
    meta["games"][1]["height"] = None
    np.savez_compressed(folder / shard_name(0), orders=data["orders"], offsets=data["offsets"],
                        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    with pytest.raises(ReplayError, match="game 1's metadata is malformed") as caught:
        ReplayWriter(folder)
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in folder.iterdir()) == [shard_name(0)]


def test_mangled_zip_headers_are_corrupt_shards(recorded: Path, tmp_path: Path) -> None:
    """Bit flips in a shard's zip directory (an unknown compression method, the encryption
    flag) are a corrupt shard, skipped with a warning, as a truncated file is."""
    original = (recorded / shard_name(0)).read_bytes()
    central = original.index(b"PK\x01\x02")  # the first central directory entry
    for offset, value, name in ((10, 99, "method"), (8, 1, "encrypted")):
        data = bytearray(original)
        data[central + offset] = value
        path = tmp_path / name / shard_name(0)
        path.parent.mkdir()
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptShard, match=f"corrupt or truncated replay shard {path}"):
            read_shard(path)
        with pytest.raises(ReplayError, match="holds no readable shard"):
            scan(path.parent, warn=False)
    # bytes that are no zip at all: numpy's pickle refusal said "If you trust the file..."
    for name, data in (("noise", bytes(range(256)) * 8), ("empty", b"")):
        path = tmp_path / name / shard_name(0)
        path.parent.mkdir()
        path.write_bytes(data)
        what = "an empty file" if name == "empty" else "not an .npz \\(zip\\) archive"
        with pytest.raises(CorruptShard, match=f"replay shard {path}: {what}$"):
            read_shard(path)


def test_a_kill_between_a_shard_and_the_manifest_keeps_or_records_it_again(
        recorded: Path, tmp_path: Path) -> None:
    """A recorder killed after writing a shard and before listing it: a readable shard is
    kept (and listed), a torn one is recorded again, to the same games; nothing is played
    twice."""
    plan = RecordPlan(PLAYERS, (MAP,), games=12, shard_games=6, max_steps=800, seed=3,
                      parallel=6)
    listed = read_manifest(recorded)

    def unlisted_copy(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(recorded, folder)
        (folder / MANIFEST).write_text(json.dumps(listed[shard_name(0)]) + "\n")
        return folder

    kept = unlisted_copy("kept")
    summary = record(plan, kept)
    assert (summary["recorded"], summary["kept"]) == (0, 12)
    assert read_manifest(kept) == listed

    torn = unlisted_copy("torn")
    whole = (torn / shard_name(1)).read_bytes()
    (torn / shard_name(1)).write_bytes(whole[: len(whole) // 2])
    summary = record(plan, torn)
    assert (summary["recorded"], summary["kept"]) == (6, 6)
    assert sorted(read_manifest(torn)) == [shard_name(0), shard_name(1)]
    again, before = read_shard(torn / shard_name(1)), read_shard(recorded / shard_name(1))
    assert again.games == before.games
    for key in ("orders", "offsets"):
        np.testing.assert_array_equal(again.arrays[key], before.arrays[key])


def test_recording_into_a_folder_of_other_shards_is_refused(recorded: Path,
                                                             tmp_path: Path) -> None:
    """Shards that no plan of `selfplay record` started (a `play --record` folder, a Kaggle
    import) are never counted as a recording's own."""
    folder = tmp_path / "foreign"
    shutil.copytree(recorded, folder)
    (folder / "plan.json").unlink()
    plan = RecordPlan(PLAYERS, (MAP,), games=12, shard_games=6, max_steps=800, seed=3,
                      parallel=6)
    with pytest.raises(GameError, match="did not start there \\(no plan.json\\)"):
        record(plan, folder)
    assert not (folder / "plan.json").exists()


def test_corrupt_shard_is_skipped_with_a_warning(recorded: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A shard whose order log is damaged (its metadata still reads) is skipped when the
    stream reaches it, with a warning naming it and the games lost; training goes on with
    the other shard's games."""
    folder = tmp_path / "damaged"
    folder.mkdir()
    for name in (shard_name(0), MANIFEST):
        (folder / name).write_bytes((recorded / name).read_bytes())
    with np.load(recorded / shard_name(1)) as shard:  # stored, not deflated: bytes to flip
        np.savez(folder / shard_name(1), **{key: shard[key] for key in shard.files})
    data = bytearray((folder / shard_name(1)).read_bytes())
    at = data.index(b"\x93NUMPY", data.index(b"orders.npy"))
    data[at + 200] ^= 0xFF
    (folder / shard_name(1)).write_bytes(bytes(data))
    logs, maps, steps = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
    assert capsys.readouterr().err == ""  # the metadata reads: the scan keeps the shard
    game = TeacherGame(MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=2,
                                       max_steps=steps), 2, logs, seed=0)
    try:
        replay_until(game, logs, 8)
        played = {x[0].shard.name for x in logs.current if x is not None}
    finally:
        game.close()
    err = capsys.readouterr().err
    assert f"{shard_name(1)}" in err and "6 games lost" in err
    assert err.count("warning:") == 1  # once: never read again
    assert logs.diverged == 0
    assert played == {shard_name(0)}


def test_openings_make_deterministic_bots_play_different_games(engine_home,
                                                              tmp_path: Path) -> None:
    """Random openings of up to 40 cycles: deterministic bots no longer repeat one game,
    the games still replay exactly, and no opening cycle is a label."""
    plan = RecordPlan(("WorkerRush", "LightRush"), (MAP,), games=12, shard_games=12,
                      max_steps=800, seed=1, parallel=6, opening=40)
    record(plan, tmp_path / "open")
    metas = read_shard(tmp_path / "open" / shard_name(0), arrays=False).games
    assert len({(g["length"], g["final"]) for g in metas}) >= 9
    assert len({g["opening"] for g in metas}) >= 6
    logs, maps, steps = replay_logs(tmp_path / "open", [], False, False, 0.0, 0, (8, 8))
    game = TeacherGame(MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=3,
                                       max_steps=steps), 3, logs, seed=0)
    try:
        game.reset()
        while logs.games_played < 12:
            opening = np.array([x[0].meta["opening"] for x in logs.current])
            assert (game.imitate.any(1) == (game.game_step >= opening)).all()
            game.step(game.teacher_actions)
    finally:
        game.close()
    assert logs.diverged == 0
    with pytest.raises(GameError, match=r"another plan \(shard_games 12 -> 6\)"):
        record(RecordPlan(plan.players, plan.maps, 12, 6, 800, 1, 6, 40), tmp_path / "open")


def test_a_focused_recording_plays_only_the_focused_players_pairings(tmp_path: Path) -> None:
    """``selfplay record --focus``: a folder for cloning one teacher holds only its games,
    both sides of each pairing; a focus outside the players is refused; folders recorded
    before the option existed resume, and a changed focus is refused as another plan."""
    plan = check_plan(RecordPlan(("coacai", "workerrush", "lightrush"), (MAP,), games=8,
                                 focus=("workerrush",)))
    assert plan.focus == ("WorkerRush",)
    assert plan.pairings() == [("CoacAI", "WorkerRush"), ("WorkerRush", "CoacAI"),
                               ("WorkerRush", "LightRush"), ("LightRush", "WorkerRush")]
    assert len(check_plan(RecordPlan(plan.players, (MAP,), games=8)).pairings()) == 6
    with pytest.raises(GameError, match="--focus Mayari is not among the players"):
        check_plan(RecordPlan(plan.players, (MAP,), games=8, focus=("mayari",)))
    unfocused = RecordPlan(plan.players, plan.maps, 8)
    check_resumed_plan(tmp_path, unfocused)
    assert "focus" not in json.loads((tmp_path / "plan.json").read_text())  # as before
    check_resumed_plan(tmp_path, unfocused)
    with pytest.raises(GameError, match=r"another plan \(focus None -> \['WorkerRush'\]\)"):
        check_resumed_plan(tmp_path, plan)


@pytest.mark.slow  # a recorder killed and run again: ~19 s (make bench)
def test_killed_recorder_resumes_without_loss_or_duplicates(engine_home, tmp_path: Path
                                                            ) -> None:
    out = tmp_path / "rec"
    command = [sys.executable, "-m", "selfplay.cli", "record", "--game", "microrts",
               "--players", "WorkerRush", "LightRush", "--maps", MAP, "--games", "24",
               "--shard-games", "3", "--max-steps", "600", "--out", str(out), "--json"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 120
    while not (out / shard_name(1)).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.name for p in out.glob("shard-*.npz")}
    assert 2 <= len(before) < 8
    # what a kill in the middle of an atomic write leaves (the kill above may or may not)
    (out / ".manifest.jsonl.torn.tmp").write_bytes(b'{"shard": "shard-0000')
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["recorded"] + summary["kept"] == 24
    assert summary["kept"] >= 3 * (len(before) - 1)
    manifest = read_manifest(out)
    assert sorted(manifest) == [shard_name(k) for k in range(8)]
    assert sum(entry["games"] for entry in manifest.values()) == 24
    assert sorted(p.name for p in out.glob("shard-*.npz")) == sorted(manifest)
    assert not list(out.glob(".*.tmp"))


@pytest.mark.filterwarnings("error:The given NumPy array is not writable")  # replayed arrays
def test_cloning_recorded_games_learns_and_resumes_in_place(recorded: Path,
                                                            tmp_path: Path) -> None:
    """BC on the recorded 8x8 games: the cloning loss falls and the action-type accuracy
    rises; a run resumed from its checkpoint continues at its place in the replays; PPO
    starts from the clone bit-exactly."""
    import torch

    from selfplay.bc import build_cloner
    from selfplay.config_files import build_config
    from selfplay.ppo import Trainer
    from selfplay.train import build_trainer

    overrides = ["log.progress=false", "log.tensorboard=false", f"game.options.map={MAP}",
                 "network.channels=[16,32]", "network.hidden=[32]", f"bc.replays={recorded}",
                 "bc.num_envs=4", "bc.num_steps=64", "bc.epochs=2", "bc.minibatches=2",
                 "bc.learning_rate=1e-3", "bc.validate_every=0", "bc.validation_share=0.01",
                 "bc.total_steps=40960"]
    config = build_config("microrts", overrides=overrides, seed=2)
    cloner = build_cloner(config, None)
    try:
        first = [cloner.run_update() for _ in range(3)]
        for _ in range(30):
            last = cloner.run_update()
        state = cloner.state_dict()
        position = state["replay_position"]
        assert position is not None
    finally:
        cloner.close()
    early = np.mean([m["loss/bc_policy"] for m in first])
    assert last["loss/bc_policy"] < 0.7 * early
    assert last["bc/accuracy/type"] > np.mean([m["bc/accuracy/type"] for m in first]) + 0.05

    resumed = build_cloner(config, None)
    try:
        resumed.load_state_dict(state)
        logs = resumed.game.logs  # type: ignore[attr-defined]
        assert [(x[0].shard.name, x[0].index) for x in logs.current] == [
            tuple(x) for x in position["current"]]
        assert not resumed.game.imitate.any()  # type: ignore[attr-defined]
        for key, value in resumed.agent.state_dict().items():
            assert torch.equal(value, state["agent"][key])
        resumed.run_update()
    finally:
        resumed.close()

    checkpoint = tmp_path / "clone.pt"
    from games.files import save_checkpoint

    save_checkpoint(checkpoint, state)
    ppo_config = build_config("microrts", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.enabled=false",
        f"game.options.map={MAP}", "game.num_envs=2", "game.options.num_selfplay_envs=2",
        "network.channels=[16,32]",
        "network.hidden=[32]"], seed=2, init_from=str(checkpoint))
    trainer: Trainer = build_trainer(ppo_config, None)
    try:
        trainer.start_from(checkpoint)
        for key, value in trainer.agent.state_dict().items():
            assert torch.equal(value, state["agent"][key]), key
    finally:
        trainer.game.close()


def _rewrite(recorded: Path, folder: Path, index: int, **arrays: np.ndarray) -> None:
    """``folder`` a copy of ``recorded`` with shard ``index``'s arrays replaced (its metadata,
    optionally ``meta`` as a dict, kept)."""
    shutil.copytree(recorded, folder)
    with np.load(recorded / shard_name(index)) as shard:
        stored = {key: shard[key] for key in shard.files}
    if "meta" in arrays:
        stored["meta"] = np.frombuffer(json.dumps(arrays.pop("meta")).encode(), np.uint8)
    np.savez_compressed(folder / shard_name(index), **{**stored, **arrays})


def test_order_logs_out_of_range_are_corrupt_shards_skipped_with_a_warning(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards: order type 99, a cell beyond the board, 5 columns, float orders and offsets
    beyond the orders were IndexErrors mid-run (a traceback); they are corrupt shards."""
    with np.load(recorded / shard_name(1)) as shard:
        orders, offsets = shard["orders"], shard["offsets"]
    bad_type, bad_cell = orders.copy(), orders.copy()
    bad_type[0, 3] = 99
    bad_cell[0, 2] = 10**6
    cases = {"type": {"orders": bad_type}, "cell": {"orders": bad_cell},
             "columns": {"orders": orders[:, :5]}, "float": {"orders": orders.astype(float)},
             "offsets": {"offsets": np.concatenate([[0], offsets[1:] + 10**6])}}
    for name, arrays in cases.items():
        folder = tmp_path / name
        _rewrite(recorded, folder, 1, **arrays)
        logs, maps, steps = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
        game = TeacherGame(MicroRTSOptions(maps=maps, bots=[], num_selfplay_envs=2,
                                           max_steps=steps), 2, logs, seed=0)
        try:
            replay_until(game, logs, 8)
            played = {x[0].shard.name for x in logs.current if x is not None}
        finally:
            game.close()
        err = capsys.readouterr().err
        assert f"skipping corrupt replay shard {folder / shard_name(1)}" in err, (name, err)
        assert played == {shard_name(0)}, name


def test_malformed_game_metadata_and_edited_or_missing_maps_are_one_line(
        recorded: Path, tmp_path: Path) -> None:
    """Guards: an opening "x" (a numpy ufunc error), winner/length strings and one player
    were accepted; only the first game of each map had its map's hash checked; a game's map
    gone from this machine said "unknown microRTS map" without naming the replays."""
    with np.load(recorded / shard_name(1)) as shard:
        meta = json.loads(shard["meta"].tobytes())
    for k, (change, pattern) in enumerate((({"opening": "x"}, "opening must be a step"),
                                           ({"winner": "0"}, "winner must be an integer"),
                                           ({"players": ["CoacAI"]}, "players must be two"),
                                           ({"map": None}, "map must be a name"))):
        games = [{**game, **change} for game in meta["games"]]
        folder = tmp_path / f"meta{k}"
        _rewrite(recorded, folder, 1, meta={**meta, "games": games})
        with pytest.raises(ReplayError, match=f"game 0's metadata is malformed .*{pattern}"):
            replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
    edited = tmp_path / "edited"  # shard 1's games recorded on the map before an edit
    games = [{**game, "map_sha1": "0" * 40} for game in meta["games"]]
    _rewrite(recorded, edited, 1, meta={**meta, "games": games})
    with pytest.raises(ReplayError, match=f"{shard_name(1)} holds games of map {MAP} as it "
                                          "was before an edit .*restore the map file"):
        replay_logs(edited, [], False, False, 0.0, 0, (8, 8))
    gone = tmp_path / "gone"
    games = [{**game, "map": str(tmp_path / "nowhere" / "mine.xml")} for game in meta["games"]]
    _rewrite(recorded, gone, 1, meta={**meta, "games": games})
    with pytest.raises(ReplayError, match=f"{gone} was recorded on map .*mine.xml, which is "
                                          "not here .*put the map file back"):
        replay_logs(gone, [], False, False, 0.0, 0, (8, 8))


def test_a_users_map_file_is_recorded_and_replayed_from_its_path(engine_home: Path,
                                                                 tmp_path: Path) -> None:
    """Guards: ``record --maps mymaps/mine8.xml`` kept only "mine8" (then "unknown map"), and
    a user's file named like a shipped map was recorded on the shipped one."""
    from games.microrts.maps import resolve_map

    mine = tmp_path / "mymaps" / "basesWorkers8x8.xml"  # a shipped map's name, other terrain
    mine.parent.mkdir()
    mine.write_bytes((engine_home / "maps" / "8x8" / "basesWorkers8x8Obstacle.xml").read_bytes())
    assert resolve_map(str(mine)).name == str(mine.resolve())
    assert family_of("microrts").canonical_map("microrts", str(mine)) == str(mine.resolve())
    folder = tmp_path / "user-map"
    record(RecordPlan(("WorkerRush", "LightRush"), (str(mine),), games=2, shard_games=2,
                      max_steps=200, seed=0, parallel=2), folder)
    games = read_shard(folder / shard_name(0), arrays=False).games
    assert {g["map"] for g in games} == {str(mine.resolve())}
    from games.microrts.orderlog import map_sha1

    assert {g["map_sha1"] for g in games} == {map_sha1(mine)}
    logs, maps, _ = replay_logs(folder, [], False, False, 0.0, 0, (8, 8))
    assert maps == [str(mine.resolve())]
    with pytest.raises(GameError, match="names WorkerRush more than once"):
        check_plan(RecordPlan(("WorkerRush", "workerrush", "LightRush"), (MAP,), games=2))


def test_a_damaged_listed_shard_is_recorded_again(engine_home: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Guards: a rerun of `record` kept a shard listed in the manifest but cut short since
    ("0 games recorded (4 kept from before)"); cloning then lost its games."""
    plan = RecordPlan(("WorkerRush", "LightRush"), (MAP,), games=4, shard_games=2,
                      max_steps=200, seed=0, parallel=2)
    folder = tmp_path / "rec"
    record(plan, folder)
    before = read_shard(folder / shard_name(1))
    whole = (folder / shard_name(1)).read_bytes()
    (folder / shard_name(1)).write_bytes(whole[:300])
    summary = record(plan, folder)
    assert summary["recorded"] == 2 and "differs from the manifest" in capsys.readouterr().err
    after = read_shard(folder / shard_name(1))  # the same games, played again
    assert after.games == before.games
    assert np.array_equal(after.arrays["orders"], before.arrays["orders"])


def test_a_replay_folder_has_one_writing_process(recorded: Path, tmp_path: Path) -> None:
    """Guards: two `play --record` runs into one folder picked the same shard index and one
    replaced the other's shard (games lost, both reported success)."""
    folder = tmp_path / "shared"
    writer = ReplayWriter(folder)
    code = ("import sys; from pathlib import Path; from games.microrts.orderlog import "
            "ReplayWriter; from games.replays import ReplayError\n"
            "try:\n    ReplayWriter(Path(sys.argv[1]))\n"
            "except ReplayError as exc:\n    print(exc); sys.exit(3)\n")
    other = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                           text=True, timeout=120)
    assert other.returncode == 3 and "is being written by another process" in other.stdout
    same_process = ReplayWriter(folder)  # this process's writers share the claim
    same_process.close()
    writer.close()
    again = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_shard_copied_under_another_name_counts_once(recorded: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Guards (review): a shard copied into the folder under another shard name (every
    ``shard-<digits>.npz`` counts) was read twice, its games cloned at double weight."""
    from games.microrts.replays import select_games

    folder = tmp_path / "copied"
    shutil.copytree(recorded, folder)
    before = select_games(folder, [], False, False, 0.0, (8, 8))
    shutil.copyfile(folder / shard_name(0), folder / shard_name(99))
    capsys.readouterr()
    after = select_games(folder, [], False, False, 0.0, (8, 8))
    assert [(r.shard.name, r.index) for r in after] == [(r.shard.name, r.index) for r in before]
    assert capsys.readouterr().err == (f"warning: {folder / shard_name(99)} holds the games of "
                                       f"{shard_name(0)} (a copy?): they are read once\n")
