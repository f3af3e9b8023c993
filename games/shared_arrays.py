"""NumPy arrays in one memory-mapped file shared by a parent and its worker processes.

Worker processes that return fixed-shape arrays every step (observations, masks, rewards) write
them here instead of pickling them through a pipe; the pipe then carries a few bytes. The parent
creates the file (in ``/dev/shm`` where it exists, so it never touches a disk), the workers map it
by path, then the parent unlinks the path: from then on the memory lives while some process maps
it and the kernel frees it when the last one exits, even after a SIGKILL.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_ALIGN = 64  # bytes: every array starts on its own cache line


@dataclass(frozen=True)
class ArraySpec:
    """One named array: its shape and NumPy dtype string (``"uint8"``, ``"bool"``, ...)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def _offsets(specs: tuple[ArraySpec, ...]) -> tuple[list[int], int]:
    offsets, size = [], 0
    for spec in specs:
        offsets.append(size)
        size += -(-spec.nbytes // _ALIGN) * _ALIGN
    return offsets, max(size, _ALIGN)


class SharedArrays:
    """Named arrays backed by one shared memory map; index by name for a writable view."""

    def __init__(self, specs: tuple[ArraySpec, ...], path: Path, create: bool) -> None:
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate array names in {names}")
        self.specs = specs
        self.path = path
        offsets, size = _offsets(specs)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            elif os.fstat(fd).st_size != size:
                raise ValueError(f"shared arrays file {path} has {os.fstat(fd).st_size} bytes, "
                                 f"the layout needs {size}")
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._arrays = {
            spec.name: np.frombuffer(self._map, dtype=spec.dtype,
                                     count=int(np.prod(spec.shape, dtype=np.int64)),
                                     offset=offset).reshape(spec.shape)
            for spec, offset in zip(specs, offsets, strict=True)}

    @classmethod
    def create(cls, specs: tuple[ArraySpec, ...], prefix: str = "selfplay-") -> SharedArrays:
        """A new zero-filled file of ``specs`` (remember to :meth:`unlink` it once mapped)."""
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        fd, name = tempfile.mkstemp(prefix=prefix, dir=folder)
        os.close(fd)
        os.unlink(name)  # recreated exclusively below, so no other process can own it
        return cls(specs, Path(name), create=True)

    @classmethod
    def attach(cls, specs: tuple[ArraySpec, ...], path: Path) -> SharedArrays:
        """Map the file another process created with the same ``specs``."""
        return cls(specs, path, create=False)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __contains__(self, name: str) -> bool:
        return name in self._arrays

    def unlink(self) -> None:
        """Remove the path; the memory stays until every process has unmapped it."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
