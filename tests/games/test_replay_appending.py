"""Appending games to a replay folder (:class:`games.replays.ShardAppender`): full shards
written as they fill, a rerun continuing the numbering without touching what is there, a shard
left unlisted by a kill listed (or, unreadable, removed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from games.replays import (
    PLAN,
    ReplayError,
    Shard,
    ShardAppender,
    encode_shard,
    folder_totals,
    list_shard,
    read_manifest,
    read_shard,
    scan,
    shard_name,
    shard_paths,
    write_shard,
)


def encode(games: list[dict[str, Any]]) -> bytes:
    return encode_shard("toy", {}, games, {"moves": np.arange(len(games))})


def test_shards_fill_then_a_rerun_appends(tmp_path: Path) -> None:
    folder = tmp_path / "replays"
    first = ShardAppender(folder, 2, encode)
    for i in range(5):
        first.add({"game": i})
        assert len(first.shards) == (i + 1) // 2  # a shard is written as soon as it is full
    assert first.close() == {"folder": str(folder), "games": 5, "shards": 3}
    assert folder_totals(folder) == (5, 3)
    before = {p.name: p.read_bytes() for p in folder.glob("shard-*.npz")}

    second = ShardAppender(folder, 2, encode)
    second.add({"game": 5})
    assert second.close()["shards"] == 1
    assert sorted(read_manifest(folder)) == [shard_name(k) for k in range(4)]
    assert all((folder / name).read_bytes() == data for name, data in before.items())
    assert [g["game"] for k in range(4) for g in read_shard(folder / shard_name(k)).games] == \
        list(range(6))


def test_a_shard_written_but_not_listed_is_kept_or_dropped(tmp_path: Path) -> None:
    """A kill between writing a shard and listing it: the next appender lists it if it reads
    (its games were finished) and removes it if it does not, then numbers after the last."""
    folder = tmp_path / "replays"
    folder.mkdir()
    write_shard(folder, 0, encode([{"game": 0}]))  # written, never listed
    (folder / shard_name(1)).write_bytes(b"not a shard")
    # no manifest: not a folder a writer of ours started (its first shard would be listed
    # before the second was written), so the unreadable file is someone's, never removed;
    # listing shard 0 first used to make the folder look like ours and delete it
    with pytest.raises(ReplayError, match="has no manifest.jsonl: not a replay folder"):
        ShardAppender(folder, 1, encode)
    assert (folder / shard_name(1)).read_bytes() == b"not a shard"
    (folder / shard_name(1)).unlink()
    list_shard(folder, folder / shard_name(0), 1)
    write_shard(folder, 1, encode([{"game": 1}]))  # written, never listed: a kill
    (folder / shard_name(2)).write_bytes(b"not a shard")
    appender = ShardAppender(folder, 1, encode)
    assert read_manifest(folder)[shard_name(1)]["games"] == 1
    assert not (folder / shard_name(2)).exists()
    appender.add({"game": 2})
    assert sorted(read_manifest(folder)) == [shard_name(0), shard_name(1), shard_name(2)]
    assert folder_totals(folder) == (3, 3)


def test_files_not_named_like_shards_are_left_alone(tmp_path: Path) -> None:
    """A stray ``shard-old.npz`` beside the shards is no shard: appending numbers after the
    real ones and leaves the stray file as it was."""
    folder = tmp_path / "replays"
    folder.mkdir()
    write_shard(folder, 0, encode([{"game": 0}]))
    (folder / "shard-old.npz").write_bytes(b"someone's file")
    appender = ShardAppender(folder, 1, encode)
    appender.add({"game": 1})
    assert sorted(read_manifest(folder)) == [shard_name(0), shard_name(1)]
    assert [p.name for p in shard_paths(folder)] == [shard_name(0), shard_name(1)]
    assert (folder / "shard-old.npz").read_bytes() == b"someone's file"


def test_scanning_skips_a_torn_shard_naming_it_and_its_games(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opening a folder (what `selfplay bc --replays` does first) skips a shard torn after it
    was listed, saying which and how many games (the manifest's count) are lost."""
    folder = tmp_path / "replays"
    appender = ShardAppender(folder, 3, encode)
    for i in range(6):
        appender.add({"game": i})
    appender.close()
    torn = folder / shard_name(1)
    torn.write_bytes(torn.read_bytes()[:40])
    shards = scan(folder)
    assert [s.path.name for s in shards] == [shard_name(0)]
    err = capsys.readouterr().err.strip()
    assert err.startswith("warning: corrupt or truncated replay shard")
    assert str(torn) in err and err.endswith("skipped (3 games lost)")
    assert "\n" not in err


def test_a_folder_that_is_not_ours_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Appending to a file, to a planned recording (`selfplay record`'s ``plan.json``), or to
    a folder whose only shard-named file is no shard and which has no manifest: a one-line
    error, and nothing there is removed or written; another program's ``.tmp`` files are
    never removed."""
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(ReplayError, match="is a file"):
        ShardAppender(afile, 1, encode)
    planned = tmp_path / "planned"
    planned.mkdir()
    (planned / PLAN).write_text("{}")
    with pytest.raises(ReplayError, match="holds a recording of `selfplay record`"):
        ShardAppender(planned, 1, encode)
    assert sorted(p.name for p in planned.iterdir()) == [PLAN]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / shard_name(0)).write_bytes(b"someone's data")
    (foreign / ".notes.tmp").write_text("someone's notes")
    with pytest.raises(ReplayError, match="holds no readable shard"):
        ShardAppender(foreign, 1, encode)
    assert (foreign / shard_name(0)).read_bytes() == b"someone's data"
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / ".notes.tmp").write_text("someone's notes")
    (ours / f".{shard_name(0)}.x1.tmp").write_bytes(b"a killed write")
    ShardAppender(ours, 1, encode).add({"game": 0})
    assert (ours / ".notes.tmp").exists() and not (ours / f".{shard_name(0)}.x1.tmp").exists()


def test_a_shard_folder_of_another_kind_is_refused_before_any_change(tmp_path: Path) -> None:
    """A writer whose :meth:`ShardAppender.check_folder` refuses the folder's shards changes
    nothing there, not even an unlisted shard it would otherwise list."""

    class OnlyToys(ShardAppender[dict[str, Any]]):
        def check_folder(self, shards: list[Shard]) -> None:
            for shard in shards:
                if shard.meta["game"] != "toy":
                    raise ReplayError(f"{shard.path.name} holds {shard.meta['game']}")

    folder = tmp_path / "replays"
    folder.mkdir()
    write_shard(folder, 0, encode_shard("chess", {}, [{}], {"moves": np.zeros(1)}))
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(ReplayError, match="holds chess"):
        OnlyToys(folder, 1, encode)
    assert sorted(p.name for p in folder.iterdir()) == before  # no manifest written
    assert not read_manifest(folder)


def test_appenders_of_one_process_share_the_shard_numbers_and_a_refusal_frees_the_folder(
        tmp_path: Path) -> None:
    """Guards: two appenders of one process on one folder each wrote "the next" shard, the
    same one (a game lost); an appender refused by its checks kept the folder locked."""
    import subprocess
    import sys

    folder = tmp_path / "replays"
    a, b = ShardAppender(folder, 1, encode), ShardAppender(folder, 1, encode)
    a.add({"game": 0})
    b.add({"game": 1})
    a.close()
    b.close()
    assert folder_totals(folder) == (2, 2)

    class RefusedOnceClaimed(ShardAppender[dict[str, Any]]):
        """Refused by the check made after the folder is claimed (another writer finished
        meanwhile, say)."""
        checks = 0

        def check_folder(self, shards: list[Shard]) -> None:
            RefusedOnceClaimed.checks += 1
            if RefusedOnceClaimed.checks == 2:
                raise ReplayError("refused after the claim")

    with pytest.raises(ReplayError, match="refused after the claim"):
        RefusedOnceClaimed(folder, 1, encode)
    code = ("import sys; from pathlib import Path; from games.replays import claim_folder; "
            "claim_folder(Path(sys.argv[1]))")
    other = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                           text=True, timeout=120)
    assert other.returncode == 0, other.stderr  # nothing of this process holds it
