"""A run's folder under faults: a full disk while a checkpoint is written, two processes on
one run, temp files of a killed writer, a config.yaml cut short, a league database gone, a
resume asking for fewer steps than were done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from games.files import save_checkpoint
from selfplay.config import ConfigError
from selfplay.config_files import build_config, read_yaml
from selfplay.train import run_training

QUIET = ["log.progress=false", "log.tensorboard=false", "game.num_envs=2", "ppo.num_steps=16",
         "ppo.num_minibatches=1", "checkpoint.every_updates=1"]
STEPS = 2 * 16  # one update


def cartpole(updates: int) -> object:
    return build_config("CartPole-v1", overrides=QUIET, seed=3, total_steps=updates * STEPS)


def test_a_failed_checkpoint_write_is_an_os_error_and_leaves_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: torch reports a full disk as a RuntimeError ("unexpected pos"), which the run
    loop did not take for a failed write: a traceback instead of the warning (or one line)."""
    def full_disk(*_: object, **__: object) -> None:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 89856")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="the write failed .*is the disk full"):
        save_checkpoint(tmp_path / "c.pt", {"x": 1})
    assert list(tmp_path.iterdir()) == []


def test_a_run_in_use_by_another_process_is_refused(tmp_path: Path) -> None:
    """Guards: a second process resuming a run while the first still trained it replaced its
    metrics (64 updates lost) and wrote the same checkpoints."""
    run = tmp_path / "run"
    run_training(cartpole(2), run)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from selfplay.run_dirs import lock_run; "
        "lock_run(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)"), str(run)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=rf"run is in use by another selfplay process "
                                              rf"\(pid {holder.pid}\)"):
            run_training(None, resume=run, total_steps=3 * STEPS)
    finally:
        holder.kill()
        holder.wait()
    (run / "checkpoints" / ".update_0000003.pt.x1y2.tmp").write_bytes(b"half")  # a killed save
    (run / "snapshots").mkdir(exist_ok=True)  # and a killed league snapshot's (it stayed)
    (run / "snapshots" / ".run@0000003.pt.x1y2.tmp").write_bytes(b"half")
    run_training(None, resume=run, total_steps=3 * STEPS)  # the lock went with its process
    assert not list((run / "checkpoints").glob(".*.tmp"))
    assert not list((run / "snapshots").glob(".*.tmp"))
    assert not (run / ".lock").exists()


def test_a_resume_asking_for_no_more_steps_keeps_the_config(tmp_path: Path, capsys) -> None:
    """Guards: ``--total-steps`` below the steps done trained nothing and rewrote
    config.yaml, after which the run's own command was refused."""
    run = tmp_path / "run"
    run_training(cartpole(3), run)
    before = (run / "config.yaml").read_bytes()
    summary = run_training(None, resume=run, total_steps=STEPS)
    assert summary["global_step"] == 3 * STEPS
    assert (run / "config.yaml").read_bytes() == before
    assert "has done 96 steps" in capsys.readouterr().err
    run_training(cartpole(3), run)  # the same command again: the same run


def test_a_config_cut_short_or_a_lost_league_is_named(tmp_path: Path) -> None:
    """Guards: a config.yaml cut at a line lost its last keys (total_steps, seed), silently
    the defaults: a finished run trained 84k more steps; a deleted league.db was recreated
    empty and failed with "unknown player 7"."""
    run = tmp_path / "run"
    run_training(build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "game.num_envs=4", "ppo.num_steps=16",
        "league.eval_process=false", "league.snapshot_every=1", "checkpoint.every_updates=1"],
        seed=1, total_steps=2 * 4 * 16 * 2), run)
    text = (run / "config.yaml").read_text()
    kept = [line for line in text.splitlines()
            if not line.startswith(("seed:", "total_steps:"))]
    assert read_yaml(run / "config.yaml")["seed"] == 1
    (run / "config.yaml").write_text("\n".join(kept) + "\n")
    with pytest.raises(ConfigError, match=r"config.yaml is damaged \(cut short\?\): it lacks "
                                          r"seed, total_steps"):
        run_training(None, resume=run, total_steps=10_000)
    (run / "config.yaml").write_text(text)
    (run / "league.db").unlink()
    with pytest.raises(ConfigError, match=r"league.db .*league.db is missing or empty"):
        run_training(None, resume=run, total_steps=10_000)
    assert not (run / "league.db").exists()


def test_a_run_that_cannot_start_frees_its_folder(tmp_path: Path) -> None:
    """Guards: the lock stayed held (for the rest of the process) by a resume that failed
    before training, and a new run refused at its start left its lock file in a folder
    that existed before."""
    from games.options import OptionError
    from selfplay.bc import run_cloning
    from selfplay.checkpoint import CheckpointError

    run = tmp_path / "run"
    run_training(cartpole(1), run)
    with pytest.raises(CheckpointError, match="selfplay train run, not a cloning run"):
        run_cloning(None, resume=run)
    assert not (run / ".lock").exists()
    locker = subprocess.run([sys.executable, "-c", (
        "import sys; from pathlib import Path; from selfplay.run_dirs import lock_run; "
        "lock_run(Path(sys.argv[1]))"), str(run)], capture_output=True, text=True, timeout=60)
    assert locker.returncode == 0, locker.stderr  # another process may write it now
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OptionError, match="bogus"):
        run_training(build_config("CartPole-v1", overrides=[*QUIET, "game.options.bogus=1"],
                                  total_steps=STEPS), empty)
    assert list(empty.iterdir()) == []


def test_a_signal_during_a_held_block_is_raised_at_the_next_check() -> None:
    """Guards: a Ctrl-C during a new league's anchor calibration could land in JAX's
    garbage-collection hook, which only printed it: the run trained on and exited 0. Held, it
    is raised by its own handler where the code checks (and at the block's end)."""
    import os
    import signal

    from selfplay.interrupts import Terminated, signals_at_checks

    with signals_at_checks() as check:
        os.kill(os.getpid(), signal.SIGINT)
        reached = True  # nothing raised at the signal
        with pytest.raises(KeyboardInterrupt):
            check()
    assert reached and signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def terminated(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with pytest.raises(Terminated), signals_at_checks():  # raised at the end
            os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_held_signal_outlives_an_error_and_a_second_one_stops_at_once() -> None:
    """Guards (review): a signal held while the block failed was dropped (the error's exit 2,
    not the stop's); a second Ctrl-C waited for the check like the first."""
    import os
    import signal

    from selfplay.interrupts import signals_at_checks

    with pytest.raises(KeyboardInterrupt), signals_at_checks():
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("an engine error in the same game")
    with pytest.raises(KeyboardInterrupt), signals_at_checks():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second: raised here, no check needed
        raise AssertionError("not reached")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
