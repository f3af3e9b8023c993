"""``tools/lux_heuristic_diagnosis.py`` on real Jux games: the heuristic measured against its own
labels agrees with them (only its tie-breaking draws differ), and random play does not; the
command line plays a checkpoint, the heuristic steering by the planes and by goal moves, and a
bot by name."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from lux_heuristic_diagnosis import Breakdown, lichen_score, main, play  # noqa: E402

from games.lux import bots  # noqa: E402
from games.lux.adapter import LuxOptions, LuxVecGame  # noqa: E402
from games.lux.layout import OBS_PLANES, PLANE, UNIT_TYPES  # noqa: E402
from selfplay.checkpoint import save_checkpoint  # noqa: E402
from selfplay.config import to_mapping
from selfplay.config_files import build_config
from selfplay.networks import ActorCritic  # noqa: E402


def test_the_heuristic_agrees_with_its_own_labels_and_random_play_does_not() -> None:
    rng = np.random.default_rng(5)
    own = play(partial(bots.heuristic, rng=rng), games=2, seed=3, max_steps=30)
    rand = play(partial(bots.random_legal, rng=rng), games=2, seed=3, max_steps=30)
    for result in (own, rand):
        assert result["wins"] + result["losses"] + result["draws"] == 2  # type: ignore[operator]
        confusion = np.array(result["unit_confusion"])
        assert confusion.sum() > 50  # robots were labelled
    assert own["unit_agreement"] > 0.95 and own["move_agreement"] > 0.5  # type: ignore[operator]
    assert rand["unit_agreement"] < 0.5  # type: ignore[operator]
    # the same figures with the player on each seat (sides alternate: one game each)
    for result, low, high in ((own, 0.95, 1.0), (rand, 0.0, 0.5)):
        by_seat = result["by_seat"]
        assert [row["games"] for row in by_seat] == [1, 1]  # type: ignore[index]
        assert sum(row["wins"] for row in by_seat) == result["wins"]  # type: ignore[union-attr]
        for s, row in enumerate(by_seat):  # type: ignore[arg-type]
            assert low <= row["unit_agreement"] <= high
            player, heuristic = result["lichen_before_end"][s]  # type: ignore[index]
            assert row["mean_lichen_margin"] == player - heuristic
    assert max(own["lengths"]) <= 30  # type: ignore[type-var]


def test_the_command_line_plays_a_checkpoint_and_the_planes_steering(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = build_config("lux", overrides=["network.channels=[8,16]", "network.hidden=[8]",
                                            "network.grid_cells=[8]"])
    spec = LuxVecGame(LuxOptions(), num_envs=1, seed=0).spec
    torch.manual_seed(0)
    agent = ActorCritic(spec, config.network, config.normalize)
    path = save_checkpoint(tmp_path / "untrained.pt",
                           {"config": to_mapping(config), "agent": agent.state_dict()})
    main(["--checkpoint", str(path), "--games", "2", "--max-steps", "8", "--most-likely",
          "--labels", "heuristic-near"])
    result = json.loads(capsys.readouterr().out)
    assert result["player"] == str(path) and result["labels"] == "heuristic-near"
    assert result["games"] == 2 and max(result["lengths"]) <= 8
    assert np.array(result["factory_confusion"]).sum() >= 2 * 2  # its factories were labelled
    main(["--steering", "near", "--games", "2", "--max-steps", "8"])
    result = json.loads(capsys.readouterr().out)
    assert result["player"] == "heuristic steering by near" and result["labels"] == "heuristic"
    assert result["unit_agreement"] > 0.9  # the same rules; only the steering differs
    main(["--steering", "goals", "--games", "2", "--max-steps", "8"])
    result = json.loads(capsys.readouterr().out)
    assert result["player"] == "heuristic steering by goals" and result["unit_agreement"] > 0.9
    main(["--bot", "heuristic", "--games", "2", "--max-steps", "8"])
    result = json.loads(capsys.readouterr().out)
    assert result["player"] == "heuristic" and result["unit_agreement"] > 0.95
    assert np.array(result["lichen_before_end"]).shape == (2, 2)


def test_the_lichen_score_counts_the_own_strains_only() -> None:
    obs = np.zeros((2, len(OBS_PLANES), 4, 4), np.uint8)
    obs[:, PLANE["lichen"], 0, :3] = round(50 / 100 * 255)  # 50 lichen on three cells
    obs[:, PLANE["lichen"], 3, 3] = 255  # 100 on a fourth
    obs[0, PLANE["own_lichen"], 0, :3] = 255
    obs[1, PLANE["own_lichen"], 3, 3] = 255
    assert lichen_score(obs).tolist() == [150, 100]


def test_the_breakdown_counts_every_robot_step_that_differs_from_its_label() -> None:
    """Random play against the heuristic's labels: the breakdown's rows add up, pair by pair,
    to the confusion's off-diagonal counts, and its tenths of the game to their total."""
    rng = np.random.default_rng(5)
    breakdown = Breakdown()
    result = play(partial(bots.random_legal, rng=rng), games=2, seed=3, max_steps=30,
                  breakdown=breakdown)
    confusion = np.array(result["unit_confusion"])
    summary = breakdown.summary(top=10_000)
    total = int(confusion.sum() - np.trace(confusion))
    assert summary["differing_robot_steps"] == total > 50
    assert sum(summary["by_tenth_of_the_game"].values()) == total  # type: ignore[attr-defined]
    # every robot-step counts once in its tenth; a tenth's kinds are the most common there
    assert sum(summary["robot_steps_by_tenth"].values()) == int(  # type: ignore[attr-defined]
        confusion.sum())
    for tenth, differing in summary["by_tenth_of_the_game"].items():  # type: ignore[attr-defined]
        assert differing <= summary["robot_steps_by_tenth"][tenth]  # type: ignore[index]
        kinds = summary["most_common_by_tenth"][tenth]  # type: ignore[index]
        assert 0 < len(kinds) <= 4 and sum(row["count"] for row in kinds) <= differing
        assert [row["count"] for row in kinds] == sorted(
            (row["count"] for row in kinds), reverse=True)
    pairs = np.zeros_like(confusion)
    for row in summary["most_common"]:  # type: ignore[attr-defined]
        pairs[UNIT_TYPES.index(row["label"]), UNIT_TYPES.index(row["played"])] += row["count"]
        assert row["robot"] in ("light", "heavy") and row["cargo"] in (
            "empty", "some", "half or more")
        assert (row["label_move"] == "-") == (row["label"] != "move")
    np.fill_diagonal(confusion, 0)
    assert np.array_equal(pairs, confusion)


def test_takeover_plays_the_labellers_actions_in_its_window() -> None:
    """With the whole game taken over, the player's choices are never played: two random
    players give the same games; with the first half taken over, the labeller plays about half
    of the seat-steps and the games differ from both."""
    def run(player_seed: int, window: tuple[float, float]) -> dict[str, object]:
        rng = np.random.default_rng(player_seed)
        return play(partial(bots.random_legal, rng=rng), games=2, seed=3, max_steps=20,
                    takeover=window)

    whole, other = run(1, (0.0, 1.0)), run(2, (0.0, 1.0))
    for key in ("lichen_before_end", "lengths", "wins"):
        assert whole[key] == other[key], key
    assert whole["takeover"] == other["takeover"] == {  # type: ignore[comparison-overlap]
        "window": [0.0, 1.0], "labeller": "heuristic", "seat_steps": 40, "share": 1.0}
    assert whole["unit_agreement"] < 0.5  # type: ignore[operator]  # the player's own choices
    half = run(1, (0.0, 0.5))
    assert 0.4 <= half["takeover"]["share"] <= 0.6  # type: ignore[index]
    assert "takeover" not in play(partial(bots.heuristic, rng=np.random.default_rng(0)),
                                  games=2, seed=3, max_steps=4)


def test_a_bad_takeover_window_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0.7", "0.9:0.5", "a:b"):
        with pytest.raises(SystemExit) as stop:
            main(["--bot", "heuristic", "--takeover", bad])
        assert stop.value.code == 2
        assert "--takeover" in capsys.readouterr().err
