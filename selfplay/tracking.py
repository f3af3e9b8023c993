"""Run directories and metric sinks: metrics.jsonl, TensorBoard, Weights & Biases, progress."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selfplay.checkpoint import atomic_write_bytes
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import config_to_yaml


@dataclass
class RunDir:
    """Layout of one training run's directory."""

    path: Path

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    @staticmethod
    def default_for(config: TrainConfig, root: Path = Path("runs")) -> RunDir:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = config.game.name.replace("/", "-")
        return RunDir(root / f"{safe}-s{config.seed}-{stamp}")

    def write_config(self, config: TrainConfig) -> None:
        text = config_to_yaml(config).encode()
        atomic_write_bytes(self.config_file, lambda handle: handle.write(text))


RATED_STEP = "league/rated_step"
"""W&B's x-axis of snapshot ratings: the rated snapshot's environment steps"""


class MetricSink:
    """Writes scalars to metrics.jsonl, TensorBoard and (optionally) W&B.

    ``resume_step``: the step of the checkpoint a resumed run continues from. An attempt that
    died after that checkpoint (SIGKILL, a crash) logged steps the resumed run logs again, so
    every sink first forgets what was logged past it: metrics.jsonl is rewritten without those
    records (and without a line torn by the kill), TensorBoard purges them (the writer's
    ``purge_step``). W&B continues the same run (its id is kept in the run directory,
    ``resume="allow"``) but cannot forget: it ignores a step lower than the last one it holds
    (with a warning), so it keeps the dead attempt's values up to the step where that attempt
    died and shows the resumed run's from there on. Rewinding a W&B run (``resume_from``) needs
    the W&B server, which offline runs do not have. ``None``: a new run, nothing is dropped.
    """

    def __init__(self, run: RunDir, config: TrainConfig, resume_step: int | None = None) -> None:
        self.run = run
        run.path.mkdir(parents=True, exist_ok=True)
        if resume_step is not None:
            drop_metrics_after(run.metrics_file, resume_step)
        self._jsonl = open(run.metrics_file, "a", buffering=1)  # noqa: SIM115 - closed in close()
        self._tb: Any = None
        self._wandb: Any = None
        try:
            self._open_trackers(run, config, resume_step)
        except BaseException:
            if self._tb is not None:
                self._tb.close()
            self._jsonl.close()
            raise

    def _open_trackers(self, run: RunDir, config: TrainConfig, resume_step: int | None) -> None:
        """TensorBoard's writer and the W&B run, as ``log`` asks; a missing package is a
        :class:`ConfigError` naming it and how to do without."""
        if config.log.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError(f"log.tensorboard=true needs the tensorboard package ({exc}):"
                                  " pip install 'tensorboard>=2.14', or set "
                                  "log.tensorboard=false") from exc

            # events at steps >= purge_step, earlier files included, are dropped on reading
            purge = resume_step + 1 if resume_step is not None else None
            self._tb = SummaryWriter(str(run.tensorboard), purge_step=purge)
        self._wandb_rating_keys: set[str] = set()
        self._wandb_ratings: list[dict[str, float]] = []  # waiting for rows of their own
        self._wandb_step = -1  # the last W&B step written
        if config.log.wandb:
            os.environ.setdefault("WANDB_SILENT", "true")
            try:
                import wandb
            except ImportError as exc:
                raise ConfigError(f"log.wandb=true needs the wandb package ({exc}): pip "
                                  "install 'selfplay[tracking]', or set log.wandb=false") from exc

            from games.options import to_mapping

            self._wandb = wandb.init(project=config.log.wandb_project, mode=config.log.wandb_mode,
                                     dir=str(run.path), config=to_mapping(config),
                                     name=run.path.name, id=wandb_run_id(run), resume="allow")

    def log(self, step: int, scalars: dict[str, float]) -> None:
        record = {"step": step, "time": time.time(), **scalars}
        self._jsonl.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb_ratings_before(step)
            self._wandb.log(scalars, step=step)
            self._wandb_step = max(self._wandb_step, step)

    def log_rating(self, step: int, snapshot: str, scalars: dict[str, float]) -> None:
        """Snapshot ``snapshot``'s rating, logged at the snapshot's own ``step``: rating
        tournaments finish later, beside training, so ``step`` may lie below steps already
        logged. metrics.jsonl takes a record of its own (``"snapshot"`` names it), and
        TensorBoard the scalars at ``step``: a resumed run forgets those past its checkpoint
        with the rest and logs them again when it rates those snapshots again. W&B, whose
        steps only grow, writes each in a row of its own after the last step logged, charted
        against ``league/rated_step``."""
        record = {"step": step, "time": time.time(), "snapshot": snapshot, **scalars}
        self._jsonl.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            for key in scalars.keys() - self._wandb_rating_keys:
                self._wandb.define_metric(key, step_metric=RATED_STEP)
            self._wandb_rating_keys |= scalars.keys()
            self._wandb_ratings.append({**scalars, RATED_STEP: float(step)})

    def _wandb_ratings_before(self, step: int | None) -> None:
        """Write the ratings waiting for W&B, each in a row of its own at the steps just
        after the last one logged and below ``step`` (the next update's; ``None``: none
        follows). Where no step is left below it, the rest go into the last row (W&B keeps
        the newest)."""
        assert self._wandb is not None
        while self._wandb_ratings:
            row = self._wandb_step + 1
            if step is not None and row >= step:
                for rating in self._wandb_ratings:
                    self._wandb.log(rating, commit=False)
                break
            self._wandb.log(self._wandb_ratings[0], step=row)
            self._wandb_step = row
            self._wandb_ratings.pop(0)
        self._wandb_ratings = []

    def close(self) -> None:
        self._jsonl.close()
        if self._wandb is not None:
            self._wandb_ratings_before(None)
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def drop_metrics_after(path: Path, step: int) -> int:
    """Rewrite the metrics file ``path`` atomically without its records past ``step`` and
    without lines that are not whole records (the last one, torn by a kill); how many lines
    were dropped. A missing file stays missing; every kept line ends with a newline, so the
    next record starts a line of its own."""
    if not path.is_file():
        return 0
    kept: list[bytes] = []
    lines = path.read_bytes().splitlines(keepends=True)
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # a torn line: cut off mid-record, or mid-character
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) \
                and record["step"] <= step:
            kept.append(line if line.endswith(b"\n") else line + b"\n")
    if kept != lines:
        atomic_write_bytes(path, lambda handle: handle.writelines(kept))
    return len(lines) - len(kept)


def logged_ratings(path: Path, step: int) -> set[str]:
    """The snapshots whose rating the metrics file ``path`` holds at or before ``step``: those
    a run resumed from ``step`` keeps (:func:`drop_metrics_after`)."""
    if not path.is_file():
        return set()
    names = set()
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a torn line
            continue
        if (isinstance(record, dict) and isinstance(record.get("snapshot"), str)
                and isinstance(record.get("step"), int) and record["step"] <= step):
            names.add(record["snapshot"])
    return names


def wandb_run_id(run: RunDir) -> str:
    """The W&B run id of ``run`` (made on first use, kept in ``run/wandb_id``): a resumed run
    logs to the run its first attempt started."""
    path = run.path / "wandb_id"
    if path.is_file():
        stored = path.read_text().strip()
        if stored:
            return stored
    run_id = uuid.uuid4().hex[:16]
    atomic_write_bytes(path, lambda handle: handle.write(run_id.encode() + b"\n"))
    return run_id


class Progress:
    """A progress bar with steps/s and recent return; a plain line every few seconds off a TTY."""

    def __init__(self, total: int, start: int, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.total = total
        self._last_line = 0.0
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(TextColumn(f"[bold]{label}"), BarColumn(),
                                     MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                     TimeRemainingColumn(), transient=False)
            self._task = self._bar.add_task(label, total=total, completed=start, info="")
            self._bar.start()

    def update(self, step: int, info: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=min(step, self.total), info=info)
        elif time.monotonic() - self._last_line > 10:
            self._last_line = time.monotonic()
            print(f"[{step}/{self.total}] {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
