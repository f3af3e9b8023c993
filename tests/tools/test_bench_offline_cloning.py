"""The offline cloning benchmark (``tools/bench_offline_cloning.py``) on tic-tac-toe's teacher:
the collected positions are the imitated seats' (a label legal under every mask), and a fit
on them learns (the held-out loss falls and the accuracy rises), and a checkpoint scores on
the same held-out positions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tools.bench_offline_cloning import load, main

TEACHER = ["--game", "tictactoe", "--teachers", "win_or_block"]


def test_collect_then_fit_learns_the_teacher(tmp_path: Path) -> None:
    for name, seed, envs in (("train", 1, 16), ("val", 2, 8)):
        main(["collect", *TEACHER, "--imitate", "win_or_block", "--envs", str(envs),
              "--every", "1", "--steps", "128", "--seed", str(seed),
              "--out", str(tmp_path / f"{name}.npz")])
    obs, mask, labels = load(tmp_path / "train.npz")
    assert len(obs) > 500 and len(obs) == len(mask) == len(labels)
    legal = torch.gather(mask, 1, labels.view(-1, 1))
    assert bool(legal.all())  # every label is a legal move of its position
    with np.load(tmp_path / "train.npz") as data:
        assert set(np.unique(data["step"])) <= set(range(128))
    out = tmp_path / "fit.json"
    main(["fit", *TEACHER, "--train", str(tmp_path / "train.npz"), "--val",
          str(tmp_path / "val.npz"), "--minutes", "5", "--steps", "600", "--eval-every", "5",
          "--batch", "64", "--lr", "1e-3", "--json-out", str(out)])  # 600 updates, however
    # busy the machine (3 s of them learned too little beside another test process)
    reports = json.loads(out.read_text())["reports"]
    first, last = reports[0], reports[-1]
    assert last["steps"] == 600
    assert last["loss"] < 0.9 * first["loss"]
    assert last["accuracy"]["action"] > first["accuracy"]["action"] + 0.15
    # the report never replaces the training data, and a bad file names its flag
    from selfplay.cli_common import UserError

    train = tmp_path / "train.npz"
    kept = train.read_bytes()
    with pytest.raises(UserError, match="--json-out .* is one of the command's inputs"):
        main(["fit", *TEACHER, "--train", str(train), "--val", str(tmp_path / "val.npz"),
              "--json-out", str(train)])
    assert train.read_bytes() == kept
    (tmp_path / "text.npz").write_text("not numpy")
    with pytest.raises(UserError, match=r"--train .*text.npz is not a file of `collect` \(not a"):
        main(["fit", *TEACHER, "--train", str(tmp_path / "text.npz"), "--val",
              str(tmp_path / "val.npz"), "--steps", "1"])


def test_score_needs_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="checkpoint"):
        main(["score", "--checkpoint", str(tmp_path / "none"), "--val",
              str(tmp_path / "val.npz")])


def test_scores_by_part_of_the_game(tmp_path: Path) -> None:
    """Lux's positions carry how far their games had gone; ``--phases`` splits the held-out
    figures by it (one part: the whole), and a game that cannot tell is refused by name."""
    pytest.importorskip("jax")
    from selfplay.bc import build_cloner
    from selfplay.cloning import component_names, component_sizes
    from selfplay.config_files import build_config
    from tools.bench_offline_cloning import by_phase, held_out, load_progress

    small = ["--set", "game.options.max_steps=12", "--set", "bc.num_steps=12",
             "--set", "network.channels=[8,8]", "--set", "network.hidden=[16]"]
    out = tmp_path / "lux.npz"
    main(["collect", "--game", "lux", "--teachers", "heuristic,random", "--imitate",
          "heuristic", "--envs", "2", "--every", "1", "--steps", "12", *small, "--out", str(out)])
    progress = load_progress(out)
    val = load(out)
    assert len(progress) == len(val[0]) > 0
    assert progress.min() == 0.0 and progress.max() < 1.0
    config = build_config("lux", overrides=["bc.teachers=[heuristic,random]", "bc.num_envs=2",
                                            "bc.validate_every=0", *small[1::2]])
    cloner = build_cloner(config, None)
    names, sizes = component_names(cloner.game), component_sizes(cloner.game)
    agent = cloner.agent
    cloner.close()
    whole = held_out(agent, val, names, sizes)
    confused = held_out(agent, val, names, sizes, confusion=True)
    assert {k: confused[k] for k in whole} == whole
    for name, size in zip(names, sizes, strict=True):  # rows: labels, the diagonal: right
        matrix = np.array(confused["confusion"][name])
        assert matrix.shape == (size, size)
        for v in range(size):
            right, count = whole["recall"].get(f"{name}={v}", [0.0, 0])
            assert matrix[v].sum() == count
            assert (round(matrix[v, v] / count, 4) if count else 0.0) == right
    (one,) = by_phase(agent, val, progress, 1, names, sizes)
    assert one["positions"] == len(progress)
    assert {k: one[k] for k in whole} == whole
    parts = by_phase(agent, val, progress, 4, names, sizes)
    assert [p["from"] for p in parts] == [0.0, 0.25, 0.5, 0.75]
    assert [p["positions"] for p in parts] == [
        int(((progress >= k / 4) & (progress < (k + 1) / 4)).sum()) for k in range(4)]
    fitted = tmp_path / "fit.json"
    main(["fit", "--game", "lux", "--teachers", "heuristic,random", "--train", str(out),
          "--val", str(out), "--minutes", "0.01", "--phases", "2", *small,
          "--json-out", str(fitted)])
    report = json.loads(fitted.read_text())["reports"][0]
    assert [p["positions"] for p in report["phases"]] == [
        int((progress < 0.5).sum()), int((progress >= 0.5).sum())]
    ticktack = tmp_path / "ttt.npz"
    main(["collect", *TEACHER, "--imitate", "win_or_block", "--envs", "2", "--steps", "8",
          "--out", str(ticktack)])
    from selfplay.cli_common import UserError

    with pytest.raises(UserError, match=r"ttt.npz: its game did not tell its progress"):
        load_progress(ticktack)
