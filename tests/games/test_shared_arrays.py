"""Arrays shared through one memory-mapped file: what a spawned process writes, the creator
reads; the path is gone once unlinked while the mapping lives on; a layout mismatch is refused."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest

from games.shared_arrays import ArraySpec, SharedArrays

SPECS = (ArraySpec("obs", (3, 2, 5), "uint8"), ArraySpec("mask", (3, 7), "bool"),
         ArraySpec("reward", (3,), "float32"))


def _child_writes(path: str) -> None:
    arrays = SharedArrays.attach(SPECS, Path(path))
    arrays["obs"][1] = 7
    arrays["mask"][:, 3] = True
    arrays["reward"][:] = [0.5, -1.0, 2.0]


def test_a_spawned_process_writes_what_the_creator_reads() -> None:
    arrays = SharedArrays.create(SPECS)
    try:
        assert all(not arrays[s.name].any() for s in SPECS)  # zero-filled
        proc = mp.get_context("spawn").Process(target=_child_writes, args=(str(arrays.path),))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
    finally:
        arrays.unlink()
    assert not arrays.path.exists()  # the mapping outlives the path
    np.testing.assert_array_equal(arrays["obs"][1], np.full((2, 5), 7, np.uint8))
    assert not arrays["obs"][[0, 2]].any()
    np.testing.assert_array_equal(arrays["mask"].sum(0), [0, 0, 0, 3, 0, 0, 0])
    np.testing.assert_array_equal(arrays["reward"], np.float32([0.5, -1.0, 2.0]))
    assert arrays["reward"].dtype == np.float32 and arrays["obs"].shape == (3, 2, 5)


def test_arrays_do_not_overlap() -> None:
    arrays = SharedArrays.create(SPECS)
    arrays.unlink()
    arrays["obs"][:] = 255
    arrays["reward"][:] = -1.0
    assert not arrays["mask"].any()
    assert (arrays["obs"] == 255).all()


def test_a_different_layout_or_duplicate_names_are_refused() -> None:
    arrays = SharedArrays.create(SPECS)
    try:
        with pytest.raises(ValueError, match="the layout needs"):
            SharedArrays.attach((ArraySpec("obs", (30, 2, 5), "uint8"),), arrays.path)
    finally:
        arrays.unlink()
    with pytest.raises(ValueError, match="duplicate array names"):
        SharedArrays.create((SPECS[0], SPECS[0]))
    with pytest.raises(FileNotFoundError):
        SharedArrays.attach(SPECS, arrays.path)


def test_create_falls_back_to_the_next_folder(tmp_path: Path) -> None:
    """A folder that cannot take the file (missing here; full or read-only elsewhere) is
    skipped; when none can, the error names each folder and why."""
    arrays = SharedArrays.create(SPECS, folders=[str(tmp_path / "missing"), str(tmp_path)])
    try:
        assert arrays.path.parent == tmp_path
        assert arrays.path.stat().st_size >= sum(s.nbytes for s in SPECS)
    finally:
        arrays.unlink()
    with pytest.raises(OSError, match=r"no room for .* MiB of shared arrays \(.*missing"):
        SharedArrays.create(SPECS, folders=[str(tmp_path / "missing")])
