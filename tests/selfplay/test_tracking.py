"""Metric sinks of a resumed run: nothing a dead attempt logged past the checkpoint remains."""

from __future__ import annotations

import json
import struct
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from selfplay.config import TrainConfig
from selfplay.config_files import build_config
from selfplay.tracking import MetricSink, RunDir, drop_metrics_after


def _config(tensorboard: bool = False, wandb: bool = False) -> TrainConfig:
    return build_config("CartPole-v1", overrides=[f"log.tensorboard={str(tensorboard).lower()}",
                                                  f"log.wandb={str(wandb).lower()}"])


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_resume_drops_the_dead_attempts_metrics_and_its_torn_line(tmp_path: Path) -> None:
    """An attempt logs steps 1-5 and is killed writing step 6 (half a line); the run resumes
    from the checkpoint of step 3: steps 4 and 5 are logged once, by the resumed run."""
    run = RunDir(tmp_path / "run")
    sink = MetricSink(run, _config())
    for step in range(1, 6):
        sink.log(step, {"loss": float(step)})
    sink.close()
    with run.metrics_file.open("a") as handle:
        handle.write('{"step": 6, "time": 1.0, "lo')  # SIGKILL in the middle of a write
    resumed = MetricSink(run, _config(), resume_step=3)
    assert _steps(run.metrics_file) == [1, 2, 3]  # already before the first new record
    for step in (4, 5):
        resumed.log(step, {"loss": -float(step)})
    resumed.close()
    records = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["loss"] for r in records] == [1.0, 2.0, 3.0, -4.0, -5.0]


def test_drop_metrics_after_keeps_whole_records_and_ends_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert drop_metrics_after(path, 10) == 0 and not path.exists()  # no file: none made
    path.write_text('{"step": 1}\n{"step": 2}\n')
    before = path.stat().st_mtime_ns
    assert drop_metrics_after(path, 2) == 0 and path.stat().st_mtime_ns == before  # untouched
    path.write_text('{"step": 1}\n\xe9garbage\n{"step": 2}')  # whole, but its newline is lost
    assert drop_metrics_after(path, 5) == 1
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'  # the next record starts a line
    assert drop_metrics_after(path, 0) == 2 and path.read_text() == ""


def test_tensorboard_holds_no_step_twice_after_a_resume(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = RunDir(tmp_path / "run")
    dead = MetricSink(run, _config(tensorboard=True))
    for step in range(1, 7):
        dead.log(step, {"loss": float(step)})
    dead.close()  # the events of steps 4-6 are on disk, as a killed run's flushed ones are
    resumed = MetricSink(run, _config(tensorboard=True), resume_step=3)
    for step in range(4, 9):
        resumed.log(step, {"loss": -float(step)})
    resumed.close()
    assert len(list(run.tensorboard.glob("events.out.tfevents.*"))) == 2
    events = EventAccumulator(str(run.tensorboard))
    events.Reload()
    scalars = events.Scalars("loss")
    assert [s.step for s in scalars] == list(range(1, 9))
    assert [s.value for s in scalars] == [1.0, 2.0, 3.0, *(-float(s) for s in range(4, 9))]


def test_ratings_are_logged_at_their_snapshots_steps_and_resumed_once(tmp_path: Path) -> None:
    """Ratings finish after training moved on: each is logged at its snapshot's step (below
    steps already logged), as a record of its own. A resume from step 30 forgets the dead
    attempt's rating of the snapshot at step 40 (the resumed run rates it again) and keeps
    the one of step 20, finished after the checkpoint (the resumed run does not rate it
    again): in metrics.jsonl and in TensorBoard, each snapshot once."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = RunDir(tmp_path / "run")
    dead = MetricSink(run, _config(tensorboard=True))
    finished = {30: 10, 40: 20, 50: 40}  # step logged -> the snapshot whose rating finished
    for step in (10, 20, 30, 40, 50):
        dead.log(step, {"loss": float(step)})
        if step in finished:
            rated = finished[step]
            dead.log_rating(rated, f"r@{rated}", {"league/mu": float(rated)})
    dead.close()
    resumed = MetricSink(run, _config(tensorboard=True), resume_step=30)
    resumed.log(40, {"loss": -40.0})
    resumed.log_rating(40, "r@40", {"league/mu": -40.0})
    resumed.close()
    records = [json.loads(line) for line in run.metrics_file.read_text().splitlines()]
    rated = [(r["step"], r["snapshot"], r["league/mu"]) for r in records if "snapshot" in r]
    assert rated == [(10, "r@10", 10.0), (20, "r@20", 20.0), (40, "r@40", -40.0)]
    assert [r["step"] for r in records if "snapshot" not in r] == [10, 20, 30, 40]
    events = EventAccumulator(str(run.tensorboard))
    events.Reload()
    assert [(s.step, s.value) for s in events.Scalars("league/mu")] == [
        (10, 10.0), (20, 20.0), (40, -40.0)]


def wandb_rows(run: RunDir) -> list[dict[str, Any]]:
    """The history rows of the offline W&B run in ``run`` (its ``.wandb`` file: LevelDB's
    log format, 32 KiB blocks of checksummed records, holding W&B's protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run.path.glob("wandb/offline-run-*/run-*.wandb")
    data, pos, block, pending = path.read_bytes(), 7, 32768, b""
    rows = []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:  # the block's zero padding
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk  # full/first, middle/last
        if kind not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(pending)
        if record.WhichOneof("record_type") == "history":
            items = ((item.key or "/".join(item.nested_key), item.value_json)
                     for item in record.history.item)
            rows.append({key: json.loads(value) for key, value in items
                         if key in ("_step", "loss") or key.startswith("league/")})
    return rows


def test_wandb_gets_every_rating_in_a_row_of_its_own(tmp_path: Path) -> None:
    """W&B's steps only grow: two ratings finished during one update, and two in the final
    wait, each take a row of their own after the last step logged, with the snapshot's
    step in league/rated_step (the real library, offline)."""
    # W&B's own usage telemetry starts OpenTelemetry export threads, even offline, whose
    # at-fork hook deadlocked the child of a later Ray start in this test process (an xdist
    # worker hung in ray.init's Popen): off, as nothing here is sent anyway
    from wandb.analytics.opentelemetry import opentelemetry_proxy

    opentelemetry_proxy.disable()
    run = RunDir(tmp_path / "run")
    sink = MetricSink(run, _config(wandb=True))
    sink.log(100, {"loss": 1.0})
    for snapshot in (50, 100):
        sink.log_rating(snapshot, f"r@{snapshot}", {"league/mu": float(snapshot)})
    sink.log(200, {"loss": 2.0})
    for snapshot in (150, 200):
        sink.log_rating(snapshot, f"r@{snapshot}", {"league/mu": float(snapshot)})
    sink.close()
    import wandb

    wandb.teardown()  # the offline run's file is whole once W&B's service has stopped
    rows = [(row["_step"], row.get("loss"), row.get("league/mu"), row.get("league/rated_step"))
            for row in wandb_rows(run)]
    assert rows == [(100, 1.0, None, None), (101, None, 50.0, 50.0), (102, None, 100.0, 100.0),
                    (200, 2.0, None, None), (201, None, 150.0, 150.0),
                    (202, None, 200.0, 200.0)]


def test_wandb_resumes_the_run_of_the_first_attempt(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt of a run logs to one W&B run: its id is kept in the run directory."""
    calls: list[dict[str, Any]] = []

    class FakeRun:
        def log(self, scalars: dict[str, float], step: int) -> None: ...

        def finish(self) -> None: ...

    def init(**kwargs: Any) -> FakeRun:
        calls.append(kwargs)
        return FakeRun()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    run = RunDir(tmp_path / "run")
    MetricSink(run, _config(wandb=True)).close()
    MetricSink(run, _config(wandb=True), resume_step=3).close()
    MetricSink(RunDir(tmp_path / "other"), _config(wandb=True)).close()
    assert [c["resume"] for c in calls] == ["allow"] * 3
    assert calls[0]["id"] == calls[1]["id"] != calls[2]["id"]
    assert (run.path / "wandb_id").read_text().strip() == calls[0]["id"]


def test_resumed_training_logs_each_step_once(tmp_path: Path) -> None:
    """A CartPole run, then the lines of an attempt killed after the checkpoint (steps past it
    and a torn one); resuming it logs every step once."""
    from selfplay.train import run_training

    config = build_config("CartPole-v1", overrides=[
        "total_steps=1024", "game.num_envs=2", "ppo.num_steps=128", "log.progress=false",
        "log.tensorboard=false", "torch_threads=1"])
    run_dir = tmp_path / "run"
    first = run_training(config, run_dir=run_dir)
    metrics = run_dir / "metrics.jsonl"
    steps = _steps(metrics)
    assert steps[-1] == first["global_step"] == 1024
    with metrics.open("a") as handle:
        handle.write('{"step": 1280, "time": 0}\n{"step": 1536, "ti')
    second = run_training(config, resume=run_dir, total_steps=2048)
    assert second["global_step"] == 2048
    assert _steps(metrics) == list(range(256, 2049, 256))


@pytest.mark.parametrize("missing, asked", [("wandb", "wandb"),
                                            ("torch.utils.tensorboard", "tensorboard")])
def test_a_missing_tracking_package_names_the_setting(tmp_path: Path, monkeypatch,
                                                      missing: str, asked: str) -> None:
    """Guards: ``log.wandb=true`` without wandb (or TensorBoard missing) was a
    ModuleNotFoundError traceback."""
    from selfplay.config import ConfigError

    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    config = _config(tensorboard=asked == "tensorboard", wandb=asked == "wandb")
    with pytest.raises(ConfigError, match=rf"log.{asked}=true needs the {asked} package.*"
                                          rf"log.{asked}=false"):
        MetricSink(RunDir(tmp_path / "run"), config)


def test_outcomes_of_games_against_itself_are_not_win_rates() -> None:
    """episode/* counts every seat-episode of the learner; its win/draw/loss rates leave out
    the games it played on both seats (a mirror game's win and loss pulled the progress
    bar's win % toward a half: 16 bot envs and 8 self-play envs in microRTS's default)."""
    from games.core import EpisodeStats, Outcome
    from selfplay.run_metrics import EpisodeLog

    log = EpisodeLog(window=20)
    # env 0 against another policy, env 1 itself, env 2 against an engine bot (its seat 1 is
    # owned by nobody else either, and never ends an episode: it still counts)
    learner = np.array([[True, False], [True, True], [True, True]])
    ended = EpisodeStats(np.array([0, 1, 1, 2]), np.array([0, 0, 1, 0]),
                         np.array([1.0, 1.0, -1.0, -1.0]), np.array([10, 12, 12, 9]),
                         np.array([Outcome.WIN, Outcome.WIN, Outcome.LOSS, Outcome.LOSS],
                                  np.int8))
    log.add(ended, learner)
    summary = log.summary()
    # the mirror game once, by seat 0: returns 1, 1, -1 (its ±1 averaged to 0 before)
    assert summary["episodes"] == 3 and summary["episode/return_mean"] == pytest.approx(1 / 3)
    assert summary["episode/win_rate"] == 0.5 and summary["episode/loss_rate"] == 0.5
