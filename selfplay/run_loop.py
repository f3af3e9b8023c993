"""The run loop: updates until the step budget, with signals, checkpoints and metrics.

:class:`RunLoop` drives any :class:`Algorithm` (PPO's :class:`~selfplay.ppo.Trainer`, behaviour
cloning): it calls :meth:`Algorithm.run_update` until ``num_updates``, logs each update's
metrics, shows progress, writes checkpoints atomically every ``checkpoint.every_updates``
updates and at the first update boundary after ``checkpoint.every_minutes`` minutes, and turns
SIGINT / SIGTERM / SIGHUP into a checkpoint followed by :class:`TrainingInterrupted`.

With several data-parallel ranks every rank runs the loop: they agree after each update on
whether to stop and to save (rank 0's clock decides a timed checkpoint, a signal to any rank
stops them all), every rank hands its part of the checkpoint to rank 0, which writes it while
the others wait.
"""

from __future__ import annotations

import signal
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from selfplay.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from selfplay.config import CheckpointConfig
from selfplay.data_parallel import Ranks, echoes_rank_0
from selfplay.interrupts import Terminated
from selfplay.run_metrics import Timer
from selfplay.tracking import MetricSink, Progress, RunDir


class Algorithm(Protocol):
    """What the run loop drives."""

    update: int

    @property
    def global_step(self) -> int: ...

    @property
    def num_updates(self) -> int: ...

    def run_update(self) -> dict[str, float]:
        """One update (``update`` and ``global_step`` advance); its metrics."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint holds to continue exactly."""
        ...


@runtime_checkable
class Drains(Protocol):
    """An algorithm that may hold a rollout collected beside its last update
    (``collection: async``), which it learns before a checkpoint."""

    def pending(self) -> bool: ...

    def overlapping(self) -> bool:
        """Whether each update collects the next rollout beside it (so a stop learns one
        more)."""
        ...

    @property
    def learned_step(self) -> int:
        """The env steps of the rollouts learned so far (the steps metrics are logged at)."""
        ...

    def drain(self) -> dict[str, float]:
        """Learn the pending rollout (one more update); its metrics."""
        ...


class CollectsAndLearns(Algorithm, Protocol):
    """An algorithm whose update collects steps, then learns from them (PPO, cloning)."""

    @property
    def timer(self) -> Timer:
        """Wall-clock sections of the update (env, inference, buffers...)."""
        ...

    def collect(self) -> None: ...

    def learn(self) -> dict[str, float]: ...


def collect_and_learn(algorithm: CollectsAndLearns) -> dict[str, float]:
    """Collect, learn, advance ``update``; the learning metrics with ``perf/steps_per_second``
    and the share of the update's wall time in each of the timer's sections
    (``perf/<section>_fraction``, ``learn`` included)."""
    start = time.perf_counter()
    step0 = algorithm.global_step
    algorithm.collect()
    tick = time.perf_counter()
    metrics = algorithm.learn()
    algorithm.timer.add("learn", tick)
    algorithm.update += 1
    elapsed = max(time.perf_counter() - start, 1e-9)
    metrics["perf/steps_per_second"] = (algorithm.global_step - step0) / elapsed
    for name, seconds in algorithm.timer.pop().items():
        metrics[f"perf/{name}_fraction"] = seconds / elapsed
    return metrics


class TrainingInterrupted(Exception):
    """Raised after SIGINT/SIGTERM once the checkpoint is safely written."""

    def __init__(self, signum: int, checkpoint: Path | None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.checkpoint = checkpoint


def progress_line(metrics: dict[str, float]) -> str:
    """Steps/s, the recent mean return and win rate (cloning: accuracy), for the progress
    bar."""
    info = f"{metrics.get('perf/steps_per_second', 0.0):,.0f} steps/s"
    ret = metrics.get("episode/return_mean")
    if ret is not None:
        info += f"  return {ret:.1f}"
    if "episode/win_rate" in metrics:
        info += f"  win {metrics['episode/win_rate']:.0%}"
    if "bc/accuracy/cell" in metrics:  # behaviour cloning
        info += f"  accuracy {metrics['bc/accuracy/cell']:.0%}"
    return info


class RunLoop:
    """Runs an :class:`Algorithm`'s updates; checkpoints into ``run`` (none without one)."""

    def __init__(self, algorithm: Algorithm, run: RunDir | None,
                 config: CheckpointConfig, ranks: Ranks | None = None) -> None:
        self.algorithm = algorithm
        self.run = run
        self.config = config
        self.ranks = ranks if ranks is not None else Ranks()
        self._stop_signal: int | None = None
        self._last_save = time.monotonic()

    def train(self, sink: MetricSink | None = None, progress: Progress | None = None) -> None:
        """Run updates until ``num_updates``; checkpoint periodically and on SIGINT, SIGTERM
        or SIGHUP (a closed terminal; not where SIGHUP is ignored, as under ``nohup``).

        A first signal lets the update in progress finish (its rollout is trained on, so the
        checkpoint sits on an update boundary and a resumed run continues as an uninterrupted
        one would), then saves and raises :class:`TrainingInterrupted`; a second one stops at
        once (the last periodic checkpoint remains)."""
        self._stop_signal = None  # a loop stopped by a signal may run again
        self._updating = True  # a stop signal lets an update finish (not: stop at this one)
        signals = [signal.SIGINT, signal.SIGTERM]
        hangup = getattr(signal, "SIGHUP", None)  # not on every platform
        if hangup is not None and signal.getsignal(hangup) is not signal.SIG_IGN:
            signals.append(hangup)
        previous = {sig: signal.getsignal(sig) for sig in signals}

        def handler(signum: int, _frame: object) -> None:
            if self._stop_signal is not None:  # second signal: stop now
                signal.signal(signum, previous[signal.Signals(signum)])
                raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)
            self._stop_signal = signum
            if not echoes_rank_0():  # torchrun signals every rank: one line, rank 0's
                print(f"{signal.Signals(signum).name}: {self._stop_course()}, then saving a "
                      "checkpoint (send it again to stop at once)", file=sys.stderr, flush=True)

        for sig in previous:
            signal.signal(sig, handler)
        try:
            self._loop(sink, progress)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _due(self) -> bool:
        """Whether the update just finished is due for a periodic checkpoint."""
        algo, minutes = self.algorithm, self.config.every_minutes
        return (algo.update % self.config.every_updates == 0
                or (minutes > 0 and time.monotonic() - self._last_save >= 60.0 * minutes))

    def _stop_course(self) -> str:
        """What a stop signal lets finish before the checkpoint (as the signal arrives)."""
        algo, update = self.algorithm, self.algorithm.update + 1
        if not (isinstance(algo, Drains) and algo.overlapping()):
            return f"finishing update {update}" if self._updating else "stopping at this update"
        if self._updating:  # async collection: the rollout collected beside it is learned too
            return f"finishing updates {update} and {update + 1} (the rollout in progress)"
        return (f"learning the rollout in progress (update {update})" if algo.pending()
                else "stopping at this update")

    def _loop(self, sink: MetricSink | None, progress: Progress | None) -> None:
        algo = self.algorithm
        self._last_save = time.monotonic()
        while algo.update < algo.num_updates:
            metrics = algo.run_update()
            self._updating = False  # until the stop check: a signal stops at this update
            self._log(metrics, sink, progress)
            signum, due = self.ranks.max_ints([self._stop_signal or 0,
                                               int(self.ranks.is_main and self._due())])
            self._updating = True  # a signal from here on lets the next update finish
            stop = signum or None
            final = algo.update == algo.num_updates
            path = None
            if self.run is not None and (stop is not None or final or due):
                if isinstance(algo, Drains) and algo.pending():  # learn it first
                    self._log(algo.drain(), sink, progress)
                    final = algo.update == algo.num_updates
                path = self.save(final=final)
            if stop is not None and not final:
                raise TrainingInterrupted(stop, path)

    def _log(self, metrics: dict[str, float], sink: MetricSink | None,
             progress: Progress | None) -> None:
        algo = self.algorithm
        step = algo.learned_step if isinstance(algo, Drains) else algo.global_step
        if sink is not None:
            sink.log(step, metrics)
        if progress is not None:
            progress.update(step, progress_line(metrics))

    def save(self, final: bool = False) -> Path:
        """Write ``checkpoints/update_XXXXXXX.pt`` atomically; prune old ones. A failed
        periodic save is a warning (the previous checkpoint is intact); a failed final one is
        an error. With several ranks every rank calls it; rank 0 writes."""
        assert self.run is not None
        path = self.run.checkpoints / f"update_{self.algorithm.update:07d}.pt"
        state = self.algorithm.state_dict()  # with ranks: each adds its part, for rank 0
        try:
            return self._write(path, state, final) if self.ranks.is_main else path
        finally:
            self.ranks.barrier()  # the other ranks wait for rank 0's file

    def _write(self, path: Path, state: dict[str, Any], final: bool) -> Path:
        directory = path.parent
        try:
            save_checkpoint(path, state)
        except OSError as exc:
            older = list_checkpoints(directory)
            kept = f"; previous checkpoint {older[-1]} is intact" if older else ""
            message = f"saving checkpoint {path} failed: {exc.strerror or exc}{kept}"
            if final:
                raise CheckpointError(message) from exc
            print(f"warning: {message}", file=sys.stderr)
            return older[-1] if older else path
        self._last_save = time.monotonic()
        # keep the newest ``keep`` up to this one; files past it are a resumed run's corrupt
        # newer checkpoints (skipped on loading; replaced when the run gets there), and
        # counting them would delete the checkpoint just written. A file before it that is no
        # archive (empty, cut short: skipped when the run resumed) is never counted (a
        # loadable checkpoint was deleted in its place) and goes, as the run is past it.
        older = [p for p in list_checkpoints(directory) if p.name < path.name]
        intact = [p for p in older if not _cut_short(p)]
        for old in [*intact[:max(0, len(intact) - (self.config.keep - 1))],
                    *(p for p in older if p not in intact)]:
            old.unlink(missing_ok=True)
        return path


def _cut_short(path: Path) -> bool:
    """Whether checkpoint ``path`` is empty or lacks its archive's end (a killed write); a
    file that cannot be read now (permissions, a network disk) is not (it is kept)."""
    try:
        with path.open("rb") as handle:
            if not handle.read(4):
                return True
    except OSError:
        return False
    return not zipfile.is_zipfile(path)


def load_resumable(run: RunDir) -> tuple[dict[str, Any], Path]:
    """The newest checkpoint that loads; warns about corrupt newer ones."""
    errors = []
    for path in reversed(list_checkpoints(run.checkpoints)):
        try:
            return load_checkpoint(path), path
        except CheckpointError as exc:
            errors.append(str(exc))
            print(f"warning: {exc}; trying an older checkpoint", file=sys.stderr)
    if errors:
        raise CheckpointError(f"no usable checkpoint in {run.checkpoints}: {errors[0]}")
    raise CheckpointError(f"no checkpoint in {run.checkpoints}; nothing to resume")
