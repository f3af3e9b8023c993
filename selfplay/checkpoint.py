"""A run's checkpoints: where a run keeps them, and which file a command-line argument names.

The file format itself (the container of tensors, arrays and plain values, written atomically and
loaded without executing code) is :mod:`games.files`, which the league's snapshots share; its
names are re-exported here for the trainer's modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

from games.files import CheckpointError, atomic_write_bytes, load_checkpoint, save_checkpoint

__all__ = ["CheckpointError", "atomic_write_bytes", "load_checkpoint", "save_checkpoint",
           "CHECKPOINT_SUFFIXES", "looks_like_path", "names_checkpoint", "resolve_checkpoint",
           "run_checkpoints", "list_checkpoints"]


CHECKPOINT_SUFFIXES = (".pt", ".safetensors")


def looks_like_path(spec: str) -> bool:
    """A command-line entry meant as a file or folder (bot names have no slash or suffix)."""
    return "/" in spec or spec.startswith(".") or spec.endswith(CHECKPOINT_SUFFIXES)


def resolve_checkpoint(spec: str | Path) -> Path:
    """The checkpoint file ``spec`` names: a file, or a run directory (or its ``checkpoints/``
    folder), which means its newest checkpoint (said on stderr: ``using PATH``).

    :class:`CheckpointError` (one line) for a missing path or a directory without checkpoints.
    """
    if not str(spec).strip():  # Path("") is the working directory
        raise CheckpointError("the checkpoint is empty: give a checkpoint file or a run "
                              "directory")
    path = Path(spec)
    if path.is_dir():
        found = run_checkpoints(path)
        if not found:
            raise CheckpointError(f"{spec} holds no checkpoint (no checkpoints/update_*.pt); "
                                  "give a checkpoint file or a run directory that has one")
        print(f"using {found[-1]}", file=sys.stderr)
        return found[-1]
    if not path.is_file():
        raise CheckpointError(f"no such checkpoint: {spec} (give a checkpoint file or a run "
                              "directory)")
    return path


def names_checkpoint(given: str | Path | None, recorded: str | Path | None) -> bool:
    """Whether ``given`` (a checkpoint file, or a run directory or its ``checkpoints/`` folder,
    as :func:`resolve_checkpoint` takes it) names the checkpoint file ``recorded``: the same
    file, or one of that directory's checkpoints (the newest when it was resolved, though the
    run may have saved newer ones since). None names only None."""
    if given is None or recorded is None:
        return given is None and recorded is None
    file, source = Path(recorded).resolve(), Path(given).resolve()
    return file == source or (source.is_dir()
                              and file.parent in (source, source / "checkpoints"))


def run_checkpoints(run: Path) -> list[Path]:
    """The checkpoints of a run directory (``run/checkpoints`` or ``run`` itself), oldest
    first."""
    return list_checkpoints(run / "checkpoints") or list_checkpoints(run)


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoints in ``directory``, oldest first (by update number in the name)."""
    if not directory.is_dir():
        return []
    return sorted(directory.glob("update_*.pt"))
