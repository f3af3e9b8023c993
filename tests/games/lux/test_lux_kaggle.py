"""Kaggle episode replays of Lux AI Season 2 (:mod:`games.lux.kaggle`, :mod:`games.lux.kaggle_play`,
:mod:`games.lux.kaggle_replay`) on games the official engine plays here (no replay set can be
downloaded): two short games written as ``kaggle-environments`` writes them, converted into a
replay folder and read back by replaying them.

- game A: the heuristic bot against itself (its orders pass through our layout, so every label
  must be legal under our masks and equal to the bot's grid action);
- game B: raw random orders from the engine's action space (seat 0) against the heuristic: seat
  0's labels are partly illegal under our masks (counted), seat 1's never.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lux_helpers import need_official_engine

from games.core import GameError
from games.lux.kaggle import KaggleError, read_kaggle_episode
from games.lux.layout import NVEC, OBS_PLANES, UNIT
from games.replays import read_shard, shard_files

# ~15 s (two official-engine games, their conversion and replay): in `make bench`
pytestmark = pytest.mark.slow

LENGTH = 60  # main-phase steps per game (max_episode_length)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    need_official_engine()
    from games.lux.bots import heuristic
    from games.lux.kaggle_play import GridPlayer, RandomOrders, write_kaggle_episode
    from games.lux.kaggle_replay import convert_kaggle

    folder = tmp_path_factory.mktemp("kaggle")
    recorders = [GridPlayer(heuristic, seed=1, record=True),
                 GridPlayer(heuristic, seed=4, record=True)]
    a = write_kaggle_episode(folder / "a.json", 5, [recorders[0], GridPlayer(heuristic, seed=2)],
                             max_episode_length=LENGTH, team_names=("alpha", "beta"))
    b = write_kaggle_episode(folder / "b.json", 6, [RandomOrders(seed=3), recorders[1]],
                             max_episode_length=LENGTH)
    summary = convert_kaggle([folder / "a.json", folder / "b.json"], folder / "replays",
                             shard_games=1)
    # (game, seat) -> what the recording heuristic saw and chose each main-phase step
    return {"folder": folder, "played": [a, b], "summary": summary,
            "recorded": {(0, 0): recorders[0], (1, 1): recorders[1]}}


def test_the_json_is_what_kaggle_writes(made: dict[str, Any]) -> None:
    doc = json.loads(made["played"][0].path.read_text())
    assert doc["name"] == "lux_ai_s2" and doc["schema_version"] == 1
    assert doc["configuration"]["seed"] == 5
    assert doc["configuration"]["env_cfg"]["map_size"] == 48
    assert doc["info"]["TeamNames"] == ["alpha", "beta"]
    first, second = doc["steps"][0], doc["steps"][1]
    assert first[0]["action"] == {} and first[0]["observation"]["step"] == 0
    full = json.loads(first[0]["observation"]["obs"])
    assert {"ice", "ore", "valid_spawns_mask"} <= set(full["board"])
    change = json.loads(doc["steps"][-1][0]["observation"]["obs"])
    assert not {"ice", "ore", "valid_spawns_mask"} & set(change["board"])
    assert isinstance(change["board"]["rubble"], dict)  # {"x,y": value}
    assert "obs" not in second[1]["observation"]  # shared: agent 0's only
    assert second[0]["action"]["faction"] and "bid" in second[1]["action"]
    assert doc["statuses"] == ["DONE", "DONE"]
    assert doc["rewards"] == [agent["reward"] for agent in doc["steps"][-1]]
    assert "stats" in doc["steps"][-1][1]["observation"]


def test_json_round_trips(made: dict[str, Any]) -> None:
    from games.lux.parity import differences, official_view

    for played in made["played"]:
        doc = played.document
        episode = read_kaggle_episode(played.path)
        assert episode.seed == doc["configuration"]["seed"]
        assert episode.env_cfg == doc["configuration"]["env_cfg"]
        assert episode.actions == [[a["action"] for a in step] for step in doc["steps"][1:]]
        assert episode.steps == len(doc["steps"]) - 1
        assert list(episode.rewards) == doc["rewards"]
        assert episode.sha256 and episode.source == played.path.name
        # step 0's board plus every change observation is the engine's final state
        placing = played.final_obs["real_env_steps"] < 0
        assert differences(official_view(episode.final_obs(), placing),
                           official_view(played.final_obs, placing)) == []
    assert read_kaggle_episode(made["played"][0].path).team_names == ("alpha", "beta")


def _metas(folder: Path) -> list[tuple[dict[str, Any], dict[str, np.ndarray]]]:
    out: list[tuple[dict[str, Any], dict[str, np.ndarray]]] = []
    for path in shard_files(folder):
        shard = read_shard(path)
        out.extend((meta, shard.arrays) for meta in shard.games)
    return out


def test_conversion_records_each_game(made: dict[str, Any]) -> None:
    summary = made["summary"]
    assert (summary["games"], summary["shards"], summary["skipped"]) == (2, 2, [])
    games = _metas(made["folder"] / "replays")
    for (meta, _), played in zip(games, made["played"], strict=True):
        doc = played.document
        episode = read_kaggle_episode(played.path)
        assert meta["length"] == played.final_obs["real_env_steps"] <= LENGTH
        assert meta["kaggle_steps"] == len(doc["steps"]) - 1
        assert meta["rewards"] == doc["rewards"]
        assert meta["outcome"] == list(episode.outcome)
        assert meta["winner"] == episode.winner
        assert meta["sha256"] == episode.sha256 and meta["source"] == played.path.name
        assert meta["labels"]["steps"] == [meta["length"]] * 2
    heuristic_a, mixed_b = games[0][0]["labels"], games[1][0]["labels"]
    assert heuristic_a["illegal"] == [0, 0] and mixed_b["illegal"][1] == 0
    assert heuristic_a["multi_action"] == [0, 0] and heuristic_a["unit_orders"][0] > 0
    # raw random orders: multi-action queues and labels our masks forbid (counted, kept)
    assert mixed_b["illegal"][0] > 0 and mixed_b["multi_action"][0] > 0
    print(f"random orders: {mixed_b['illegal'][0]} of {mixed_b['unit_orders'][0]} unit and "
          f"{mixed_b['factory_orders'][0]} factory orders illegal under our masks")


def test_replay_ends_in_the_engines_final_state(made: dict[str, Any]) -> None:
    from games.lux.kaggle_replay import Replay, game_actions, state_hash
    from games.lux.parity import differences, official_view

    for (meta, arrays), played in zip(_metas(made["folder"] / "replays"), made["played"],
                                      strict=True):
        replay = Replay(meta["env_cfg"], meta["seed"], meta["source"])
        for _ in replay.steps(game_actions(arrays, 0)):
            pass
        assert differences(official_view(replay.env.state.get_obs(), False),
                           official_view(played.final_obs, False)) == []
        assert replay.rewards[-1] == [float(r) for r in meta["rewards"]]
        assert state_hash(replay.env) == meta["final_hash"]


def _gated(rows: np.ndarray) -> np.ndarray:
    """``rows`` with the components their unit type does not use set to 0."""
    out = rows.astype(np.int64)
    kind = out[..., 0]
    out[..., 1] *= kind == UNIT["move"]
    out[..., 2:4] *= (kind == UNIT["transfer"])[..., None]
    out[..., 4] *= kind == UNIT["pickup"]
    return out


def _continued_as_keep(rows: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """``rows`` with each unit's action that is already the front of its queue (type and
    direction, from the ``queued_*`` planes) written as ``keep``: the adapter sends no new
    queue for it, so a replay shows none (the bots here transfer ice and pick up power only)."""
    from games.lux.bots import _queued

    out = rows.astype(np.int64).copy()
    kind, direction = (a.reshape(-1) for a in _queued(obs[None]))
    same = (out[:, 0] == kind) & (kind > 0)
    same &= np.where(out[:, 0] == UNIT["move"], direction == out[:, 1] + 1,
                     np.where(out[:, 0] == UNIT["transfer"], direction == out[:, 2], True))
    out[same, 0] = UNIT["keep"]
    return out


def test_steps_replay_with_legal_labels(made: dict[str, Any]) -> None:
    from games.lux.kaggle_replay import iter_lux_replay_steps

    games = [meta for meta, _ in _metas(made["folder"] / "replays")]
    steps = list(iter_lux_replay_steps(made["folder"] / "replays"))
    assert len(steps) == sum(meta["length"] for meta in games)
    obs, mask, labels, outcome = steps[0]
    assert obs.shape == (2, len(OBS_PLANES), 48, 48) and obs.dtype == np.uint8
    assert mask.shape == (2, 48 * 48, sum(NVEC)) and mask.dtype == bool
    assert labels.shape == (2, 48 * 48, len(NVEC))
    first = games[0]["length"]
    per_game = [steps[:first], steps[first:]]
    for game, meta in enumerate(games):
        assert all((s.outcome == meta["outcome"]).all() for s in per_game[game])
    # the heuristic saw the same planes and masks while playing (from the engine's state
    # imported into Jux each step), and its grid actions come back as labels (amounts aside)
    for (game, seat), player in made["recorded"].items():
        assert len(player.grids) == len(per_game[game])
        for step, obs, mask, grid in zip(per_game[game], player.observations, player.masks,
                                         player.grids, strict=True):
            np.testing.assert_array_equal(step.obs[seat], obs)
            np.testing.assert_array_equal(step.mask[seat], mask)
            np.testing.assert_array_equal(_gated(_continued_as_keep(step.labels[seat], obs)),
                                          _gated(_continued_as_keep(grid, obs)))


def _bad_files(folder: Path, good: Path) -> dict[str, Path]:
    text = good.read_text()
    doc = json.loads(text)
    files = {"corrupt": "{not json at all", "truncated": text[: len(text) // 2]}
    wrong = dict(doc, name="connectx")
    no_steps = {k: v for k, v in doc.items() if k != "steps"}
    other_seed = dict(doc, configuration=dict(doc["configuration"], seed=999))
    files.update(wrong_name=json.dumps(wrong), missing_steps=json.dumps(no_steps),
                 other_seed=json.dumps(other_seed))
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f"bad-{name}.json"
        paths[name].write_text(content)
    return paths


def test_bad_files_are_one_line_errors_naming_them(made: dict[str, Any]) -> None:
    from games.lux.kaggle_replay import convert_kaggle

    bad = _bad_files(made["folder"], made["played"][0].path)
    expected = {"corrupt": "not JSON", "truncated": "not JSON", "wrong_name": "connectx",
                "missing_steps": "'steps'"}
    for name, needle in expected.items():
        with pytest.raises(KaggleError) as caught:
            read_kaggle_episode(bad[name])
        message = str(caught.value)
        assert isinstance(caught.value, GameError)
        assert bad[name].name in message and needle in message and "\n" not in message
    # a seed whose board is not the file's: refused when replayed
    with pytest.raises(KaggleError, match="another board") as caught:
        convert_kaggle([bad["other_seed"]], made["folder"] / "refused")
    assert bad["other_seed"].name in str(caught.value)
    assert not (made["folder"] / "refused").exists()  # made for the import, left empty
    summary = convert_kaggle(list(bad.values()), made["folder"] / "skipping", skip_bad=True)
    assert summary["games"] == 0 and len(summary["skipped"]) == len(bad)


def _tampered(made: dict[str, Any], name: str, change: Any) -> Path:
    """A copy of game a's episode with ``change(doc)`` applied."""
    doc = json.loads(made["played"][0].path.read_text())
    change(doc)
    path = made["folder"] / f"tampered-{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_final_rewards_must_be_the_last_steps_and_ids_may_be_missing(
        made: dict[str, Any]) -> None:
    """The winner comes from the file's 'rewards': other than the last step's (which the
    replay checks) they are refused (they were taken, a flipped winner); episodes without an
    id (null) are told apart by their files' hashes (each was a duplicate of the first)."""
    from games.lux.kaggle_replay import convert_kaggle

    def lie(doc: dict[str, Any]) -> None:
        doc["rewards"] = doc["rewards"][::-1] if doc["rewards"][0] != doc["rewards"][1] \
            else [doc["rewards"][0] + 1, doc["rewards"][1]]

    with pytest.raises(KaggleError, match="'rewards' .* differ from the last step's"):
        read_kaggle_episode(_tampered(made, "rewards", lie))

    def no_id(doc: dict[str, Any]) -> None:
        doc["info"]["EpisodeId"] = None
        doc["id"] = None

    first = _tampered(made, "null-id", no_id)
    assert read_kaggle_episode(first).episode_id == ""
    doc = json.loads(made["played"][1].path.read_text())
    no_id(doc)
    second = made["folder"] / "tampered-null-id-b.json"
    second.write_text(json.dumps(doc))
    summary = convert_kaggle([first, second], made["folder"] / "null-ids", shard_games=1)
    assert summary["games"] == 2


def test_board_changes_of_another_shape_are_one_line(made: dict[str, Any]) -> None:
    """A step whose change observation holds a whole board (a list) instead of ``{"x,y":
    value}`` changes: a one-line error naming the file and the step, skipped with
    ``skip_bad``."""
    from games.lux.kaggle_replay import convert_kaggle

    def whole_rubble(doc: dict[str, Any]) -> None:
        step = doc["steps"][-1][0]["observation"]
        obs = json.loads(step["obs"])
        obs["board"]["rubble"] = [[0, 1], [2, 3]]
        step["obs"] = json.dumps(obs)

    path = _tampered(made, "changes", whole_rubble)
    last = len(json.loads(path.read_text())["steps"]) - 1
    with pytest.raises(KaggleError) as caught:
        convert_kaggle([path], made["folder"] / "changes-refused")
    message = str(caught.value)
    assert path.name in message and f"board changes of step {last}" in message
    assert "\n" not in message
    summary = convert_kaggle([path], made["folder"] / "changes-skipped", skip_bad=True)
    assert summary["games"] == 0 and len(summary["skipped"]) == 1


def test_values_the_engine_refuses_and_interruptions_lose_no_converted_game(
        made: dict[str, Any]) -> None:
    """A seed outside the engine's range and an integer too large for it were ValueError /
    OverflowError tracebacks, and ``skip_bad`` did not skip them; an interrupted conversion
    dropped the games it had converted (a shard's worth waits in memory)."""
    from games.lux.kaggle_replay import convert_kaggle

    def negative_seed(doc: dict[str, Any]) -> None:
        doc["configuration"]["seed"] = -1

    def huge_number(doc: dict[str, Any]) -> None:  # a unit's order repeated 10**30 times
        step = next(step[0] for step in doc["steps"][-LENGTH:]
                    if any(key.startswith("unit_") for key in step[0]["action"] or {}))
        unit = next(key for key in step["action"] if key.startswith("unit_"))
        step["action"][unit] = [[0, 1, 0, 0, 10**30, 1]]

    seed = _tampered(made, "seed", negative_seed)
    with pytest.raises(KaggleError, match=r"configuration seed -1 is not in 0\.\.2\*\*32-1"):
        read_kaggle_episode(seed)
    huge = _tampered(made, "huge", huge_number)
    with pytest.raises(KaggleError, match="the official engine refused it") as caught:
        convert_kaggle([huge], made["folder"] / "huge-refused")
    assert huge.name in str(caught.value) and "\n" not in str(caught.value)
    good = [played.path for played in made["played"]]
    summary = convert_kaggle([seed, huge, *good], made["folder"] / "skipping-values",
                             skip_bad=True)
    assert summary["games"] == 2 and len(summary["skipped"]) == 2

    def stopped_after_two() -> Any:
        yield from good
        raise KeyboardInterrupt

    out = made["folder"] / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        convert_kaggle(stopped_after_two(), out)  # 100 games to a shard: none was full
    again = convert_kaggle(good, out)
    assert again["games"] == 0 and again["duplicates"] == 2  # both kept by the interruption


def test_an_action_the_engine_rejects_prints_nothing_on_stdout(
        made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The official engine prints the traceback of an action it rejects (a unit that does not
    exist) on stdout, where ``--json`` output goes; conversion turns it into one warning
    line on stderr, and the file into a one-line error."""
    from games.lux.kaggle_replay import convert_kaggle

    def ghost_unit(doc: dict[str, Any]) -> None:
        step = doc["steps"][-5][0]  # the main phase: the last LENGTH steps
        step["action"] = {**(step["action"] or {}), "unit_9999": [[0, 1, 0, 0, 0, 1]]}

    path = _tampered(made, "ghost", ghost_unit)
    capsys.readouterr()
    with pytest.raises(KaggleError) as caught:
        convert_kaggle([path], made["folder"] / "ghost-refused")
    out, err = capsys.readouterr()
    assert out == ""
    warnings = [line for line in err.splitlines() if line.strip()]
    assert warnings and all(line.startswith("warning: the Lux engine rejected an action at "
                                            "step") for line in warnings)
    assert path.name in str(caught.value) and "\n" not in str(caught.value)


def test_import_replays_command(made: dict[str, Any], capsys: pytest.CaptureFixture[str]
                                ) -> None:
    """``selfplay import-replays``: a folder of episodes in, a replay folder out; a rerun adds
    nothing; bad input is one line."""
    import json

    from selfplay.cli import main

    out = made["folder"] / "imported"
    src = made["folder"] / "episodes"
    src.mkdir()
    for played in made["played"]:
        (src / played.path.name).write_bytes(played.path.read_bytes())
    assert main(["import-replays", "--game", "lux", str(src), "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["games"] == 2 and result["duplicates"] == 0
    assert main(["import-replays", "--game", "lux", str(src), "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["games"] == 0 and again["duplicates"] == 2
    wrapped = made["folder"] / "wrapped"  # game a saved again as Kaggle's HTML player wraps it
    wrapped.mkdir()
    doc = json.loads(made["played"][0].path.read_text())
    (wrapped / "a-wrapped.json").write_text(json.dumps({"environment": doc}, indent=1))
    assert main(["import-replays", "--game", "lux", str(wrapped), "--out", str(out),
                 "--json"]) == 0
    third = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert third["games"] == 0 and third["duplicates"] == 1
    assert main(["import-replays", "--game", "lux", str(src / "nope.json"), "--out",
                 str(out)]) != 0
    assert "nope.json: no such file or folder" in capsys.readouterr().err
    assert main(["import-replays", "--game", "lux", "--format", "csv", str(src), "--out",
                 str(out)]) != 0
    assert "format 'kaggle' only" in capsys.readouterr().err
