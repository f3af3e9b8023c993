"""The replay benchmark (``tools/bench_replays.py``) records and decodes on the map it is
given (decoding always read basesWorkers16x16A and refused other maps' replays)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_records_and_decodes_another_map() -> None:
    proc = subprocess.run([sys.executable, "-m", "tools.bench_replays", "--players", "WorkerRush",
                           "LightRush", "--map", "basesWorkers8x8", "--games", "2",
                           "--max-steps", "100", "--envs", "2", "--seconds", "0.2"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["map"] == "basesWorkers8x8" and result["recording"]["games"] == 2
    assert result["decoding"]["env_steps_per_s"] > 0
