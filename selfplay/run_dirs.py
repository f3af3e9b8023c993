"""Which directory a run writes to: a new one, the same command run again, or a resumed run.

Shared by ``selfplay train`` (:mod:`selfplay.train`) and ``selfplay bc`` (:mod:`selfplay.bc`):
a ``--run-dir`` holding checkpoints of a run with the same settings is continued, one with
other settings refused (naming them), and ``--resume`` reads the run's saved config.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from games.options import to_mapping
from selfplay.checkpoint import CheckpointError, list_checkpoints, names_checkpoint
from selfplay.config import ConfigError, TrainConfig, read_yaml, saved_config_from_mapping
from selfplay.device import resolve_device
from selfplay.tracking import RunDir

# settings that do not change what a run computes: a re-run may differ in them
_COSMETIC = frozenset({"log.progress", "log.tensorboard"})


def config_differences(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (cosmetic settings ignored)."""
    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                out.update(flat(item, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: value}

    a, b = flat(to_mapping(saved)), flat(to_mapping(new))
    return sorted(k for k in a.keys() | b.keys() if k not in _COSMETIC and a.get(k) != b.get(k))


def holds_checkpoints(run: RunDir) -> bool:
    """Whether ``run`` holds a finished checkpoint (a temporary file left by a save that was
    killed half-way does not count)."""
    return bool(list_checkpoints(run.checkpoints))


def same_run(run_dir: Path, config: TrainConfig) -> Path | None:
    """``run_dir`` if it holds checkpoints of a run with ``config``'s settings (running the same
    command again continues it; said on stderr), None if it holds no checkpoint; a
    :class:`FileExistsError` naming the settings of another run that differ.

    ``config.init_from`` is compared as given (:func:`names_checkpoint`): a run directory
    names the checkpoint the run started from even when it has saved newer ones since."""
    run = RunDir(run_dir)
    if not holds_checkpoints(run):
        return None
    if not run.config_file.is_file():
        raise FileExistsError(f"{run.path} holds checkpoints but no config.yaml, so it "
                              "cannot be resumed; pick another --run-dir")
    assert config is not None, "a new run needs its config"
    saved = saved_config_from_mapping(read_yaml(run.config_file))
    if names_checkpoint(config.init_from, saved.init_from):
        config = replace(config, init_from=saved.init_from)  # the file it named at the start
    differ = config_differences(saved, config)
    if differ:
        shown = ", ".join(differ[:6]) + (", ..." if len(differ) > 6 else "")
        raise FileExistsError(f"{run.path} already holds a run with other settings "
                              f"({shown}); use --resume {run.path} to continue it with its "
                              "saved config, or pick another --run-dir")
    print(f"{run.path} already holds this run (same settings): resuming it", file=sys.stderr)
    return run.path


def saved_config(run: RunDir, config: TrainConfig | None) -> TrainConfig:
    """The config ``run`` was started with, to resume it; ``config`` (the same settings, run
    again) lends its cosmetic ones. :class:`CheckpointError` if ``run`` is no run directory."""
    if not run.config_file.is_file():
        raise CheckpointError(f"{run.path} is not a selfplay run directory (no config.yaml, "
                              "no checkpoint); nothing to resume")
    saved = saved_config_from_mapping(read_yaml(run.config_file))
    try:
        resolve_device(saved.device)
    except ValueError as exc:
        raise ConfigError(f"{run.path} runs on device {saved.device!r}, which this machine "
                          "cannot use; resume it where it can, or start a new run from its "
                          f"weights: selfplay train --init-from {run.path} --set device=cpu"
                          ) from exc
    if config is not None:
        saved = replace(saved, log=replace(saved.log, progress=config.log.progress))
    return saved


def new_run(config: TrainConfig, run_dir: Path | None) -> tuple[RunDir, bool]:
    """The directory of a new run (``run_dir``, or a time-stamped one under ``runs/``), made;
    whether it was created here (a run that fails to start then leaves nothing behind)."""
    run = RunDir(run_dir) if run_dir is not None else RunDir.default_for(config)
    if holds_checkpoints(run):  # a default (time-stamped) directory already taken
        raise FileExistsError(f"{run.path} already holds a run; use --resume {run.path} "
                              "to continue it or pick another --run-dir")
    created = not run.path.exists()
    run.path.mkdir(parents=True, exist_ok=True)
    return run, created
