"""tools/bench_cog.py: the CoG map benchmark table of a checkpoint against engine bots (real
engine, an untrained network on two 8x8 maps), its shares of games, game lengths, published
figures and one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from games.microrts.maps import resolve_map
from tools.bench_cog import (
    BOTS,
    MAPS,
    PUBLISHED,
    PUBLISHED_BOT_MEANS,
    PUBLISHED_MAP_MEANS,
    PUBLISHED_OVERALL,
    competition_max_steps,
    main,
    plan,
    published,
)

ROOT = Path(__file__).resolve().parents[2]
CELL = re.compile(r"(\d+\.\d) \[(\d+)-(\d+)\] (\d+)-(\d+)-(\d+) \| (\d+|-)")
MEAN = re.compile(r"(\d+\.\d) \| (\d+|-)")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained tiny network for 8x8 microRTS, saved as training saves it."""
    from games.options import to_mapping
    from games.registry import make_game
    from selfplay.checkpoint import save_checkpoint
    from selfplay.config_files import build_config
    from selfplay.networks import ActorCritic

    config = build_config("microrts", overrides=[
        "game.options.map=basesWorkers8x8", "network.channels=[8]", "network.hidden=[16]"])
    game = make_game("microrts", num_envs=1, seed=0,
                     options={**config.game.options, "num_selfplay_envs": 0})
    spec = game.spec
    game.close()
    torch.manual_seed(0)
    agent = ActorCritic(spec, config.network, config.normalize)
    path = tmp_path_factory.mktemp("cog") / "untrained.pt"
    return save_checkpoint(path, {"config": to_mapping(config), "agent": agent.state_dict()})


def _rows(stdout: str) -> dict[str, str]:
    """The printed table's rows by their first word (a map, or ``mean``)."""
    lines = stdout[stdout.index("\nmap "):].strip().splitlines()[1:]
    return {line.split()[0].rstrip("*"): line for line in lines if line.strip()
            and not line.startswith("*")}


@pytest.mark.slow  # the whole table, ~11 s (make bench)
def test_table_counts_every_game_and_its_means_are_the_cells(checkpoint: Path,
                                                             tmp_path: Path) -> None:
    maps, bots, games = ["basesWorkers8x8A", "FourBasesWorkers8x8"], ["WorkerRush", "CoacAI"], 4
    out = tmp_path / "cog.json"
    proc = subprocess.run(
        [sys.executable, "tools/bench_cog.py", "--checkpoint", str(checkpoint),
         "--maps", ",".join(maps), "--bots", ",".join(bots), "--games", str(games),
         "--max-steps", "150", "--processes", "2", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == [*maps, "mean"]
    rates: dict[tuple[str, str], float] = {}
    for m in maps:
        cells = CELL.findall(rows[m])
        assert len(cells) == len(bots), rows[m]
        for b, (rate, low, high, *counts, pub) in zip(bots, cells, strict=True):
            wins, draws, losses = map(int, counts)
            assert wins + draws + losses == games
            assert float(rate) == pytest.approx(100 * (wins + draws / 2) / games, abs=0.05)
            assert int(low) <= float(rate) <= int(high)
            assert int(pub) == published(m, b)
            rates[(m, b)] = float(rate)
        row_mean, row_pub = MEAN.findall(rows[m])[-1]
        assert float(row_mean) == pytest.approx(sum(rates[(m, b)] for b in bots) / len(bots),
                                                abs=0.1)
        assert row_pub == "-"  # published means are over all four bots
    means = MEAN.findall(rows["mean"])
    for b, (mean, _) in zip(bots, means, strict=False):
        assert float(mean) == pytest.approx(sum(rates[(m, b)] for m in maps) / len(maps),
                                            abs=0.1)
    assert float(means[-1][0]) == pytest.approx(sum(rates.values()) / len(rates), abs=0.1)

    result = json.loads(out.read_text())
    assert result["maps"] == maps and result["bots"] == bots and result["games"] == games
    assert result["max_steps"] == {m: 150 for m in maps}
    for cell in result["cells"]:
        assert cell["games"] == cell["wins"] + cell["draws"] + cell["losses"] == games
        assert [s["games"] for s in cell["sides"]] == [games // 2, games // 2]
        assert 100 * cell["win_rate"] == pytest.approx(rates[(cell["map"], cell["bot"])],
                                                       abs=0.05)
        low, high = cell["ci95"]
        assert 0 <= low <= cell["win_rate"] <= high <= 1
    assert 100 * result["overall"]["win_rate"] == pytest.approx(float(means[-1][0]), abs=0.05)
    assert result["overall"]["published"] is None
    # trained on basesWorkers8x8 against WorkerRush, LightRush, RandomBiased and CoacAI: both
    # maps are new to it, so every cell is zero-shot, and the table says so
    assert result["trained_maps"] == ["basesWorkers8x8"]
    assert result["trained_bots"] == ["CoacAI", "LightRush", "RandomBiased", "WorkerRush"]
    assert all(cell["zero_shot"] for cell in result["cells"])
    assert result["zero_shot"]["cells"] == 4 and result["trained"]["cells"] == 0
    assert "Zero-shot cells (a map or a bot never met): 4" in proc.stdout
    assert "basesWorkers8x8A*" in proc.stdout


def test_zero_shot_cells_are_those_of_unseen_maps_or_bots() -> None:
    from tools.bench_cog import Cell, summary

    cells = {(m, b): Cell() for m in ("a", "b") for b in ("X", "Y")}
    for (m, b), cell in cells.items():
        won = int(m == "a") + int(b == "X")
        cell.add({"wins": won, "draws": 0, "losses": 2 - won,
                  "sides": [{"games": 1, "wins": 0, "draws": 0, "losses": 1}] * 2}, 1.0)
    figures = summary(cells, ["a", "b"], ["X", "Y"], ({"a"}, {"X"}))
    assert [c["zero_shot"] for c in figures["cells"]] == [False, True, True, True]
    assert figures["trained"] == {"cells": 1, "win_rate": 1.0}
    assert figures["zero_shot"]["cells"] == 3
    assert figures["zero_shot"]["win_rate"] == pytest.approx((0.5 + 0.5 + 0.0) / 3)


def test_a_cell_split_over_processes_still_plays_both_sides(checkpoint: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    assert main(["--checkpoint", str(checkpoint), "--maps", "basesWorkers8x8",
                 "--bots", "passive", "--games", "4", "--max-steps", "30",
                 "--processes", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["processes"] == 2 and result["bots"] == ["Passive"]
    (cell,) = result["cells"]
    assert cell["draws"] == 4 and [s["draws"] for s in cell["sides"]] == [2, 2]
    assert cell["published"] is None


def test_plan_splits_cells_into_even_shares_largest_maps_first() -> None:
    maps = [(name, resolve_map(name)) for name in ("basesWorkers8x8A", "DoubleGame24x24")]
    shares = plan(maps, ["WorkerRush"], games=10, processes=6, seed=3, max_steps=None)
    assert [s.map_name for s in shares] == ["DoubleGame24x24"] * 3 + ["basesWorkers8x8A"] * 3
    assert all(s.games % 2 == 0 for s in shares)
    for name in ("basesWorkers8x8A", "DoubleGame24x24"):
        assert sum(s.games for s in shares if s.map_name == name) == 10
    assert len({s.seed for s in shares}) == len(shares)
    assert {s.map_name: s.max_steps for s in shares} == {"DoubleGame24x24": 5000,
                                                         "basesWorkers8x8A": 3000}
    assert len(plan(maps, ["WorkerRush"], games=2, processes=64, seed=0, max_steps=9)) == 2


def test_game_lengths_are_raisocketais_round_robin_ones() -> None:
    steps = [competition_max_steps(resolve_map(m)) for m in MAPS]
    assert steps == [3000, 3000, 4000, 4000, 4000, 5000, 6000, 8000]


def test_published_figures_agree_with_the_papers_own_averages() -> None:
    """The transcribed cells average to the paper's printed Overall column, AI Average row and
    88 % overall (each rounded to a whole per cent)."""
    for m, row in PUBLISHED.items():
        assert abs(sum(row) / len(row) - PUBLISHED_MAP_MEANS[m]) <= 0.5 + 1e-9, m
    for i, b in enumerate(BOTS):
        column = [row[i] for row in PUBLISHED.values()]
        assert abs(sum(column) / len(column) - PUBLISHED_BOT_MEANS[b]) <= 0.5 + 1e-9, b
    cells = [x for row in PUBLISHED.values() for x in row]
    assert round(sum(cells) / len(cells)) == PUBLISHED_OVERALL == 88
    assert published("(4)BloodBath.scmB", "CoacAI") == 0
    assert published("basesWorkers8x8A", "POWorkerRush") == published("basesWorkers8x8A",
                                                                      "WorkerRush") == 95
    assert published("basesWorkers8x8", "WorkerRush") is None
    assert published("basesWorkers8x8A", "Passive") is None


@pytest.mark.parametrize(("args", "message"), [
    (["--maps", "basesWorkers8x8Q"], "unknown microRTS map 'basesWorkers8x8Q'"),
    (["--bots", "WorkerRsh"], "unknown microRTS bot 'WorkerRsh'"),
    (["--games", "3"], "--games must be a positive even number"),
])
def test_bad_input_is_one_line(checkpoint: Path, capsys: pytest.CaptureFixture[str],
                               args: list[str], message: str) -> None:
    assert main(["--checkpoint", str(checkpoint), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_missing_or_corrupt_checkpoint_is_one_line_exit_2(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    for spec, message in ((tmp_path / "missing.pt", "no such checkpoint"),
                          (corrupt, "is not a selfplay checkpoint"),
                          (tmp_path, "holds no checkpoint")):
        proc = subprocess.run([sys.executable, "tools/bench_cog.py", "--checkpoint", str(spec)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
