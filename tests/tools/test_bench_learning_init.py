"""The learning benchmarks' training loop (``tools/bench_microrts_learning.train_for``, which
``tools/bench_lux_learning.py`` runs after cloning) starts from ``init_from`` as ``selfplay
train --init-from`` does: the network it trains is the checkpoint's, not a fresh one."""

from __future__ import annotations

from pathlib import Path

import torch

from selfplay.checkpoint import load_checkpoint
from tools.bench_microrts_learning import train_for

SMALL = ["game.num_envs=4", "ppo.num_steps=8", "league.enabled=false", "log.tensorboard=false"]


def test_train_for_starts_from_init_from(tmp_path: Path) -> None:
    first = train_for(5.0, SMALL, seed=1, horizon=32, root=tmp_path / "a", game="tictactoe")
    start = load_checkpoint(Path(first["checkpoint"]))["agent"]
    # a teacher penalty keeps a frozen copy of the network the run started from
    second = train_for(5.0, [*SMALL, f"init_from={first['checkpoint']}",
                             "ppo.teacher_kl_coef=0.5"],
                       seed=2, horizon=32, root=tmp_path / "b", game="tictactoe")
    saved = load_checkpoint(Path(second["checkpoint"]))
    assert saved["teacher"].keys() == start.keys()
    for name, weight in start.items():
        assert torch.equal(saved["teacher"][name], weight), name


def test_runs_started_in_the_same_second_get_directories_of_their_own(tmp_path: Path) -> None:
    """Two benchmark runs side by side once shared a directory named by the second they
    started in, and one lost its checkpoint to the other."""
    from tools.bench_microrts_learning import fresh_run_dir

    made = {fresh_run_dir(tmp_path, "lux-bc-s1").path for _ in range(3)}
    assert len(made) == 3 and all(path.is_dir() for path in made)
