"""``tools/microrts_clone_diagnosis.py`` in the engine: the teacher measured against its own
labels agrees with them everywhere and has its orders started; a player that never orders
disagrees wherever the teacher orders; the command line plays a checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from microrts_clone_diagnosis import diagnose, main  # noqa: E402

from games.microrts.adapter import MicroRTSVecGame  # noqa: E402
from games.microrts.options import MicroRTSOptions  # noqa: E402
from selfplay.checkpoint import save_checkpoint  # noqa: E402
from selfplay.config import to_mapping
from selfplay.config_files import build_config
from selfplay.networks import ActorCritic  # noqa: E402

OPTIONS = MicroRTSOptions(map="basesWorkers8x8", max_steps=120)


@pytest.fixture(scope="module")
def engine_home() -> Path:
    """The engine folder (fetched once per machine)."""
    from games.microrts.engine import ensure_engine

    return ensure_engine()


def test_the_teacher_agrees_with_its_own_labels_and_a_idle_player_does_not(
        engine_home: Path) -> None:
    own = diagnose(lambda obs, mask, labels: labels, "WorkerRush", "LightRush", games=2,
                   envs=2, seed=3, options=OPTIONS)
    idle = diagnose(lambda obs, mask, labels: np.zeros_like(labels), "WorkerRush",
                    "LightRush", games=2, envs=2, seed=3, options=OPTIONS)
    assert own["wins"] + own["losses"] + own["draws"] == 2  # type: ignore[operator]
    units = own["units"]
    assert isinstance(units, dict) and {"base", "worker"} <= set(units)
    for stats in units.values():
        assert stats["type_agreement"] == 1.0
    refused = own["refused_orders"]
    assert isinstance(refused, dict) and refused["move"][1] > 20  # its workers moved
    assert sum(r for r, _ in refused.values()) <= 0.05 * sum(n for _, n in refused.values())
    base = np.array(idle["units"]["base"]["confusion"])  # type: ignore[index]
    assert base[4, 4] == 0 and base[4].sum() > 0  # WorkerRush's base trains, the idle one not
    assert idle["refused_orders"] == {}


def test_the_command_line_plays_a_checkpoint_with_some_units_handed_over(
        engine_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = build_config("microrts", overrides=[
        "network.channels=[8,16]", "network.hidden=[8]", "game.options.map=basesWorkers8x8",
        "game.options.num_selfplay_envs=0", "game.options.max_steps=40"])
    game = MicroRTSVecGame(MicroRTSOptions(map="basesWorkers8x8"), num_envs=1, seed=0)
    spec = game.spec
    game.close()
    torch.manual_seed(0)
    agent = ActorCritic(spec, config.network, config.normalize)
    path = save_checkpoint(tmp_path / "untrained.pt",
                           {"config": to_mapping(config), "agent": agent.state_dict()})
    main(["--checkpoint", str(path), "--teacher", "workerrush", "--vs", "lightrush",
          "--games", "2", "--envs", "2", "--clone-units", "worker"])
    result = json.loads(capsys.readouterr().out)
    assert result["teacher"] == "WorkerRush" and result["games"] == 2
    assert set(result["units"]) == {"worker"}  # the teacher ordered its base
    assert max(result["lengths"]) <= 40
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(path), "--clone-units", "tank"])
