"""``tools/bench_selfplay_progress.py`` on any two-player game with bots (it was hard-wired to
microRTS): a tic-tac-toe league run's snapshots rated against frozen calibrated bots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SELFPLAY = [sys.executable, "-m", "selfplay.cli"]


def test_a_tictactoe_runs_snapshots_rated_against_frozen_bots(tmp_path: Path) -> None:
    run = tmp_path / "ttt"
    proc = subprocess.run([*SELFPLAY, "train", "--game", "tictactoe", "--total-steps", "4096",
                           "--run-dir", str(run), "--no-progress", "--set",
                           "log.tensorboard=false", "--set", "league.snapshot_every=1", "--set",
                           "league.eval_every=100"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "progress.json"
    proc = subprocess.run([sys.executable, "tools/bench_selfplay_progress.py", "--run", str(run),
                           "--bots", "random,win_or_block", "--games", "2",
                           "--calibrate-games", "4", "--json-out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["anchors"]) == {"random", "win_or_block"}
    assert result["map"] is None
    rows = result["snapshots"]
    assert [r["update"] for r in rows] == sorted(r["update"] for r in rows) and len(rows) >= 3
    for row in rows:  # each snapshot played each anchor 2 games
        assert {k: sum(v.values()) for k, v in row["vs"].items()} == {"random": 2,
                                                                        "win_or_block": 2}
    assert "trend" in result
    again = subprocess.run([sys.executable, "tools/bench_selfplay_progress.py", "--run", str(run),
                            "--bots", "random,random"], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    assert again.returncode == 2 and again.stderr.strip() == (
        "error: --bots: name at least two different bots")
    # the run's own league (its training games would be counted) or an input as an output:
    # refused before any game (the calibration made two databases in the run first)
    league = run / "league.db"
    kept = league.read_bytes()
    for extra, message in ((["--db", str(league)], f"--db {league} is one of the command's"),
                           (["--json-out", str(league)], "--json-out"),
                           (["--json-out", str(run / "config.yaml")], "--json-out")):
        refused = subprocess.run([sys.executable, "tools/bench_selfplay_progress.py", "--run",
                                  str(run), "--bots", "random,win_or_block", *extra],
                                 capture_output=True, text=True, timeout=120, cwd=REPO)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert "is one of the command's inputs" in refused.stderr
    assert league.read_bytes() == kept
