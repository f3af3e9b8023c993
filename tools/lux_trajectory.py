"""Lux device parity: dump a seeded trajectory of the adapter's arrays, or compare two dumps.

    python tools/lux_trajectory.py dump runs/bench/lux_traj_cpu.npz        # on each machine
    python tools/lux_trajectory.py compare runs/bench/lux_traj_cpu.npz runs/bench/lux_traj_gpu.npz

``dump`` plays the trajectory of the adapter's stored-hash test (4 games, seed 21, 30 steps of
random legal orders drawn from the masks with numpy's seed 21) and saves every step's
observations, masks, rewards and ends. ``compare`` says, per part, how many values differ and
by how much, and for the observations which planes: what differs between jax on a CPU and on
a GPU, where one hash could only say that something does.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from games.batches import random_actions
from games.files import atomic_write_bytes
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.layout import OBS_PLANES
from selfplay.cli_common import UserError, first_paragraph, run_tool

PARTS = ("obs", "action_mask", "reward", "terminated")


def dump(path: Path, *, seed: int = 21, steps: int = 30, num_envs: int = 4) -> None:
    """Play the seeded trajectory and save its arrays, one row per step."""
    game = LuxVecGame(LuxOptions(max_steps=40), num_envs, seed=seed)
    batch = game.reset()
    rng = np.random.default_rng(seed)
    rows: dict[str, list[np.ndarray]] = {name: [] for name in PARTS}
    for _ in range(steps):
        actions = random_actions(game.spec.action_space, batch.action_mask, rng, (num_envs, 2))
        batch = game.step(actions)
        for name in PARTS:
            rows[name].append(np.asarray(getattr(batch, name)))
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {name: np.stack(rows[name]) for name in PARTS}
    # written whole, under the exact name given (np.savez would add .npz to a name)
    atomic_write_bytes(path, lambda handle: np.savez_compressed(handle, **arrays))


def read_dump(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a :func:`dump` file; a :class:`UserError` for another file."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: np.asarray(data[name]) for name in PARTS}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        why = f"no array {exc}" if isinstance(exc, KeyError) else \
            (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"{path} is not a trajectory dump ({why})") from exc


def compare(a_path: Path, b_path: Path) -> int:
    """Print what differs between two dumps; the number of differing values."""
    a, b = (read_dump(p) for p in (a_path, b_path))
    total = 0
    for name in PARTS:
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape:
            print(f"{name}: shapes differ {x.shape} vs {y.shape}")
            total += max(x.size, y.size)
            continue
        diff = np.abs(x - y)
        count = int((diff > 0).sum())
        total += count
        print(f"{name}: {count} of {x.size} values differ, largest by {diff.max():g}")
        if name == "obs" and count:
            steps = diff.shape[0]
            per_plane = (diff > 0).sum(axis=(0, 1, 2, 4, 5))
            first = int(np.argmax((diff > 0).reshape(steps, -1).any(axis=1)))
            print(f"  first at step {first + 1}; planes (index: values differing, largest):")
            for plane in np.flatnonzero(per_plane):
                print(f"  {plane} {OBS_PLANES[plane]}: {per_plane[plane]}, "
                      f"{diff[:, :, :, plane].max():g}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.path)
        return
    sys.exit(1 if compare(args.a, args.b) else 0)


if __name__ == "__main__":
    run_tool(main)
