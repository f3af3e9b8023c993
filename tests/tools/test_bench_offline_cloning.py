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
          str(tmp_path / "val.npz"), "--minutes", "0.05", "--eval-every", "0.05",
          "--batch", "64", "--lr", "1e-3", "--json-out", str(out)])
    reports = json.loads(out.read_text())["reports"]
    first, last = reports[0], reports[-1]
    assert last["steps"] > 50
    assert last["loss"] < 0.9 * first["loss"]
    assert last["accuracy"]["action"] > first["accuracy"]["action"] + 0.15


def test_score_needs_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="checkpoint"):
        main(["score", "--checkpoint", str(tmp_path / "none"), "--val",
              str(tmp_path / "val.npz")])
