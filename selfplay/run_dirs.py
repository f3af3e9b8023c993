"""Which directory a run writes to: a new one, the same command run again, or a resumed run.

Shared by ``selfplay train`` (:mod:`selfplay.train`) and ``selfplay bc`` (:mod:`selfplay.bc`):
a ``--run-dir`` holding checkpoints of a run with the same settings is continued, one with
other settings refused (naming them), and ``--resume`` reads the run's saved config.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from games.core import GameError
from games.files import outermost_new_folder, remove_stale_temp_files
from games.options import OptionError, to_mapping
from games.registry import family_of
from league.db import database_file
from selfplay.checkpoint import (
    CheckpointError,
    list_checkpoints,
    names_checkpoint,
    resolve_checkpoint,
)
from selfplay.config import ConfigError, TrainConfig, validate
from selfplay.config_files import read_yaml, saved_config_from_mapping
from selfplay.data_parallel import world_from_environment
from selfplay.device import resolve_device
from selfplay.tracking import RunDir

# settings that do not change what a run computes: a re-run may differ in them
_COSMETIC = frozenset({"log.progress", "log.tensorboard"})
# settings a resumed run may change: ``--total-steps`` (its config.yaml is rewritten with
# them), and files the user may move and name again in config.yaml
RESUMABLE_CHANGES = frozenset({"total_steps", "bc.total_steps", "bc.replays", "league.db"})


def comparable(config: TrainConfig) -> dict[str, Any]:
    """``config`` as a mapping whose game options have the game's defaults filled in
    (:meth:`~games.family.Family.full_options`): a run saved with ``options: {}`` and one
    whose settings file writes those defaults out are the same run."""
    mapping = to_mapping(config)
    try:
        family = family_of(config.game.name)
    except GameError:  # a plugin's game whose plugin is not loaded: as saved
        return mapping
    mapping["game"]["options"] = family.full_options(config.game.name,
                                                     mapping["game"]["options"])
    return mapping


def config_differences(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (cosmetic settings ignored)."""
    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                out.update(flat(item, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: value}

    a, b = flat(comparable(saved)), flat(comparable(new))
    return sorted(k for k in a.keys() | b.keys() if k not in _COSMETIC and a.get(k) != b.get(k))


def describe_differences(saved: TrainConfig, new: TrainConfig, keys: list[str],
                         shown: int = 6) -> str:
    """``key saved -> new`` for the first ``shown`` of ``keys`` (and how many more)."""
    def value(config: TrainConfig, key: str) -> Any:
        node: Any = comparable(config)
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    parts = [f"{key} {value(saved, key)!r} -> {value(new, key)!r}" for key in keys[:shown]]
    more = f", and {len(keys) - shown} more" if len(keys) > shown else ""
    return "; ".join(parts) + more


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
    saved = read_saved_config(run)
    if names_checkpoint(config.init_from, saved.init_from):
        config = replace(config, init_from=saved.init_from)  # the file it named at the start
    if same_database(config.league.db, saved.league.db):  # saved absolute, given relative
        config = replace(config, league=replace(config.league, db=saved.league.db))
    differ = config_differences(saved, config)
    if differ:
        raise FileExistsError(f"{run.path} already holds a run with other settings "
                              f"({describe_differences(saved, config, differ)}); use --resume "
                              f"{run.path} to continue it with its saved config, or pick "
                              f"another --run-dir (--config {run.config_file} starts one with "
                              "its settings: the defaults of a game may have changed since)")
    print(f"{run.path} already holds this run (same settings): resuming it", file=sys.stderr)
    return run.path


def same_database(a: str | None, b: str | None) -> bool:
    """Whether two ``league.db`` settings name one league database file."""
    return (a is not None and b is not None
            and database_file(a).resolve() == database_file(b).resolve())


def read_saved_config(run: RunDir) -> TrainConfig:
    """``run``'s config.yaml; a :class:`ConfigError` naming the file when it is empty, cut
    short (a top-level key every saved config holds is missing: the rest would silently be
    the defaults) or unreadable."""
    data = read_yaml(run.config_file)
    if not data:
        raise ConfigError(f"{run.config_file} is empty: the run's settings are lost; start a "
                          f"new run from its weights (--init-from {run.path})")
    missing = sorted(_SAVED_SECTIONS - data.keys())
    if missing:
        raise ConfigError(f"{run.config_file} is damaged (cut short?): it lacks "
                          f"{', '.join(missing)}; restore it from a copy")
    try:
        return saved_config_from_mapping(data)
    except (ConfigError, OptionError) as exc:
        raise ConfigError(f"{run.config_file} is damaged ({exc}); restore it from a copy"
                          ) from exc


def saved_config(run: RunDir, config: TrainConfig | None) -> TrainConfig:
    """The config ``run`` was started with, to resume it; ``config`` (the same settings, run
    again) lends its cosmetic ones. :class:`CheckpointError` if ``run`` is no run directory."""
    if not run.config_file.is_file():
        kept = sorted(run.checkpoints.glob("*.pt")) if run.checkpoints.is_dir() else []
        if kept:  # the run's own file is gone: never guess its settings
            raise CheckpointError(
                f"{run.path} has checkpoints but no config.yaml (deleted?), the settings a "
                f"resumed run must keep: restore it from a copy, or start a new run from the "
                f"weights with --init-from {kept[-1]}")
        raise CheckpointError(f"{run.path} is not a selfplay run directory (no config.yaml, "
                              "no checkpoint); nothing to resume")
    saved = read_saved_config(run)
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


# top-level keys of every saved config.yaml, in every version
_SAVED_SECTIONS = frozenset({"game", "ppo", "network", "total_steps", "seed"})


def check_checkpoint_config(run: RunDir, config: TrainConfig, state: dict[str, Any],
                            path: Path) -> None:
    """``run``'s config.yaml (``config``) must hold the settings its checkpoint ``path`` was
    saved with (``state["config"]``), but for ``--total-steps`` and cosmetic ones: an edited
    config.yaml would resume the run with other shapes or other learning. :class:`ConfigError`
    naming the keys that differ."""
    stored = state.get("config")
    if not isinstance(stored, dict):
        return  # written by a version that did not keep the settings in its checkpoints
    try:
        theirs = saved_config_from_mapping(dict(stored))
    except ConfigError as exc:
        raise ConfigError(f"{path} holds settings this version cannot read ({exc})") from exc
    differ = [key for key in config_differences(theirs, config) if key not in RESUMABLE_CHANGES]
    if differ:
        shown = ", ".join(differ[:6]) + (", ..." if len(differ) > 6 else "")
        raise ConfigError(f"{run.config_file} differs from the settings {path.name} was saved "
                          f"with ({shown}): if config.yaml was edited, put them back to "
                          f"resume the run; if {path.name} came from another run, move it out "
                          "of the checkpoints folder")


def check_run_kind(run: RunDir, state: dict[str, Any], cloning: bool) -> None:
    """``selfplay bc --resume`` continues cloning runs and ``train --resume`` PPO runs: the
    other kind is a :class:`CheckpointError` saying which command continues it, before any
    game starts."""
    is_clone = state.get("algorithm") == "bc"
    if cloning and not is_clone:
        raise CheckpointError(f"{run.path} is a selfplay train run, not a cloning run: "
                              f"continue it with selfplay train --resume {run.path}")
    if not cloning and is_clone:
        raise CheckpointError(f"{run.path} is a behaviour-cloning run: continue it with "
                              f"selfplay bc --resume {run.path}, or start PPO from it with "
                              f"selfplay train --init-from {run.path}")


def check_new_run_folder(run: RunDir) -> None:
    """A new run may write into a new or empty folder, or into a run of ours that stopped
    before its first checkpoint (started again), but never replace another program's or the
    user's files: a config.yaml that is not a saved config (the user's own settings, say), or
    a metrics.jsonl without one. A league.db alone is opened, not replaced (the league checks
    it). :class:`FileExistsError` naming the file."""
    if not run.path.is_dir():
        return
    clash: Path | None = None
    if run.config_file.is_file():
        try:  # a saved config holds these sections in every version; a user's file a few
            data = read_yaml(run.config_file)
            if _SAVED_SECTIONS <= data.keys():
                saved_config_from_mapping(data)
                return  # a run of ours that died before its first checkpoint
        except ConfigError:
            pass
        clash = run.config_file
    elif run.metrics_file.exists():
        clash = run.metrics_file
    if clash is not None:
        raise FileExistsError(f"{run.path} is not a selfplay run directory but holds "
                              f"{clash.name}, which a run would replace; pick an empty or new "
                              "--run-dir")


LOCK_FILE = ".lock"
"""held (``flock``) by the process that writes a run, holding its pid"""
_HELD: dict[Path, int] = {}  # run folder -> the locked file's descriptor


def lock_run(path: Path) -> None:
    """Make this process the one that writes the run in ``path`` (rank 0 of several): a
    :class:`ConfigError` naming the process that already does (two processes writing one
    run lost metrics and overwrote each other's checkpoints). Writers' temp files left by a
    killed process are removed then. Held until :func:`release_run` or the process ends."""
    key = path.resolve()
    if key in _HELD or world_from_environment()[0] != 0:
        return
    while True:
        try:
            fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CheckpointError(f"cannot lock run folder {path}: {exc.strerror or exc}"
                                  ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ConfigError(f"{path} is in use by another selfplay process"
                              f"{f' (pid {holder})' if holder else ''}: wait for it to end, or "
                              "stop it; two processes would write one run") from None
        try:  # the file its holder removed on release as this process opened it: again
            same = os.fstat(fd).st_ino == os.stat(key / LOCK_FILE).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _HELD[key] = fd
    remove_stale_temp_files(key / "checkpoints")
    remove_stale_temp_files(key / "snapshots")  # the league's (train and bc)


def release_run(path: Path) -> None:
    """Let other processes write the run in ``path`` (:func:`lock_run`)."""
    fd = _HELD.pop(path.resolve(), None)
    if fd is not None:
        (path / LOCK_FILE).unlink(missing_ok=True)
        os.close(fd)


def new_run(config: TrainConfig, run_dir: Path | None) -> tuple[RunDir, Path | None]:
    """The directory of a new run (``run_dir``, or a time-stamped one under ``runs/``), made;
    the outermost folder created for it here, None if it existed (a run that fails to start
    then leaves nothing behind, ``runs/`` included)."""
    run = RunDir(run_dir) if run_dir is not None else RunDir.default_for(config)
    if holds_checkpoints(run):  # a default (time-stamped) directory already taken
        raise FileExistsError(f"{run.path} already holds a run; use --resume {run.path} "
                              "to continue it or pick another --run-dir")
    if run.path.exists() and not run.path.is_dir():
        raise FileExistsError(f"--run-dir {run.path} is a file, not a folder")
    check_new_run_folder(run)
    created = outermost_new_folder(run.path)
    run.path.mkdir(parents=True, exist_ok=True)
    lock_run(run.path)
    return run, created


@dataclass(frozen=True)
class RunOpening:
    """A run about to start or continue: its settings, and for a resumed run its folder and
    the checkpoint it continues from."""

    config: TrainConfig
    """the new run's settings (``init_from`` resolved to a file) or the resumed run's saved
    ones (with ``--total-steps`` and the progress-bar setting of this command)"""
    run: RunDir | None = None
    """a resumed run's folder (a new run's is made by :func:`making_run`)"""
    state: dict[str, Any] | None = None
    """a resumed run's checkpoint"""
    checkpoint: Path | None = None
    rewrite_config: bool = True
    """config.yaml is written: a new run's, or a resumed run's given more steps"""
    folder: Path | None = None
    """``--resume`` of a run stopped before its first checkpoint: it starts again from the
    beginning in this folder, with its saved settings"""


def open_run(config: TrainConfig | None, run_dir: Path | None, resume: Path | None,
             total_steps: int | None, progress_bar: bool | None, cloning: bool,
             load: Callable[[RunDir], tuple[dict[str, Any], Path]]) -> RunOpening:
    """What ``selfplay train`` (``cloning`` False) and ``selfplay bc`` do before building
    their algorithm: a ``run_dir`` holding this run already is resumed (:func:`same_run`);
    ``--resume`` reads the saved config, loads the newest usable checkpoint (``load``) and
    checks it is of this kind and of these settings; ``total_steps`` replaces the run's
    ``total_steps`` (``bc.total_steps`` when cloning)."""
    if resume is None and run_dir is not None:
        assert config is not None, "a new run needs its config"
        resume = same_run(Path(run_dir), config)
    if resume is None:
        assert config is not None, "a new run needs its config"
        if config.init_from is not None:
            try:
                found = resolve_checkpoint(config.init_from)
            except CheckpointError as exc:
                raise CheckpointError(f"init_from: {exc}") from exc
            config = replace(config, init_from=str(found.resolve()))
        if config.league.db is not None:  # a resume from another folder finds the same file
            config = replace(config, league=replace(config.league,
                                                    db=str(database_file(config.league.db)
                                                           .resolve())))
        return RunOpening(config)
    run = RunDir(resume)
    config = saved_config(run, config)
    if not list_checkpoints(run.checkpoints):  # stopped before its first checkpoint
        # the kind of run, which a checkpoint names, from its settings: a cloning run's
        # name its teachers or replays
        check_run_kind(run, {"algorithm": "bc" if config.bc.teachers or config.bc.replays
                             else "ppo"}, cloning)
        print(f"{run.path} has no checkpoint yet (it stopped before its first one): starting "
              "it from the beginning with its saved settings", file=sys.stderr)
        if total_steps is not None:
            config = (replace(config, bc=replace(config.bc, total_steps=total_steps))
                      if cloning else replace(config, total_steps=total_steps))
            validate(config)
        if progress_bar is not None:
            config = replace(config, log=replace(config.log, progress=progress_bar))
        return RunOpening(config, folder=run.path)
    lock_run(run.path)  # before a file of the run is read for writing
    try:
        return _opened(run, config, total_steps, progress_bar, cloning, load)
    except BaseException:
        release_run(run.path)
        raise


def _opened(run: RunDir, config: TrainConfig, total_steps: int | None,
            progress_bar: bool | None, cloning: bool,
            load: Callable[[RunDir], tuple[dict[str, Any], Path]]) -> RunOpening:
    """:func:`open_run` of a run to resume, once it holds the run's lock."""
    state, path = load(run)
    check_run_kind(run, state, cloning)
    check_checkpoint_config(run, config, state, path)
    steps = config.bc.total_steps if cloning else config.total_steps
    done = int(state.get("counters", {}).get("global_step", 0))
    no_more = total_steps is not None and total_steps <= done
    if no_more:  # nothing to train, and the run's config.yaml keeps its total
        print(f"{run.path} has done {done} steps (checkpoint {path.name}); --total-steps "
              f"{total_steps} asks for no more: nothing to train (config.yaml keeps "
              f"{steps})", file=sys.stderr)
    rewrite = total_steps is not None and total_steps != steps and not no_more
    if total_steps is not None:
        config = (replace(config, bc=replace(config.bc, total_steps=total_steps)) if cloning
                  else replace(config, total_steps=total_steps))
        validate(config)
    if progress_bar is not None:
        config = replace(config, log=replace(config.log, progress=progress_bar))
    return RunOpening(config, run, state, path, rewrite)


@contextmanager
def making_run(config: TrainConfig, run_dir: Path | None
               ) -> Iterator[tuple[RunDir, Path | None]]:
    """The folder of a new run (:func:`new_run`) and the outermost folder made for it (None
    if none was), removed again when what runs in the ``with`` block fails: a run that cannot
    start (a bad game option, a bad teacher name) leaves nothing behind."""
    run, created = new_run(config, run_dir)
    try:
        yield run, created
    except BaseException:
        release_run(run.path)  # its lock file too: nothing of the run stays
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
