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

from games.core import GameError

REPO = Path(__file__).resolve().parents[3]


def test_java_exception_in_step_is_a_game_error(make_game) -> None:
    """An out-of-range unit type makes the engine throw inside gameStep: the GameError carries
    the Java class and message, the game refuses to step until reset, and reset recovers."""
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


def test_map_the_engine_cannot_load(make_game, engine_home, tmp_path: Path) -> None:
    """A well-formed map with a unit type the engine does not know: the engine's
    NullPointerException surfaces at reset, naming the env and its map."""
    text = (engine_home / "maps/8x8/basesWorkers8x8.xml").read_text()
    bad = tmp_path / "dragon8x8.xml"
    bad.write_text(text.replace('type="Worker" ID="9"', 'type="Dragon" ID="9"'))
    game = make_game(3, maps=["basesWorkers8x8", str(bad)], bots=["WorkerRush"],
                     alternate_sides=False)  # env 1 plays the bad map; env 0 starts the client
    with pytest.raises(GameError, match=r"reset of env 1 \(map .*dragon8x8.xml.*"
                                        r"NullPointerException"):
        game.reset()
    with pytest.raises(GameError, match="engine failed"):
        game.step(np.zeros((3, 1, 64, 7), np.int64))
    with pytest.raises(GameError, match="failed to start on .*dragon8x8.xml.*NullPointer"):
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
    process exits within seconds, and the JVM runs its shutdown sequence."""
    marker = tmp_path / "jvm-alive"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _STEP_FOREVER, str(marker)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "stepping", proc.stderr.read()  # type: ignore
        assert marker.exists()
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert elapsed < 10, f"took {elapsed:.1f} s to stop"
    assert "KeyboardInterrupt" in err, err
    assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), proc.returncode
    assert not marker.exists(), "the JVM did not run its shutdown sequence"
