"""A run's checkpoints: which file a run directory or a path on the command line means."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfplay.checkpoint import CheckpointError, resolve_checkpoint, save_checkpoint


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
