"""tools/bench_pettingzoo.py runs both pipelines and reports agent-steps/s (tiny settings)."""

from __future__ import annotations

from tools.bench_pettingzoo import run


def test_bench_reports_both_pipelines() -> None:
    result = run("pong_v3", games=1, seconds=0.2, repeats=1, warmup=2, threads=[2])
    rows = {row["pipeline"]: row for row in result["rows"]}
    assert set(rows) == {"supersuit", "adapter", "adapter x2"}
    assert rows["supersuit"]["vs_supersuit"] == 1.0
    for row in rows.values():
        assert row["agent_steps_per_s"] > 0
        assert abs(row["game_steps_per_s"] - row["agent_steps_per_s"] / 2) < 0.1
