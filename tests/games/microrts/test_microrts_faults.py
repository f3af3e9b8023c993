"""Faults inside the engine: Java exceptions surface as GameError, Ctrl-C ends the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from proc_helpers import count_matches, signal_when

from games.core import GameError

REPO = Path(__file__).resolve().parents[3]


def test_java_exception_in_step_is_a_game_error(make_game, monkeypatch) -> None:
    """An out-of-range unit type makes the engine throw inside gameStep: the GameError carries
    the Java class and message, the game refuses to step until reset, and reset recovers.
    (The adapter refuses such actions itself; its check is widened here to reach the engine's
    fault path.)"""
    monkeypatch.setattr("games.microrts.conversions._NVEC", np.full(7, 1000, np.int64))
    game = make_game(2, bots=["Passive"])
    batch = game.reset()
    actions = np.zeros((2, 1, 64, 7), np.int64)
    cell = int(np.flatnonzero(batch.action_mask[0, 0, :, 4])[0])  # the base may produce
    actions[0, 0, cell, [0, 5]] = (4, 99)  # produce unit type 99 (there are 7)
    with pytest.raises(GameError, match=r"IndexOutOfBoundsException: Index 99 out of bounds"):
        game.step(actions)
    with pytest.raises(GameError, match=r"call reset\(\)"):
        game.step(np.zeros_like(actions))
    batch = game.reset()
    for _ in range(3):
        batch = game.step(np.zeros_like(actions))
    assert batch.obs[:, 0, 14:21].sum() > 0


def test_no_jpype_is_one_line_naming_the_extra() -> None:
    """Without JPype1 (installed with the ``microrts`` extra) ``setup microrts`` says what to
    install instead of a ModuleNotFoundError traceback."""
    code = ("import sys; sys.modules['jpype'] = None\n"
            "from selfplay.cli import main\nsys.exit(main(['setup', 'microrts']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: microRTS runs its Java engine through JPype1, which is not installed here: pip "
        "install 'selfplay[microrts]' (or make install-dev)"], proc.stderr


def test_an_engine_folder_that_cannot_be_made_names_the_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    env = {**os.environ, "SELFPLAY_MICRORTS_HOME": str(blocker / "engine")}
    proc = subprocess.run([sys.executable, "-m", "selfplay.cli", "setup", "microrts"],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: cannot put the microRTS engine into SELFPLAY_MICRORTS_HOME={blocker}/engine: "
        f"File exists ({blocker}); set SELFPLAY_MICRORTS_HOME (or XDG_CACHE_HOME) to a "
        "writable folder"], proc.stderr
    assert blocker.read_text() == "mine"


def test_map_the_engine_cannot_load(make_game, engine_home, tmp_path: Path) -> None:
    """A map edited after it was checked, with a unit type the engine does not know: the
    engine's NullPointerException surfaces at reset, naming the env and its map (a map
    holding one from the start is refused before the engine starts)."""
    text = (engine_home / "maps/8x8/basesWorkers8x8.xml").read_text()
    bad = tmp_path / "dragon8x8.xml"
    bad.write_text(text)
    game = make_game(3, maps=["basesWorkers8x8", str(bad)], bots=["WorkerRush"],
                     alternate_sides=False)  # env 1 plays the bad map; env 0 starts the client
    bad.write_text(text.replace('type="Worker" ID="9"', 'type="Dragon" ID="9"'))
    with pytest.raises(GameError, match=r"reset of env 1 \(map .*dragon8x8.xml.*"
                                        r"NullPointerException"):
        game.reset()
    with pytest.raises(GameError, match="engine failed"):
        game.step(np.zeros((3, 1, 64, 7), np.int64))
    with pytest.raises(GameError, match="dragon8x8.xml'?: unit '9' has type 'Dragon'"):
        make_game(1, map=str(bad))


_STEP_FOREVER = """
import sys
import jpype
import numpy as np
from games.microrts import make

game = make("microrts", num_envs=4, map="basesWorkers16x16", bots=["CoacAI"])
marker = sys.argv[1]
open(marker, "w").close()
jpype.JClass("java.io.File")(marker).deleteOnExit()  # deleted by the JVM's shutdown sequence
game.reset()
actions = np.zeros((4, 1, 256, 7), np.int64)
print("stepping", flush=True)
while True:
    game.step(actions)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_promptly_and_shuts_the_jvm_down(engine_home, tmp_path: Path) -> None:
    """SIGINT while stepping: KeyboardInterrupt in Python (not a kill from Java's handler), the
    process exits (within seconds on an idle machine), and the JVM runs its shutdown sequence."""
    marker = tmp_path / "jvm-alive"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _STEP_FOREVER, str(marker)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stepping() -> bool:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "stepping", proc.stderr.read()  # type: ignore
        assert marker.exists()
        time.sleep(0.5)
        return True

    # the script steps forever: exiting at all is the signal's doing. A process still running
    # 60 s after it fails the test (a hang); how fast it stops is no assertion under load.
    err, _ = signal_when(proc, stepping, signal.SIGINT, timeout=60)
    assert "KeyboardInterrupt" in err, err
    assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), proc.returncode
    assert not marker.exists(), "the JVM did not run its shutdown sequence"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_ends_a_microrts_tournament_cleanly(engine_home, tmp_path: Path) -> None:
    """SIGTERM to ``selfplay league tournament`` between engine games: Python, not Java's
    handler, gets it (the JVM runs with -Xrs), so the command stops within seconds with status
    143 and one line, and the stored matches are whole: the ratings equal their replay. Before,
    Java's shutdown ran under Python and the next engine call failed as an "engine error" (or
    hung)."""
    from league.db import LeagueDB

    path = tmp_path / "league.db"
    command = [sys.executable, "-m", "selfplay.cli", "league", "tournament", "--game",
               "microrts", "--players", "WorkerRush", "RandomBiased", "--games-per-pair", "2000",
               "--map", "basesWorkers8x8", "--num-envs", "4", "--db", str(path)]
    proc = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the 4,000 games take far longer: exiting at all is the signal's doing (60 s: a hang)
    err, _ = signal_when(proc, lambda: count_matches(path) >= 8, signal.SIGTERM, wait=120,
                         timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "interrupted by SIGTERM", err
    assert "Traceback" not in err and "engine error" not in err, err
    with LeagueDB(path, game="microrts") as league:
        assert 8 <= league.match_count() < 4000
        assert league.replay_ratings() == league.ratings()


def test_sigterm_stops_bot_game_worker_processes(engine_home) -> None:
    """An interrupt while bot games run in worker processes terminates the workers at once
    instead of waiting for their games (chunks of games can run for minutes)."""
    import threading

    from games.microrts.botmatch import BotGame, play_bot_games

    games = [BotGame("Passive", "Passive", "basesWorkers8x8", max_steps=10**9, seed=s)
             for s in range(4)]
    before = set(_children())
    timer = threading.Timer(8.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            play_bot_games(games, parallel=2, processes=2)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 25
    deadline = time.monotonic() + 5
    while set(_children()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    left = set(_children()) - before
    assert not left, _described(left)


def _children_of(parent: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of ``parent``'s live children in the order they started, read
    from ``/proc`` (slim images have no ``ps``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # after "(comm)": state ppid ... starttime (the 20th)
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # exited meanwhile
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append((int(fields[19]), int(entry.name), args))
    return [(pid, args) for _, pid, args in sorted(found)]


def _children() -> list[int]:
    """PIDs of this process's live children, aside from multiprocessing's resource tracker
    (it serves every spawn of the process and stays)."""
    return [pid for pid, args in _children_of(os.getpid()) if "resource_tracker" not in args]


def _described(pids: set[int] | list[int]) -> str:
    """The command lines of ``pids``, for a failed assertion."""
    lines = []
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            args = "(exited)"
        lines.append(f"{pid} {args}")
    return "\n".join(lines)


def _session_processes(session: int) -> list[int]:
    """PIDs of live processes in session ``session`` (children stay in it, also once orphaned).

    Read from ``/proc/<pid>/stat``, which any process may read and which holds the session from
    the ``setsid`` before ``exec``; a just-started process's ``environ`` can read empty for a
    moment after ``Popen`` returns (the kernel sets it late in ``exec``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # after "(comm)": state ppid pgrp session ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def small_8x8_training(run_dir: Path) -> list[str]:
    """``selfplay train`` of microRTS 8x8 in ``run_dir``: 4 envs (2 self-play) on 2 worker
    processes, endless until stopped."""
    return [sys.executable, "-m", "selfplay.cli", "train", "--game", "microrts", "--run-dir",
            str(run_dir), "--no-progress", "--total-steps", "100000000",
            "--set", "game.num_envs=4", "--set", "game.options.map=basesWorkers8x8",
            "--set", "game.options.num_selfplay_envs=2", "--set", "game.options.workers=2",
            "--set", "game.options.bots=[WorkerRush]"]  # the one pair of bot envs' bot


@pytest.mark.slow  # a microRTS run with workers and a rater, stopped: ~35 s (make bench)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_microrts_training_with_its_workers_and_rater(engine_home,
                                                                    tmp_path: Path) -> None:
    """Ctrl-C to ``selfplay train --game microrts`` with env worker processes (one JVM each)
    and the league's rater process: the update in progress finishes, a checkpoint is written,
    the command exits 130 within seconds, and no process of the run is left behind."""
    run_dir = tmp_path / "run"
    command = [*small_8x8_training(run_dir),
               "--set", "game.options.bots=[WorkerRush]", "--set", "ppo.num_steps=32",
               "--set", "league.snapshot_every=1", "--set", "league.eval_every=1",
               "--set", "league.eval_games=2", "--set", "league.eval_envs=2",
               "--set", "league.anchors=[WorkerRush]", "--set", "network.channels=[8,16]",
               "--set", "log.tensorboard=false"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    metrics = run_dir / "metrics.jsonl"

    seen: list[int] = []

    def rating_under_way() -> bool:  # two updates done; the rater has played games
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        seen[:] = _session_processes(proc.pid)
        return len(lines) >= 2 and count_matches(run_dir / "league.db") > 0

    assert proc.pid in _session_processes(proc.pid)
    err, elapsed = signal_when(proc, rating_under_way, signal.SIGINT, wait=240, timeout=90)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert elapsed < 60, f"took {elapsed:.1f} s to stop"  # ~2 s on an idle 2-core machine
    assert "Traceback" not in err and "checkpoint saved" in err, err
    assert len(seen) >= 4, seen  # the trainer, two env workers and the rater were all running
    deadline = time.monotonic() + 15
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _session_processes(proc.pid)
    assert not left, _described(left)
    import json

    from selfplay.checkpoint import load_checkpoint

    steps = max(json.loads(line)["step"] for line in metrics.read_text().splitlines())
    (last,) = sorted((run_dir / "checkpoints").glob("*.pt"))[-1:]
    assert load_checkpoint(last)["counters"]["global_step"] >= steps  # the update finished


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_lost_mid_run_stops_training_naming_the_checkpoint(engine_home,
                                                                     tmp_path: Path) -> None:
    """A worker process killed during training: the command stops in one line with the
    worker's error, the update it stopped in and the checkpoint to resume from."""
    run_dir = tmp_path / "run"
    command = [*small_8x8_training(run_dir), "--set", "ppo.num_steps=16",
               "--set", "league.enabled=false",
               "--set", "checkpoint.every_updates=1", "--set", "network.channels=[8,16]",
               "--set", "log.tensorboard=false"]
    proc = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not list((run_dir / "checkpoints").glob("*.pt")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        children = _children_of(proc.pid)  # the workers in the order they started
        workers = [pid for pid, args in children if "spawn_main" in args]
        assert len(workers) == 2, children
        os.kill(workers[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "worker process of envs 2..3 died; the run stopped during update" in lines[0]
    assert "its last checkpoint is " in lines[0] and "selfplay train --resume" in lines[0]
