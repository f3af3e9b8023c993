"""Every script in tools/ reports bad input as the `selfplay` commands do: one `error:` line,
exit status 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "args", "message"), [
    ("bench_networks.py", ["--game", "nosuch"], "error: unknown game 'nosuch'"),
    ("bench_selfplay_progress.py", ["--run", "/no/such/run"],
     "error: config file not found: /no/such/run/config.yaml"),
    ("bench_league.py", ["--players", "1"], "--players: a league needs at least 2, got 1"),
    ("bench_ppo_throughput.py", ["--repeats", "0"], "argument --repeats: must be >= 1, got 0"),
    ("bench_lux_parity.py", ["--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
])
def test_bad_input_is_one_line(tmp_path: Path, script: str, args: list[str],
                               message: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / script), *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert message in last, proc.stderr


def test_run_tool_turns_input_errors_into_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from games.core import GameError
    from selfplay.cli_common import run_tool

    def bad() -> None:
        raise GameError("no such bot 'x'")

    with pytest.raises(SystemExit) as stop:
        run_tool(bad)
    assert stop.value.code == 2 and capsys.readouterr().err == "error: no such bot 'x'\n"
    with pytest.raises(SystemExit) as stop:
        run_tool(lambda: 3)
    assert stop.value.code == 3
    with pytest.raises(SystemExit) as stop:
        run_tool(lambda: {"figures": 1})
    assert stop.value.code == 0
