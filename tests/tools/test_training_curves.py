"""tools/training_curves.py: rows at fixed step marks, training time across a resume, league
ratings read from a real league database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from league.db import LeagueDB
from tools.training_curves import (
    RatedSnapshot,
    curve_rows,
    main,
    read_metrics,
    training_seconds,
)


def _record(step: int, time: float, rate: float = 100.0, **wins: float) -> dict[str, float]:
    return {"step": step, "time": time, "perf/steps_per_second": rate,
            **{f"win_rate/{k}": v for k, v in wins.items()}}


def test_training_seconds_skip_a_pause_between_sessions() -> None:
    records = [_record(100, 1000.0), _record(200, 1001.0), _record(300, 1002.0),
               _record(400, 90_000.0, rate=50.0), _record(500, 90_002.0)]
    # first update: 100 steps / 100 per s; the 24-hour pause counts 100 / 50 s
    assert training_seconds(records, max_gap=600) == pytest.approx([1, 2, 3, 5, 7])


def test_rows_take_the_last_update_at_or_before_each_mark() -> None:
    records = [_record(s, 10.0 * i, WorkerRush=i / 10) for i, s in enumerate(range(60, 1000, 60))]
    rows = curve_rows(records, every=250, opponents=["WorkerRush", "CoacAI"],
                      snapshots=[RatedSnapshot(600, 14.0, 1.5, {"rush": (1, 4)}),
                                 RatedSnapshot(120, 12.0, 2.0, {"rush": (0, 4)}),
                                 RatedSnapshot(540, 13.0, 1.6, {"rush": (2, 4)})])
    assert [r["step"] for r in rows] == [240, 480, 720, 960]
    assert [r["WorkerRush"] for r in rows] == pytest.approx([0.3, 0.7, 1.1, 1.5])
    assert all(r["CoacAI"] is None for r in rows)
    assert [r["league"] for r in rows] == [(12.0, 2.0), (12.0, 2.0), (14.0, 1.5), (14.0, 1.5)]
    assert [r["eval"] for r in rows] == [{"rush": (0, 4)}, {}, {"rush": (3, 8)}, {}]
    # 60 steps per 10 s after the first update (0.6 s of its own)
    assert rows[1]["steps_per_second"] == pytest.approx(240 / 40)
    with pytest.raises(ValueError, match="--every"):
        curve_rows(records, every=0, opponents=[])


def test_metrics_file_torn_last_line_and_resumed_updates(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps(_record(100, 1.0, WorkerRush=0.1)), json.dumps(_record(200, 2.0)),
             json.dumps(_record(200, 9.0, WorkerRush=0.5)), '{"step": 3']
    path.write_text("\n".join(lines))
    records = read_metrics(path)
    assert [(r["step"], r["time"]) for r in records] == [(100, 1.0), (200, 9.0)]
    path.write_text('{"step": 1, "time": 0}\nnot json\n{"step": 2, "time": 1}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_metrics(path)


def test_command_reads_the_run_and_its_league(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    records = [_record(s, s / 100, WorkerRush=s / 1000, selfplay=0.5) for s in (100, 200, 300)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with LeagueDB(run / "league.db", game="microrts") as db:
        snapshot = db.add_player("run@0000002", "snapshot",
                                 metadata={"env_steps": 200, "role": "main", "update": 2})
        rush = db.add_player("WorkerRush", "bot")
        db.record_match(snapshot, rush, 1, key="eval@run@0000002/a/0")
        after = db.rating(snapshot).mu
        db.record_match(rush, snapshot, 1, key="eval@run@0000003/a/0")  # a later tournament
        assert db.rating(snapshot).mu < after
    assert main(["--run", str(run), "--every", "100", "--opponents", "WorkerRush,selfplay"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| env steps | minutes | WorkerRush | selfplay | league")
    assert table[2].split(" | ")[2:5] == ["0.10", "0.50", "-"]
    assert table[0].endswith("| rating games vs WorkerRush | env-steps/s |")
    assert table[3].split(" | ")[5] == "1/1"  # its own tournament's game, not the later one
    league = table[3].split(" | ")[4]  # as rated by its own tournament: after the win
    assert float(league.split(" +- ")[0]) == pytest.approx(after, abs=0.05) and after > 25
    out = tmp_path / "rows.json"
    assert main(["--run", str(run), "--every", "100", "--json-out", str(out)]) == 0
    assert json.loads(out.read_text())[0]["steps_per_second"] is not None
    assert main(["--run", str(tmp_path / "missing")]) == 2
