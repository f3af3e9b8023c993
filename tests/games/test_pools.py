"""Worker processes end with their parent (:func:`games.pools.exit_with_parent`), also one
whose parent died while it was still starting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("parent_dies", ["before", "after"])
def test_a_worker_ends_when_its_parent_is_killed(tmp_path: Path, parent_dies: str) -> None:
    """The parent is SIGKILLed before the worker calls exit_with_parent (a pool worker still
    importing its initializer's modules: it then saw pid 1 as its parent and never ended), or
    after."""
    delay = 3.0 if parent_dies == "before" else 0.0
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing, sys, time
        from games.pools import exit_with_parent

        def worker():
            time.sleep({delay})
            exit_with_parent(poll_seconds=0.1)
            time.sleep(120)

        if __name__ == "__main__":
            child = multiprocessing.get_context("spawn").Process(target=worker)
            child.start()
            print(child.pid, flush=True)
            time.sleep(120)
        """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        if parent_dies == "after":
            time.sleep(1.0)  # the worker is started and watching
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + delay + 10
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(worker)
    finally:
        if _running(worker):
            os.kill(worker, signal.SIGKILL)


def test_a_detached_worker_outlives_stop_signals_sent_while_it_starts() -> None:
    """Guards: Ctrl-C on a training run's process group while its rater was still importing
    torch ended the rater with a KeyboardInterrupt traceback (its initializer, which ignores
    the signal, had not run yet). A DetachedPool worker starts with the stop signals held and
    then ignores them: it survives a stream of SIGINT, SIGTERM and SIGHUP from its first
    instant and does its work; the parent's own handlers still get theirs afterwards."""
    import torch

    from games.pools import DetachedPool, stop_process_pool, stop_signals_held

    pool = DetachedPool(1)
    try:
        future = pool.submit(torch.get_num_threads)  # the worker imports torch first
        child = next(iter(pool._processes.values())).pid
        sent = 0
        while not future.done():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                os.kill(child, sig)
                sent += 1
            time.sleep(0.002)
        assert future.result(timeout=60) >= 1 and sent > 30
    finally:
        stop_process_pool(pool, kill=True)
    import threading

    idle = threading.Event()  # another thread of this process may take the signal
    other = threading.Thread(target=idle.wait, daemon=True)
    other.start()
    reached = False
    try:
        with pytest.raises(KeyboardInterrupt):  # held to the block's end, then delivered
            with stop_signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # the handler would run here were it not held
                reached = True
            time.sleep(1)
    finally:
        idle.set()
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("ours", [True, False])
def test_the_resource_tracker_outlives_a_hangup(ours: bool) -> None:
    """Guards (signals review): a terminal closed sends SIGHUP to the whole process group; it
    killed multiprocessing's resource tracker, whose relaunch printed a KeyError traceback for
    each of the run's semaphores. Started by :func:`start_resource_tracker`, it lives on (and
    as multiprocessing starts it, it dies: the check can fail)."""
    start = ("from games.pools import start_resource_tracker; start_resource_tracker()" if ours
             else "resource_tracker.ensure_running()")
    code = ("import os, signal, time\n"
            "from multiprocessing import resource_tracker\n"
            f"{start}\n"
            "pid = resource_tracker._resource_tracker._pid\n"
            "os.kill(pid, signal.SIGHUP)\n"
            "time.sleep(0.5)\n"
            "done, _ = os.waitpid(pid, os.WNOHANG)\n"
            "print('alive' if done == 0 else 'dead')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == ("alive" if ours else "dead"), proc.stderr
