"""``tools/replay_outcomes.py``: each player's results against each opponent, both sides of
every game counted, from a replay folder's metadata (a corrupt shard skipped, as training
skips it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from replay_outcomes import main, markdown, outcome_table  # noqa: E402

from games.replays import encode_shard, list_shard, write_shard  # noqa: E402


def _shard(folder: Path, index: int, games: list[tuple[str, str, int]]) -> None:
    meta = [{"players": [a, b], "winner": w} for a, b, w in games]
    data = encode_shard("microrts", {}, meta, {"offsets": np.zeros(len(games) + 1, np.int64)})
    list_shard(folder, write_shard(folder, index, data), len(games))


def test_each_side_of_every_game_counts_and_a_corrupt_shard_is_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _shard(tmp_path, 0, [("A", "B", 0), ("B", "A", 0), ("A", "B", -1), ("A", "A", 1)])
    _shard(tmp_path, 1, [("B", "A", 1)])
    (tmp_path / "shard-000002.npz").write_bytes(b"not a zip")
    table = outcome_table(tmp_path)
    assert "shard-000002.npz" in capsys.readouterr().err  # the warning names the file
    assert table["A"]["B"] == [2, 1, 1]  # wins, losses, draws
    assert table["B"]["A"] == [1, 2, 1]
    assert table["A"]["A"] == [1, 1, 0]  # a mirror game: one side won, one lost
    text = markdown(table)
    assert "| A | 0.50 (0.09-0.91; 1/1/0) | 0.50 (" in text
    main(["--replays", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["outcomes"]["B"]["A"] == [1, 2, 1]
    with pytest.raises(SystemExit) as exc:
        main(["--replays", str(tmp_path / "missing")])
    assert exc.value.code == 2
