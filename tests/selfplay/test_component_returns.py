"""Per-component episode returns: logged as reward/<component> in a real microRTS run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from games.core import EpisodeStats
from selfplay.component_returns import ComponentReturns
from selfplay.config_files import build_config
from selfplay.train import run_training


def test_means_of_seat0_rows() -> None:
    logs = ComponentReturns(["a", "b"], window=2)
    stats = EpisodeStats(np.array([0, 0, 1]), np.array([0, 1, 0]), np.zeros(3),
                         np.ones(3, np.int64), np.zeros(3, np.int8))
    logs.add(stats, np.array([[1.0, 2.0], [9.0, 9.0], [3.0, 4.0]]))
    assert logs.metrics() == {"reward/a": 2.0, "reward/b": 3.0}
    logs.add(EpisodeStats(*(f[:1] for f in stats)),
             np.array([[5.0, 6.0]]))  # the window keeps the last 2 rows
    assert logs.metrics() == {"reward/a": 4.0, "reward/b": 5.0}


@pytest.mark.parametrize("collection", ["sync", "async"])
def test_microrts_run_logs_components_and_win_rates(tmp_path: Path, collection: str) -> None:
    """Two updates on 8x8 with 2 worker processes: reward/* and win_rate/* in metrics.jsonl.
    Async: the components and opponents are read at the step each game ended (read when the
    rollout was joined, they were a later step's: an IndexError as soon as a game ended)."""
    config = build_config("microrts", overrides=[
        f"collection={collection}",
        "game.num_envs=4", "game.options.map=basesWorkers8x8", "game.options.workers=2",
        "game.options.bots=[WorkerRush]", "game.options.num_selfplay_envs=2",
        "game.options.max_steps=40", "ppo.num_steps=48", "ppo.num_minibatches=2",
        "ppo.update_epochs=1", "league.enabled=false", "log.progress=false",
        "log.tensorboard=false", "network.channels=[8,16]", "network.hidden=[16]"],
        total_steps=4 * 48 * 2)
    summary = run_training(config, run_dir=tmp_path / "run")
    assert summary["updates"] == 2
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    last = rows[-1]
    names = ("win_loss", "resource_gather", "produce_worker", "produce_building", "attack",
             "produce_combat_unit")
    assert all(f"reward/{n}" in last for n in names), sorted(last)
    assert -1.0 <= last["reward/win_loss"] <= 1.0  # unweighted: +1 win, -1 loss, 0 otherwise
    assert last["reward/resource_gather"] >= 0.0
    assert {"win_rate/WorkerRush", "win_rate/selfplay"} <= set(last)
    # guards: the windows were not in checkpoints, so a resumed run logged other reward/* and
    # win_rate/* than the run that wrote the checkpoint
    from selfplay.checkpoint import list_checkpoints, load_checkpoint
    from selfplay.opponent_stats import OpponentWinRates

    extra = load_checkpoint(list_checkpoints(tmp_path / "run" / "checkpoints")[-1])["rank_extra"]
    restored = ComponentReturns(list(names))
    restored.load_state_dict(extra["component_returns"])
    assert restored.metrics() == {k: v for k, v in last.items() if k.startswith("reward/")}
    rates = OpponentWinRates([])
    rates.load_state_dict(extra["opponent_win_rates"])
    assert rates.metrics() == {k: v for k, v in last.items() if k.startswith("win_rate/")}
