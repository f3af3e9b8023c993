"""Cloning converted Lux replays (:mod:`games.lux.replay_game`, ``selfplay bc --game lux
--replays DIR``) on games the official engine plays here: the heuristic against itself and
against raw random orders, written as Kaggle writes them and converted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lux_helpers import need_official_engine

from games.core import GameError, SupportsReplayPosition, SupportsTeachers
from games.family import Teachers
from games.registry import family_of
from games.replays import ReplayError

LENGTH = 12  # main-phase steps per game
TEAMS = (("alpha", "beta"), ("gamma", "alpha"), ("beta", "gamma"))


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_official_engine()
    from games.lux.bots import heuristic
    from games.lux.kaggle_play import GridPlayer, RandomOrders, write_kaggle_episode
    from games.lux.kaggle_replay import convert_kaggle

    folder = tmp_path_factory.mktemp("lux-replays")
    files = []
    for k, teams in enumerate(TEAMS):
        first = RandomOrders(seed=k) if k == 1 else GridPlayer(heuristic, seed=k)
        files.append(write_kaggle_episode(folder / f"{k}.json", 20 + k,
                                          [first, GridPlayer(heuristic, seed=10 + k)],
                                          max_episode_length=LENGTH, team_names=teams).path)
    convert_kaggle(files, folder / "replays", shard_games=2)
    return folder / "replays"


def _game(replays: Path, num_envs: int = 2, **teachers: Any) -> Any:
    spec = Teachers(replays=replays, validation_share=teachers.pop("validation_share", 0.0),
                    **teachers)
    return family_of("lux").teacher_game("lux", spec, num_envs, 7, {"max_steps": LENGTH})


def _recorded(replays: Path) -> dict[str, list[Any]]:
    """Each game's steps (by team names) as the plain reader replays them."""
    from games.lux.kaggle_replay import game_actions, replay_game
    from games.replays import iter_shards, read_manifest, shard_files

    out = {}
    for shard in iter_shards(shard_files(replays), read_manifest(replays)):
        for i, meta in enumerate(shard.games):
            out[",".join(meta["team_names"])] = list(
                replay_game(meta, game_actions(shard.arrays, i), "test"))
    return out


def test_replays_play_back_every_step_with_labels_and_outcomes(replays: Path) -> None:
    recorded = _recorded(replays)
    game = _game(replays, num_envs=2, imitate=("alpha",))
    assert isinstance(game, SupportsTeachers) and isinstance(game, SupportsReplayPosition)
    batch = game.reset()
    assert batch.obs.shape == (2, 2, *game.spec.obs_shape) and batch.obs.dtype == np.uint8
    seen: dict[int, list[int]] = {0: [], 1: []}  # env -> index into its current game
    names = [",".join(game._current[e].meta["team_names"]) for e in range(2)]
    step_of = [0, 0]
    finished = []
    for _ in range(3 * LENGTH):
        for e in range(2):
            want = recorded[names[e]][step_of[e]]
            np.testing.assert_array_equal(batch.obs[e], want.obs)
            np.testing.assert_array_equal(batch.action_mask[e], want.mask)
            np.testing.assert_array_equal(game.teacher_actions[e], want.labels)
            teams = names[e].split(",")
            assert game.imitate[e].tolist() == [t == "alpha" for t in teams]
            seen[e].append(step_of[e])
        batch = game.step(np.zeros_like(game.teacher_actions))
        for e in range(2):
            step_of[e] += 1
            if batch.terminated[e]:
                assert step_of[e] == len(recorded[names[e]])
                meta = next(m for m in _metas(replays) if ",".join(m["team_names"]) == names[e])
                np.testing.assert_allclose(batch.reward[e], meta["outcome"])
                finished.append(names[e])
                names[e] = ",".join(game._current[e].meta["team_names"])
                step_of[e] = 0
            else:
                assert not batch.reward[e].any()
    ended = batch.episodes
    assert len(finished) >= 3 and game.diverged == 0
    assert set(finished) >= {",".join(t) for t in TEAMS}  # every game came round
    assert ended.length.dtype.kind == "i"
    game.close()


def _metas(replays: Path) -> list[dict[str, Any]]:
    from games.replays import scan

    return [meta for shard in scan(replays) for meta in shard.games]


def test_winners_only_labels_only_the_winner(replays: Path, tmp_path: Path) -> None:
    """12-step games end in draws (no lichen yet): a copy of the folder names winners."""
    from games.replays import encode_shard, read_shard, shard_files, write_shard

    decided = tmp_path / "decided"
    decided.mkdir()
    winners = iter([0, 1, None])
    for index, path in enumerate(shard_files(replays)):
        shard = read_shard(path)
        games = []
        for meta in shard.games:
            winner = next(winners)
            outcome = [0.0, 0.0] if winner is None else [1.0 - 2 * winner, 2 * winner - 1.0]
            games.append(dict(meta, winner=winner, outcome=outcome))
        write_shard(decided, index, encode_shard("lux", shard.meta["engine"], games,
                                                 shard.arrays))
    game = _game(decided, num_envs=3, winners_only=True)
    game.reset()
    for _ in range(2):
        for e in range(3):
            winner = game._current[e].meta["winner"]
            assert game.imitate[e].tolist() == [winner == 0, winner == 1]
        game.step(game.teacher_actions)
    assert {game._current[e].meta["winner"] for e in range(3)} == {0, 1, None}
    game.close()


def test_the_stream_resumes_at_its_position(replays: Path) -> None:
    whole = _game(replays)
    whole.reset()
    for _ in range(LENGTH + 3):
        whole.step(whole.teacher_actions)
    position = whole.replay_position()
    shown = whole._steps.copy()
    expected = []
    for _ in range(LENGTH):
        batch = whole.step(whole.teacher_actions)
        expected.append((batch.obs.copy(), whole.imitate.copy(),
                         [",".join(r.meta["team_names"]) for r in whole._current]))
    whole.close()

    resumed = _game(replays)
    resumed.resume_at(position)
    # the games in progress start again; their steps already learned come back unlabelled
    np.testing.assert_array_equal(resumed._skip, np.maximum(shown - 1, 0))
    for _ in range(int(shown.max()) - 1):
        assert not resumed.imitate[resumed._steps - 1 < resumed._skip].any()
        resumed.step(resumed.teacher_actions)
    for obs, imitate, names in expected:
        batch = resumed.step(resumed.teacher_actions)
        np.testing.assert_array_equal(batch.obs, obs)
        np.testing.assert_array_equal(resumed.imitate, imitate)
        assert [",".join(r.meta["team_names"]) for r in resumed._current] == names
    resumed.close()


def test_bad_replay_input_is_one_line(replays: Path, tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="--imitate nobody: no such team"):
        _game(replays, imitate=("nobody",))
    with pytest.raises(ReplayError, match="plays the 'season2' rules; this run plays 'neurips'"):
        family_of("lux").teacher_game("lux", Teachers(replays=replays), 2, 0,
                                      {"rules": "neurips"})
    with pytest.raises(ReplayError, match="no such replay folder"):
        _game(tmp_path / "missing")
    with pytest.raises(GameError, match="either live teachers or replays"):
        family_of("lux").teacher_game("lux", Teachers(bots=("heuristic",), replays=replays),
                                      2, 0, {})
    # a folder of another game's replays
    from games.replays import encode_shard, write_shard

    other = tmp_path / "other"
    other.mkdir()
    write_shard(other, 0, encode_shard("microrts", {}, [{"map": "x"}], {}))
    with pytest.raises(ReplayError, match="holds no converted Lux replays"):
        _game(other)
    # every game held out: the training share is empty, whatever --winners-only asks (it
    # said no game had a winner)
    with pytest.raises(ReplayError, match="has no game in its training share"):
        _game(replays, winners_only=True, validation_share=1.0)


def _edited(replays: Path, folder: Path, edit: Any) -> Path:
    """``replays``' shards written to ``folder`` with ``edit(meta)`` applied to every
    game's metadata (no manifest: a damaged shard as a reader meets it)."""
    from games.replays import encode_shard, iter_shards, read_manifest, shard_files, write_shard

    folder.mkdir()
    for k, shard in enumerate(iter_shards(shard_files(replays), read_manifest(replays))):
        games = [dict(meta) for meta in shard.games]
        for meta in games:
            edit(meta)
        write_shard(folder, k, encode_shard(shard.meta["game"], shard.meta["engine"], games,
                                            shard.arrays))
    return folder


@pytest.mark.parametrize(("key", "value", "message"), [
    ("seed", "abc", "seed is 'abc'"), ("team_names", 5, "team_names is 5, not two names"),
    ("outcome", "win", "outcome is 'win', not two numbers"),
    ("winner", "x", "winner is 'x', not 0, 1 or null"), ("final_hash", None, "final_hash is None"),
])
def test_damaged_game_metadata_is_one_line_naming_the_shard(
        replays: Path, tmp_path: Path, key: str, value: Any, message: str) -> None:
    """Guards: such values were AttributeError, TypeError or KeyError tracebacks, the last
    after a whole game was replayed (and ``winner: x`` was silently never learned)."""
    folder = _edited(replays, tmp_path / "bad", lambda meta: meta.update({key: value}))
    with pytest.raises(ReplayError, match=rf"shard-000000.npz game 0 is damaged \({message}"):
        _game(folder)


def test_games_that_never_reach_the_main_phase_are_one_line(replays: Path,
                                                            tmp_path: Path) -> None:
    """Guards: a share whose games all ended in the bidding (a forfeit) made the stream look
    for a main-phase step for ever, deaf to the first SIGTERM."""
    folder = _edited(replays, tmp_path / "forfeits", lambda meta: meta.update(length=0))
    with pytest.raises(ReplayError, match="no game of .*'s training share reaches the main "
                                          "phase"):
        _game(folder)


def test_selfplay_bc_clones_lux_replays_and_validates_on_held_out_games(
        replays: Path, tmp_path: Path) -> None:
    from selfplay.bc import run_cloning
    from selfplay.checkpoint import load_checkpoint
    from selfplay.config_files import build_config

    config = build_config("lux", overrides=[
        f"bc.replays={replays}", "bc.num_envs=2", "bc.num_steps=4", "bc.total_steps=48",
        "bc.validate_every=3", "bc.validation_steps=4", "bc.validation_share=0.3",
        "game.options.max_steps=12", "network.channels=[8,8]", "network.hidden=[16]",
        "log.progress=false"])
    summary = run_cloning(config, run_dir=tmp_path / "run")
    assert summary["global_step"] == 48
    assert np.isfinite(summary["loss/bc_policy"])
    assert any(key.startswith("val/") for key in summary)
    state = load_checkpoint(sorted((tmp_path / "run" / "checkpoints").glob("*.pt"))[-1])
    assert state["counters"]["update"] == summary["updates"]
    assert state["replay_position"]["current"][0] is not None
    # resumed where the replays were: more steps, no error
    more = run_cloning(None, resume=tmp_path / "run", total_steps=64)
    assert more["global_step"] == 64


def test_import_of_nested_or_skipped_files_is_one_line_and_leaves_no_folder(
        tmp_path: Path) -> None:
    """Guards: JSON nested beyond Python's recursion limit was a RecursionError traceback
    (with --skip-bad too); an import that skipped every file left its new folders (and
    their parents) behind."""
    from games.lux.kaggle import KaggleError, read_kaggle_episode
    from games.lux.kaggle_replay import convert_kaggle

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(KaggleError, match="deep.json is not JSON"):
        read_kaggle_episode(deep)
    summary = convert_kaggle([deep], tmp_path / "new" / "deeper" / "out", skip_bad=True)
    assert summary["games"] == 0 and len(summary["skipped"]) == 1
    assert not (tmp_path / "new").exists()
    with pytest.raises(KaggleError):
        convert_kaggle([deep], tmp_path / "new2" / "out")
    assert not (tmp_path / "new2").exists()
