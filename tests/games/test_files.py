"""The checkpoint container: round trip without code execution, atomicity, clear errors."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from games.files import (
    CheckpointError,
    atomic_write_path,
    atomic_write_text,
    load_checkpoint,
    save_checkpoint,
)


def test_round_trip_with_numpy_and_rng_state(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    payload = {"w": torch.arange(4.0), "arr": np.arange(6, dtype=np.int16).reshape(2, 3),
               "rng": rng.bit_generator.state, "names": np.array(["a", "bc"]),
               "nested": [{"x": np.float32(1.5)}], "blob": b"\x00\x01"}
    path = save_checkpoint(tmp_path / "c.pt", payload)
    back = load_checkpoint(path)
    assert torch.equal(back["w"], payload["w"])
    assert back["arr"].dtype == np.int16 and np.array_equal(back["arr"], payload["arr"])
    restored = np.random.default_rng()
    restored.bit_generator.state = back["rng"]
    assert restored.integers(1 << 30) == rng.integers(1 << 30)
    assert back["names"].tolist() == ["a", "bc"]
    assert back["nested"][0]["x"] == 1.5 and back["blob"] == b"\x00\x01"


def test_zero_dimensional_arrays_keep_their_shape(tmp_path: Path) -> None:
    """Guards a bug: a 0-d flag in tic-tac-toe's state came back as shape (1,) and --resume
    failed with "state 'ready' has shape (1,), expected ()"."""
    payload = {"flag": np.array(True), "x": np.array(2.5, np.float32),
               "strided": np.arange(10)[::-2]}
    back = load_checkpoint(save_checkpoint(tmp_path / "c.pt", payload))
    assert back["flag"].shape == () and bool(back["flag"]) is True
    assert back["x"].shape == () and back["x"].dtype == np.float32 and back["x"] == 2.5
    assert back["strided"].tolist() == [9, 7, 5, 3, 1]


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/selfplay-pwned",))


def test_loading_never_executes_code(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    torch.save({"format": "selfplay-checkpoint", "version": 1, "x": _Evil()}, path)
    with pytest.raises(CheckpointError, match="only executing its code could load"):
        load_checkpoint(path)
    assert not Path("/tmp/selfplay-pwned").exists()


def test_a_file_that_is_no_checkpoint_empty_or_cut_short_says_which(tmp_path: Path) -> None:
    good = tmp_path / "good.pt"
    save_checkpoint(good, {"x": torch.ones(3)})
    text, empty, cut = tmp_path / "config.yaml", tmp_path / "empty.pt", tmp_path / "cut.pt"
    text.write_text("game: {name: CartPole-v1}\n")
    empty.write_bytes(b"")
    cut.write_bytes(good.read_bytes()[:200])
    for path, message in ((text, "is not a selfplay checkpoint \\(not a file torch.save"),
                          (empty, "the file is empty"),
                          (cut, "the file is cut short \\(its archive has no end\\)")):
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(path)
    assert load_checkpoint(good)["x"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", pickle.dumps({"a": 1})])
def test_corrupt_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def test_truncated_checkpoint(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "c.pt", {"w": torch.zeros(1000)})
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)


def test_wrong_format_and_version(tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="not a selfplay checkpoint"):
        load_checkpoint(path)
    torch.save({"format": "selfplay-checkpoint", "version": 99}, path)
    with pytest.raises(CheckpointError, match="version 99"):
        load_checkpoint(path)


def test_failed_save_keeps_previous(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "c.pt", {"w": torch.ones(3)})
    with pytest.raises(Exception):  # noqa: B017 - any failure while writing
        save_checkpoint(path, {"w": torch.zeros(3), "bad": lambda: None})
    assert torch.equal(load_checkpoint(path)["w"], torch.ones(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]  # no temp file left


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "none.pt")


def test_atomic_text_write_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "out" / "result.json"
    atomic_write_text(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}'
    with pytest.raises(UnicodeEncodeError):  # fails while writing: the old file stays
        atomic_write_text(path, "\ud800")
    assert path.read_text() == '{"a": 1}'
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temp file left


def test_atomic_writes_get_the_permissions_open_would_give(tmp_path: Path) -> None:
    """A new file gets 0666 less the umask (mkstemp's 0600 would hide reports and checkpoints
    from the group); a rewritten file keeps its own permissions."""
    old_mask = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh.html"
        atomic_write_text(fresh, "a")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o640
        kept = tmp_path / "kept.html"
        kept.write_text("old")
        kept.chmod(0o604)
        atomic_write_text(kept, "new")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_text() == "new"
    finally:
        os.umask(old_mask)


def test_writers_that_take_a_file_name_write_atomically(tmp_path: Path) -> None:
    """A video encoder writes to a temp name with the target's suffix; a failure half-way
    leaves the old file and no temp file, success renames it into place."""
    video = tmp_path / "game.gif"
    video.write_bytes(b"old video")

    def fails(tmp: Path) -> None:
        assert tmp.parent == tmp_path and tmp.name.endswith(".gif") and tmp != video
        tmp.write_bytes(b"half a")
        raise RuntimeError("encoder died")

    with pytest.raises(RuntimeError, match="encoder died"):
        atomic_write_path(video, fails)
    assert video.read_bytes() == b"old video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game.gif"]
    atomic_write_path(video, lambda tmp: tmp.write_bytes(b"new video"))
    assert video.read_bytes() == b"new video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game.gif"]
