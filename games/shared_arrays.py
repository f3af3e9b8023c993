"""NumPy arrays in one memory-mapped file shared by a parent and its worker processes.

Worker processes that return fixed-shape arrays every step (observations, masks, rewards) write
them here instead of pickling them through a pipe; the pipe then carries a few bytes. The parent
creates the file (in ``/dev/shm`` where it exists and has room, so it never touches a disk), the
workers map it by path, then the parent unlinks the path: from then on the memory lives while
some process maps it and the kernel frees it when the last one exits, even after a SIGKILL.

The file's space is reserved when it is created (``posix_fallocate``): a full ``/dev/shm`` (64 MB
in a default Docker container) is then an error at creation, with a fall-back to the temporary
directory, instead of a SIGBUS on the first write beyond its limit.
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
    """One named array: its shape and NumPy dtype name (``"uint8"``, ``"bool"``, ...)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


def _offsets(specs: tuple[ArraySpec, ...]) -> tuple[list[int], int]:
    """Each array's byte offset and the file size."""
    offsets, size = [], 0
    for spec in specs:
        offsets.append(size)
        size += -(-spec.nbytes // _ALIGN) * _ALIGN
    return offsets, max(size, _ALIGN)


def _reserve(fd: int, size: int) -> None:
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)  # ENOSPC now, not SIGBUS later
    else:  # macOS: sparse, like shared memory there
        os.ftruncate(fd, size)


def default_folders() -> list[str]:
    """Where :meth:`SharedArrays.create` tries to put its file, in order."""
    return [f for f in ("/dev/shm",) if os.path.isdir(f)] + [tempfile.gettempdir()]


class SharedArrays:
    """Named arrays backed by one shared memory map; index by name for a writable view."""

    def __init__(self, specs: tuple[ArraySpec, ...], path: Path, memory: mmap.mmap) -> None:
        self.specs = specs
        self.path = path
        self._map = memory
        offsets, _ = _offsets(specs)
        self._arrays = {
            spec.name: np.frombuffer(memory, dtype=spec.dtype, count=spec.size,
                                     offset=offset).reshape(spec.shape)
            for spec, offset in zip(specs, offsets, strict=True)}

    @staticmethod
    def _check(specs: tuple[ArraySpec, ...]) -> int:
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate array names in {names}")
        return _offsets(specs)[1]

    @classmethod
    def create(cls, specs: tuple[ArraySpec, ...], prefix: str = "selfplay-",
               folders: list[str] | None = None) -> SharedArrays:
        """A new zero-filled file of ``specs`` in the first of ``folders`` with room for it
        (default: :func:`default_folders`). :meth:`unlink` it once every process mapped it."""
        size = cls._check(specs)
        errors = []
        for folder in folders if folders is not None else default_folders():
            try:
                fd, name = tempfile.mkstemp(prefix=prefix, dir=folder)
            except OSError as exc:
                errors.append(f"{folder}: {exc.strerror or exc}")
                continue
            try:
                _reserve(fd, size)
                memory = mmap.mmap(fd, size)
            except OSError as exc:
                os.unlink(name)
                errors.append(f"{folder}: {exc.strerror or exc}")
                continue
            finally:
                os.close(fd)
            return cls(specs, Path(name), memory)
        raise OSError(f"no room for {size / 2**20:.1f} MiB of shared arrays ("
                      + "; ".join(errors) + ")")

    @classmethod
    def attach(cls, specs: tuple[ArraySpec, ...], path: Path) -> SharedArrays:
        """Map the file another process created with the same ``specs``."""
        size = cls._check(specs)
        fd = os.open(path, os.O_RDWR)
        try:
            found = os.fstat(fd).st_size
            if found != size:
                raise ValueError(f"shared arrays file {path} has {found} bytes, the layout "
                                 f"needs {size}")
            memory = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        return cls(specs, path, memory)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def unlink(self) -> None:
        """Remove the path; the memory stays until every process has unmapped it."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
