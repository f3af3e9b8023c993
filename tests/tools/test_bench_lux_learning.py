"""The learning benchmark's cloning budget (``tools/bench_lux_learning.clone_for``): on wall
time a run's schedules follow the clock; on an env-step budget (``--bc-env-steps``) they follow
the env-steps, so one seed gives one clone however fast the host runs."""

from __future__ import annotations

from pathlib import Path

import torch

from selfplay.checkpoint import load_checkpoint
from tools.bench_lux_learning import budget_progress, clone_for

# tic-tac-toe's cloning with live teachers, students ramping in: 32 games x 4 steps an update
SMALL = ["bc.num_envs=32", "bc.num_steps=4", "bc.epochs=2", "bc.learning_rate=1e-3",
         "bc.validate_every=0", "log.tensorboard=false", "bc.imitate=[win_or_block]",
         "bc.student_share=0.5", "bc.student_ramp=0.5", "checkpoint.every_minutes=0.0"]
TEACHERS = ["win_or_block", "random"]


def test_budget_progress_follows_env_steps_when_given_else_the_clock() -> None:
    assert budget_progress(30.0, 60.0, 1_000, 0) == 0.5
    assert budget_progress(30.0, 60.0, 250, 1_000) == 0.25
    assert budget_progress(59.0, 60.0, 1_000, 1_000) == 1.0
    assert budget_progress(90.0, 60.0, 0, 0) == 1.0
    assert budget_progress(0.0, 60.0, 5_000, 1_000) == 1.0


def weights(record: dict) -> dict[str, torch.Tensor]:
    return load_checkpoint(Path(record["checkpoint"]))["agent"]


def test_an_env_step_budget_ends_the_run_there_and_repeats_it_exactly(tmp_path: Path) -> None:
    """Two runs of one seed on an env-step budget: the same steps, the same weights, whatever
    their updates' timings; the budget (not the clock) ended both, the learning rate
    annealed to zero over it."""
    runs = [clone_for(5.0, TEACHERS, SMALL, seed=3, root=tmp_path / name, env_steps=640,
                      game="tictactoe") for name in ("a", "b")]
    for record in runs:
        assert record["budget"] == "env_steps" and record["env_steps_budget"] == 640
        assert record["steps"] == 640 and record["updates"] == 5
    first, second = (weights(r) for r in runs)
    assert first.keys() == second.keys()
    for name, weight in first.items():
        assert torch.equal(weight, second[name]), name
    other = weights(clone_for(5.0, TEACHERS, SMALL, seed=4, root=tmp_path / "c",
                              env_steps=640, game="tictactoe"))
    assert any(not torch.equal(w, other[n]) for n, w in first.items())


def test_the_clock_ends_a_run_without_an_env_step_budget(tmp_path: Path) -> None:
    record = clone_for(0.15, TEACHERS, SMALL, seed=3, root=tmp_path, game="tictactoe")
    assert record["budget"] == "time" and record["seconds"] < 60
    assert record["steps"] == 128 * record["updates"] > 0
