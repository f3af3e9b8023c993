"""tools/lux_trajectory.py compare: what differs between two dumps, plane by plane (dumps made
here from arrays of the adapter's shapes; the dump itself plays the real engine in the tool)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from games.lux.layout import OBS_PLANES, PLANE
from tools.lux_trajectory import PARTS, compare


def _dump(path: Path, obs: np.ndarray, mask: np.ndarray) -> Path:
    arrays: dict[str, Any] = {"obs": obs, "action_mask": mask,
                              "reward": np.zeros((3, 2, 2), np.float32),
                              "terminated": np.zeros((3, 2), bool)}
    assert set(arrays) == set(PARTS)
    np.savez_compressed(path, **arrays)
    return path


def test_identical_dumps_differ_nowhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    obs = np.zeros((3, 2, 2, len(OBS_PLANES), 4, 4), np.uint8)
    mask = np.ones((3, 2, 2, 16, 5), bool)
    a = _dump(tmp_path / "a.npz", obs, mask)
    assert compare(a, a) == 0
    assert "obs: 0 of" in capsys.readouterr().out


def test_differences_are_counted_and_named_by_plane(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    obs = np.zeros((3, 2, 2, len(OBS_PLANES), 4, 4), np.uint8)
    mask = np.ones((3, 2, 2, 16, 5), bool)
    a = _dump(tmp_path / "a.npz", obs, mask)
    other = obs.copy()
    other[1, 0, 1, PLANE["ore"], 2, 3] = 255
    other[2, 1, 0, PLANE["unit_power"], 0, 0] = 1
    other_mask = mask.copy()
    other_mask[0, 0, 0, 5, 1] = False
    b = _dump(tmp_path / "b.npz", other, other_mask)
    assert compare(a, b) == 3
    out = capsys.readouterr().out
    assert "obs: 2 of" in out and "largest by 255" in out
    assert "first at step 2" in out
    assert f"{PLANE['ore']} ore: 1, 255" in out and f"{PLANE['unit_power']} unit_power: 1, 1" in out
    assert "action_mask: 1 of" in out
