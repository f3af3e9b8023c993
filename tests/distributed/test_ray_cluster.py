"""Reaching Ray (games/workers/ray_cluster.py): bad addresses and a missing Ray fail at once
with one line naming what is wrong, never a hang.

The unreachable addresses are tried through ``selfplay train`` in a process of its own, as
users meet them: a join that outlives its timeout is left to a daemon thread, which keeps
retrying (and logging) until that process exits; inside the test process it would write into
later tests' output.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from games.core import GameError
from games.workers.ray_cluster import connect

SELFPLAY = [sys.executable, "-m", "selfplay.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def train_on(address: str, timeout_s: int) -> tuple[subprocess.CompletedProcess[str], float]:
    """``selfplay train`` on the Ray backend at ``address``; the process and its wall time."""
    start = time.monotonic()
    proc = subprocess.run([*SELFPLAY, "train", "--game", "microrts", "--total-steps", "64",
                           "--no-progress", "--set", "log.tensorboard=false",
                           "--set", "distributed.backend=ray",
                           "--set", f"distributed.address={address}",
                           "--set", f"distributed.connect_timeout_s={timeout_s}"],
                          capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - start


def assert_one_line(proc: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert pattern in lines[0], lines[0]


def test_an_unreachable_address_is_named_within_the_timeout() -> None:
    pytest.importorskip("ray")
    refused = f"127.0.0.1:{free_port()}"  # refused before Ray is asked: tried in this process
    start = time.monotonic()
    with pytest.raises(GameError, match=f"cannot reach the Ray cluster at {refused}"):
        connect(refused, timeout_s=3)
    assert time.monotonic() - start < 5
    # an address that answers TCP but is no Ray head (or a black hole): the timeout decides,
    # and the process exits at once after it with one line
    proc, silent_s = train_on("10.255.255.1:6379", 2)
    assert_one_line(proc, "the Ray cluster at 10.255.255.1:6379")
    assert "cannot reach" in proc.stderr or "cannot join" in proc.stderr, proc.stderr
    # interpreter and torch start-up (~3-6 s here) plus the timeout, never Ray's own ~20 s
    assert silent_s < 2 + 15, silent_s


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(GameError, match=r"pip install 'selfplay\[ray\]'"):
        connect("local")


def test_workers_needing_more_cpus_than_ray_has_are_one_line(tmp_path) -> None:
    """Guards: two workers of one CPU each on a local Ray instance of one CPU waited for CPUs
    for ever (SIGTERM then aborted in Ray's C++ code, leaving Ray processes and an empty run
    folder)."""
    run = tmp_path / "run"
    proc = subprocess.run([*SELFPLAY, "train", "--game", "CartPole-v1", "--total-steps", "256",
                           "--no-progress", "--run-dir", str(run), "--set",
                           "log.tensorboard=false", "--set", "distributed.backend=ray",
                           "--set", "distributed.num_cpus=1"],
                          capture_output=True, text=True, timeout=120)
    assert_one_line(proc, "2 Ray workers x 1 CPU (distributed.workers x "
                          "distributed.worker_cpus) need 2 CPUs; the Ray cluster has 1")
    assert not run.exists()


def test_a_local_instance_leaves_selfplays_signal_handlers_in_place() -> None:
    """``ray.init`` installed its own SIGTERM handler (exit at once: no checkpoint, Ray's
    agents left running after a SIGTERM during start-up); the handlers in place before are
    restored, and shutting down ignores a second Ctrl-C instead of being cut short."""
    import signal

    def mine(signum: int, frame: object) -> None: ...

    before = {sig: signal.signal(sig, mine) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        session = connect("local", num_cpus=1)
        try:
            assert signal.getsignal(signal.SIGTERM) is mine
            assert signal.getsignal(signal.SIGINT) is mine
        finally:
            from games.workers import ray_cluster

            with ray_cluster.signals_held():
                assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            session.close()
        assert signal.getsignal(signal.SIGTERM) is mine and not session.ray.is_initialized()
        assert session.temp_dir is not None and not session.temp_dir.exists()
        # nor does RAY_TMPDIR name the removed folder for later sessions and child processes
        assert os.environ.get("RAY_TMPDIR") != str(session.temp_dir)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_signal_during_a_local_start_up_stops_it_whole() -> None:
    """SIGTERM while ``ray.init`` starts a local instance: Ray's own handler exited midway,
    leaving its agents running (180 MB each, parent 1); the signal is now held until the
    instance is up, then reaches selfplay's handler, and the instance is shut down."""
    import signal
    import threading

    from selfplay.interrupts import Terminated

    def raising(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, raising)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM))
    try:
        import ray

        timer.start()
        with pytest.raises(Terminated):
            connect("local", num_cpus=1)
        assert not ray.is_initialized()
        assert signal.getsignal(signal.SIGTERM) is raising
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)


def test_a_local_instance_under_a_deep_tmpdir_keeps_its_sockets_short(tmp_path,
                                                                      monkeypatch) -> None:
    """Ray's socket paths under the instance's folder hold at most 107 bytes: under a deep
    $TMPDIR (a test's, a job scheduler's) the start failed with Ray's AF_UNIX error."""
    from games.workers.ray_cluster import SOCKET_PATH_LIMIT, SOCKET_SUFFIX, local_instance_folder

    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = local_instance_folder()
    try:
        assert folder.is_dir() and folder.parent == Path("/tmp")
        assert len(os.fsencode(folder)) + SOCKET_SUFFIX <= SOCKET_PATH_LIMIT
    finally:
        folder.rmdir()
    short = Path(tempfile.mkdtemp(prefix="sp-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    try:
        folder = local_instance_folder()
        assert folder.parent == short  # $TMPDIR kept where it fits
        folder.rmdir()
    finally:
        short.rmdir()


def test_a_sigterm_during_a_local_start_up_with_no_handler_ends_it_first() -> None:
    """With SIGTERM's default action (tools/ scripts, library callers): the held signal was
    sent again as ``ray.init`` returned, ending the process before the instance was shut
    down (its agents and folder stayed). It is shut down first, then the signal ends the
    process as it would have."""
    script = ("import os, signal, threading\n"
              "from games.workers.ray_cluster import connect\n"
              "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
              "connect('local', num_cpus=1)\n"
              "print('not ended')\n")
    # a short $TMPDIR of its own (pytest's are too deep for Ray's sockets): what is left shows
    tmp = Path(tempfile.mkdtemp(prefix="sp-", dir="/tmp"))
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "TMPDIR": str(tmp)})
        assert proc.returncode == -15 and "not ended" not in proc.stdout, proc.stderr
        assert not list(tmp.glob("selfplay-ray-*/session_*")), "the instance was left"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
