"""The cloning-precision benchmark (``tools/bench_bc_precision.py``) on tic-tac-toe's teacher:
both precisions time every repeat and learn (finite, falling policy losses)."""

from __future__ import annotations

import math

from tools.bench_bc_precision import main


def test_times_both_precisions_on_the_same_rollout() -> None:
    result = main(["--game", "tictactoe", "--set", "bc.teachers=[win_or_block]",
                   "--set", "bc.num_envs=8", "--set", "bc.num_steps=8", "--repeats", "2"])
    seconds, losses = result["seconds"], result["policy_loss"]
    assert isinstance(seconds, dict) and isinstance(losses, dict)
    assert {k: len(v) for k, v in seconds.items()} == {"float32": 2, "bfloat16": 2}
    assert all(s > 0 for v in seconds.values() for s in v)
    assert all(math.isfinite(x) for v in losses.values() for x in v)
    assert losses["bfloat16"][-1] < losses["float32"][0]  # one network, learning throughout
