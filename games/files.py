"""Files every layer writes: atomic replacement, and the checkpoint container of tensors, arrays
and plain values, loaded without executing code.

A checkpoint is a nested dict of tensors and plain Python values saved with ``torch.save``
and read back with ``torch.load(weights_only=True)``. NumPy arrays are stored as tensors
(tagged, so they come back as arrays), since the safe unpickler refuses NumPy objects.
What a checkpoint holds (a training run's state, a league snapshot) is its writer's business;
this module only knows the container.
"""

from __future__ import annotations

import errno
import os
import pickle
import stat
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT = "selfplay-checkpoint"
VERSION = 1
_NP_TAG = "__ndarray__"


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt, or does not match what it is loaded into."""


def to_safe(obj: Any) -> Any:
    """Replace NumPy arrays/scalars with tagged tensors so the safe unpickler accepts them."""
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("object arrays cannot be stored in a checkpoint")
        if obj.dtype.kind == "U" or obj.dtype.kind == "S":
            return {_NP_TAG: obj.tolist(), "dtype": obj.dtype.str}
        # np.array, not np.ascontiguousarray: the latter turns a 0-d array into shape (1,)
        return {_NP_TAG: torch.from_numpy(np.array(obj, order="C", copy=True))}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_safe(v) for v in obj]
    return obj


def from_safe(obj: Any) -> Any:
    """Inverse of :func:`to_safe`."""
    if isinstance(obj, dict):
        if _NP_TAG in obj:
            value = obj[_NP_TAG]
            if isinstance(value, torch.Tensor):
                return value.numpy()
            return np.asarray(value, dtype=obj["dtype"])
        return {k: from_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_safe(v) for v in obj]
    return obj


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode(path: Path) -> int:
    """The permissions a rewrite of ``path`` gets: its own when it exists, else those of a
    file ``open()`` creates (0666 less the umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Call ``write(file)`` on a temp file beside ``path``, fsync, then rename over ``path``.

    If anything fails, ``path`` keeps its previous content and the temp file is removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _new_file_mode(path))  # mkstemp's 0600 would hide it from the group
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_path(path: Path, write: Any) -> None:
    """Call ``write(temp_path)`` for writers that take a file name (a video encoder): the temp
    file sits beside ``path`` with its suffix (writers pick the format by it) and is renamed
    over ``path`` once complete; a failure leaves ``path`` as it was and no temp file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                    dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        mode = _new_file_mode(path)
        write(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a killed writer leaves the old file or
    none, never a truncated one."""
    data = text.encode("utf-8")
    atomic_write_bytes(Path(path), lambda handle: handle.write(data))


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Atomically save ``payload`` (tensors, arrays, plain values) to ``path``."""
    path = Path(path)
    data = {"format": FORMAT, "version": VERSION, **to_safe(payload)}

    def write(handle: Any) -> None:
        try:
            torch.save(data, handle)
        except RuntimeError as exc:  # torch reports a failed write (a full disk) this way
            raise OSError(errno.EIO, f"the write failed ({str(exc).splitlines()[0][:120]}; "
                          "is the disk full?)") from exc

    atomic_write_bytes(path, write)
    return path


def outermost_new_folder(folder: Path) -> Path | None:
    """The outermost of ``folder`` and its parents that does not exist yet (None if it
    exists): what making ``folder`` creates, and what to remove to leave nothing behind."""
    made = None
    for path in (folder.absolute(), *folder.absolute().parents):
        if path.exists():
            break
        made = path
    return made


def remove_stale_temp_files(folder: Path, patterns: tuple[str, ...] = (".*.tmp",)
                            ) -> list[Path]:
    """Remove the temp files of :func:`atomic_write_bytes` (``.NAME.*.tmp``; ``patterns``
    narrows them to a writer's own) that writers killed mid-write left in ``folder`` (call
    only when no other process writes there); the paths removed."""
    stale = sorted({p for pattern in patterns for p in folder.glob(pattern)}
                   if folder.is_dir() else [])
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint without executing code; :class:`CheckpointError` if unusable."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    if not head:
        raise CheckpointError(f"corrupt checkpoint {path}: the file is empty")
    if head != b"PK\x03\x04" and not head.startswith(b"\x80"):  # torch's zip, or a pickle
        raise CheckpointError(f"{path} is not a selfplay checkpoint (not a file torch.save "
                              "writes)")
    if head == b"PK\x03\x04" and not zipfile.is_zipfile(path):  # torch said "Errno 22"
        raise CheckpointError(f"corrupt checkpoint {path}: the file is cut short (its archive "
                              "has no end)")
    try:
        with warnings.catch_warnings():  # a plain pickle: "Detected pickle protocol 4"
            warnings.simplefilter("ignore", UserWarning)
            data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only" not in str(exc).lower():  # a damaged pickle
            raise CheckpointError(f"corrupt or unreadable checkpoint {path}: "
                                  f"{str(exc).strip()[:160]}") from exc
        raise CheckpointError(  # classes the weights-only loader refuses
            f"{path} is not a selfplay checkpoint: it holds objects that only executing its "
            "code could load, which selfplay never does") from exc
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        reason = (str(exc).strip().splitlines()[0].split(". ")[0][:160] if str(exc).strip()
                  else type(exc).__name__)
        raise CheckpointError(f"corrupt or unreadable checkpoint {path}: {reason}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a selfplay checkpoint")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint format version {data.get('version')}, "
                              f"this selfplay reads version {VERSION}")
    return from_safe(data)  # type: ignore[no-any-return]
