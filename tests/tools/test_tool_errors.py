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
    # counts of 0 were tracebacks (a StatisticsError, a ZeroDivisionError), some after the work
    ("bench_pettingzoo.py", ["--repeats", "0"], "argument --repeats: must be >= 1, got 0"),
    ("bench_ray.py", ["--rounds", "0"], "argument --rounds: must be >= 1, got 0"),
    ("bench_ray.py", ["--scaling", "a,b"],  # a ValueError traceback
     "argument --scaling: expected worker counts such as 1,2,4,8, got 'a,b'"),
    ("bench_ray.py", ["--scaling", "0,2"], "argument --scaling: worker counts must be >= 1"),
    ("bench_pettingzoo.py", ["--seconds", "nan"], "argument --seconds: must be a finite number"),
    ("lux_heuristic_diagnosis.py", ["--bot", "random", "--max-steps", "5000"],
     "--max-steps must be at most 1000"),
    ("bench_networks.py", ["--game", "tictactoe", "--rows", "4", "--repeats", "1"],
     "tictactoe's critic reads the game's global state"),  # was a shape error
    ("lux_trajectory.py", ["compare", "garbage.npz", "garbage.npz"],
     "garbage.npz is not a trajectory dump"),  # was numpy's traceback
])
def test_bad_input_is_one_line(tmp_path: Path, script: str, args: list[str],
                               message: str) -> None:
    (tmp_path / "garbage.npz").write_bytes(b"not an npz")
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


def test_training_curves_refuse_bad_records_and_never_write_over_their_inputs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json-out naming the run's metrics.jsonl replaced it with the table; a record without
    a time was a KeyError traceback; a file without update records printed an empty table."""
    from selfplay.cli_common import UserError
    from tools.training_curves import main

    metrics = tmp_path / "metrics.jsonl"
    kept = '{"step": 128, "time": 1.0, "perf/steps_per_second": 100.0}\n'
    metrics.write_text(kept)
    for out in (metrics, tmp_path / "league.db"):
        with pytest.raises(UserError, match="is one of the command's inputs"):
            main(["--run", str(tmp_path), "--json-out", str(out)])
    assert metrics.read_text() == kept
    with pytest.raises(UserError, match="is a folder"):
        main(["--run", str(tmp_path), "--json-out", str(tmp_path)])
    for bad, message in (('{"step": 256}\n', "metrics.jsonl:2: not a metrics record"),
                         ("5\n", "metrics.jsonl:2: not a metrics record")):
        metrics.write_text(kept + bad + kept)
        assert main(["--run", str(tmp_path)]) == 2
        assert message in capsys.readouterr().err
    metrics.write_text('{"step": 128, "time": 1.0, "snapshot": "r@1", "league/mu": 25}\n')
    assert main(["--run", str(tmp_path)]) == 2
    assert "holds no update record" in capsys.readouterr().err
