"""A run's checkpoints: which file a run directory or a path on the command line means."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfplay.checkpoint import (
    CheckpointError,
    names_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
)


def test_resolve_checkpoint_takes_a_run_directorys_newest(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """A file is itself; a run directory or its checkpoints/ folder means its newest
    checkpoint, named on stderr; a missing path or an empty directory is a one-line error."""
    run = tmp_path / "run"
    for update in (2, 10):
        save_checkpoint(run / "checkpoints" / f"update_{update:07d}.pt", {"w": update})
    newest = run / "checkpoints" / "update_0000010.pt"
    (run / "checkpoints" / ".update_0000011.pt.x.tmp").write_bytes(b"half")  # a killed save
    assert resolve_checkpoint(run / "checkpoints" / "update_0000002.pt").name == \
        "update_0000002.pt"
    assert capsys.readouterr().err == ""
    for spec in (run, str(run), run / "checkpoints"):
        assert resolve_checkpoint(spec) == newest
        assert capsys.readouterr().err == f"using {newest}\n"
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="empty holds no checkpoint") as empty:
        resolve_checkpoint(tmp_path / "empty")
    with pytest.raises(CheckpointError, match="no such checkpoint: .*gone.pt") as missing:
        resolve_checkpoint(tmp_path / "gone.pt")
    assert "\n" not in str(empty.value) + str(missing.value)


def test_names_checkpoint_compares_what_was_given(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory (or its checkpoints/ folder) names each of its checkpoints, not only
    its newest; a file names itself, relative or absolute; None names only None."""
    monkeypatch.chdir(tmp_path)
    for update in (1, 2):
        save_checkpoint(tmp_path / "run" / "checkpoints" / f"update_{update:07d}.pt", {})
    old = str(tmp_path / "run" / "checkpoints" / "update_0000001.pt")
    assert names_checkpoint("run", old) and names_checkpoint(tmp_path / "run", old)
    assert names_checkpoint("run/checkpoints", old)
    assert names_checkpoint("run/checkpoints/update_0000001.pt", old)
    assert not names_checkpoint("run/checkpoints/update_0000002.pt", old)
    (tmp_path / "other").mkdir()
    assert not names_checkpoint("other", old)
    assert names_checkpoint(None, None)
    assert not names_checkpoint(None, old) and not names_checkpoint("run", None)
