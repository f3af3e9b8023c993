"""Behaviour cloning: the masked loss by hand, learning from live teachers, exact resume,
checkpoints that load like training runs', and one-line errors for bad teachers."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from board_helpers import completing

from games.core import (
    Batch,
    Discrete,
    EpisodeStats,
    GameError,
    GameSpec,
    MultiDiscrete,
    Outcome,
)
from selfplay.bc import build_cloner, run_cloning
from selfplay.bc_loss import balance_weights, clone_confusion, clone_terms
from selfplay.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from selfplay.cloning import Cloner
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config
from selfplay.distributions import make_dist
from selfplay.evaluate import evaluate, load_agent
from selfplay.optim import FlatAdam, WeightAverage
from selfplay.play import play

TEACHER = "win_or_block"


def tictactoe_config(*overrides: str) -> TrainConfig:
    return build_config("tictactoe", overrides=[
        f"bc.teachers=[{TEACHER}]", "bc.num_envs=32", "bc.num_steps=16", "bc.epochs=2",
        "bc.learning_rate=1e-3", "bc.validate_every=0", "log.tensorboard=false",
        "log.progress=false", *overrides])


# --------------------------------------------------------------------------- the loss by hand


def grid_example() -> tuple[MultiDiscrete, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two samples of three cells; component 1 is used only by action type 1.

    Sample 0 (imitated): cell 0 holds a unit that may do anything, cell 1 holds none (no legal
    value), cell 2 a unit whose component 1 may be 0 or 2. Sample 1 is not imitated."""
    space = MultiDiscrete((2, 3), cells=3, gates=(None, (1,)))
    logits = torch.zeros(2, 3, 5, requires_grad=True)
    with torch.no_grad():
        logits[0, 2, 1] = math.log(3.0)  # type 1 at cell 2: probability 3/4
    unit = [True, True, True, True, True]
    mask = torch.tensor([[unit, [False] * 5, [True, True, True, False, True]]] * 2)
    labels = torch.tensor([[[0, 1], [1, 1], [1, 2]]] * 2)
    return space, logits, mask, labels


def test_clone_terms_count_used_components_of_unit_cells_of_imitated_seats() -> None:
    space, logits, mask, labels = grid_example()
    terms = clone_terms(make_dist(space, logits, mask), labels, torch.tensor([True, False]))
    # counted: cell 0's type (1/2), cell 2's type (3/4) and its component 1 (1/2 of {0, 2});
    # not cell 0's component 1 (type 0 does not use it), not cell 1 (no unit), not sample 1
    expected = math.log(2.0) + math.log(4.0 / 3.0) + math.log(2.0)
    assert terms.nll.item() == pytest.approx(expected, rel=1e-6)
    assert terms.cells.item() == 2
    assert terms.loss().item() == pytest.approx(expected / 2, rel=1e-6)
    assert terms.used.tolist() == [2, 1]
    # most likely values: type 0 at cell 0 (a tie: the first), type 1 at cell 2, and 0 for
    # cell 2's component 1 (a tie between 0 and 2), which the label (2) is not
    assert terms.correct.tolist() == [2, 0]
    assert terms.exact.item() == 1 and terms.illegal.item() == 0
    terms.loss().backward()
    assert logits.grad is not None
    grad = logits.grad
    assert grad[1].abs().sum() == 0  # the sample that is not imitated
    assert grad[0, 1].abs().sum() == 0  # the cell without a unit
    assert grad[0, 0, 2:].abs().sum() == 0  # the component type 0 does not use
    assert grad[0, 0, :2].abs().sum() > 0 and grad[0, 2].abs().sum() > 0


def test_clone_terms_leave_out_illegal_labels_and_count_them() -> None:
    space, logits, mask, labels = grid_example()
    labels[0, 2, 1] = 1  # forbidden by cell 2's mask
    terms = clone_terms(make_dist(space, logits, mask), labels, torch.tensor([True, False]))
    assert terms.illegal.item() == 1
    assert terms.nll.item() == pytest.approx(math.log(2.0) + math.log(4.0 / 3.0), rel=1e-6)
    assert terms.cells.item() == 2


def test_clone_terms_of_one_choice() -> None:
    """Discrete (tic-tac-toe): each imitated sample is one cell."""
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0.1, 0.1, 0.8]]))
    mask = torch.tensor([[True, True, True], [True, True, True], [False, False, False]])
    terms = clone_terms(make_dist(Discrete(3), logits, mask), torch.tensor([1, 2, 0]),
                        torch.tensor([True, True, True]))
    assert terms.cells.item() == 2  # the sample with no legal move does not count
    assert terms.nll.item() == pytest.approx(-math.log(0.25) - math.log(0.6), rel=1e-5)
    assert terms.correct.tolist() == [1] and terms.used.tolist() == [2]


def test_clone_terms_count_each_value_and_weigh_it() -> None:
    """The counted labels of each value (components concatenated), those the most likely
    value got right, and the loss with a weight per value."""
    space, logits, mask, labels = grid_example()
    plain = clone_terms(make_dist(space, logits, mask), labels, torch.tensor([True, False]))
    # type: cell 0 labelled 0, cell 2 labelled 1, both right; component 1: cell 2 labelled 2
    assert plain.values.tolist() == [1, 1, 0, 0, 1]
    assert plain.values_right.tolist() == [1, 1, 0, 0, 0]
    weights = torch.tensor([0.5, 2.0, 1.0, 1.0, 3.0])
    weighted = clone_terms(make_dist(space, logits, mask), labels, torch.tensor([True, False]),
                           weights)
    expected = 0.5 * math.log(2.0) + 2.0 * math.log(4.0 / 3.0) + 3.0 * math.log(2.0)
    assert weighted.nll.item() == pytest.approx(expected, rel=1e-6)
    assert weighted.cells.item() == plain.cells.item()  # the loss is still per counted cell


def test_clone_confusion_counts_each_label_by_the_value_picked() -> None:
    """Row: the label's value, column: the most likely value, over the counted labels (the
    diagonal is ``values_right``); with no ``imitated`` every sample counts."""
    space, logits, mask, labels = grid_example()
    dist = make_dist(space, logits, mask)
    types, comp = clone_confusion(dist, labels, torch.tensor([True, False]))
    # type: cell 0 labelled 0 picked 0, cell 2 labelled 1 picked 1; component 1: cell 2
    # labelled 2, picked 0 (the tie between the legal 0 and 2)
    assert types.tolist() == [[1, 0], [0, 1]]
    assert comp.tolist() == [[0, 0, 0], [0, 0, 0], [1, 0, 0]]
    terms = clone_terms(dist, labels, torch.tensor([True, False]))
    diagonal = torch.cat([types.diagonal(), comp.diagonal()])
    assert diagonal.tolist() == terms.values_right.tolist()
    both = clone_confusion(dist, labels)  # sample 1's logits are all 0: ties pick value 0
    assert both[0].tolist() == [[2, 0], [1, 1]] and both[1].tolist() == [[0] * 3] * 2 + [[2, 0, 0]]
    labels[0, 2, 1] = 1  # forbidden by cell 2's mask: not counted
    assert clone_confusion(dist, labels, torch.tensor([True, False]))[1].sum().item() == 0
    (one,) = clone_confusion(make_dist(Discrete(3), torch.log(torch.tensor(
        [[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])), None), torch.tensor([1, 2]))
    assert one.tolist() == [[0, 0, 0], [1, 0, 0], [0, 0, 1]]


def test_clone_terms_weigh_each_sample_and_average_over_the_weights() -> None:
    """``sample_weights`` (``bc.phase_weights``): each sample's counted terms by its weight,
    the loss their mean over the counted cells weighted the same way."""
    space, logits, mask, labels = grid_example()
    both = torch.tensor([True, True])
    plain = clone_terms(make_dist(space, logits, mask), labels, both)
    assert plain.weight.item() == plain.cells.item() == 4  # two unit cells in each sample
    first = math.log(2.0) + math.log(4.0 / 3.0) + math.log(2.0)  # sample 0's logits
    second = 3 * math.log(2.0)  # sample 1's: all equal
    weighted = clone_terms(make_dist(space, logits, mask), labels, both, None,
                           torch.tensor([1.0, 3.0]))
    assert weighted.nll.item() == pytest.approx(first + 3.0 * second, rel=1e-6)
    assert weighted.weight.item() == 2 * 1.0 + 2 * 3.0 and weighted.cells.item() == 4
    assert weighted.loss().item() == pytest.approx((first + 3.0 * second) / 8.0, rel=1e-6)
    # one weight for every sample gives the unweighted loss
    same = clone_terms(make_dist(space, logits, mask), labels, both, None,
                       torch.tensor([2.5, 2.5]))
    assert same.loss().item() == pytest.approx(plain.loss().item(), rel=1e-6)
    # a sample of weight 0 drops out of the loss and its gradient
    only_first = clone_terms(make_dist(space, logits, mask), labels, both, None,
                             torch.tensor([1.0, 0.0]))
    only_first.loss().backward()
    assert logits.grad is not None and logits.grad[1].abs().sum() == 0
    assert only_first.loss().item() == pytest.approx(first / 2, rel=1e-6)
    # one choice per sample (tic-tac-toe's Discrete)
    probs = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))
    one = clone_terms(make_dist(Discrete(3), probs, None), torch.tensor([1, 2]),
                      torch.tensor([True, True]), None, torch.tensor([3.0, 1.0]))
    assert one.loss().item() == pytest.approx(
        (-3.0 * math.log(0.25) - math.log(0.6)) / 4.0, rel=1e-5)


def test_balance_weights_by_hand() -> None:
    # two components: 89 / 9 labels (shares 0.9 / 0.1 with one added to each), and 3 / 3 / 3
    counts = torch.tensor([89.0, 9.0, 3.0, 3.0, 3.0])
    full = balance_weights(counts, [2, 3], 1.0)
    assert full[:2].tolist() == pytest.approx([1 / (2 * 0.9), 1 / (2 * 0.1)], rel=1e-6)
    assert full[2:].tolist() == pytest.approx([1.0, 1.0, 1.0])
    half = balance_weights(counts, [2, 3], 0.5)
    assert float(half[1] / half[0]) == pytest.approx(3.0, rel=1e-6)  # (0.9 / 0.1) ** 0.5
    assert float(0.9 * half[0] + 0.1 * half[1]) == pytest.approx(1.0, rel=1e-6)
    assert balance_weights(counts, [2, 3], 0.0).tolist() == pytest.approx([1.0] * 5)


# --------------------------------------------------------------------------- learning


def test_cloning_win_or_block_drives_the_loss_down_and_the_accuracy_up() -> None:
    """A learning test on tiny data: 80 updates of 512 labelled moves from live teachers.

    win_or_block breaks ties at random (most moves of a game), so no policy predicts more than
    about half of its moves: the loss levels off near 1.2 and the accuracy near 0.5."""
    config = tictactoe_config("bc.total_steps=40960", "bc.epochs=4", "bc.validate_every=10",
                              "bc.validation_steps=16")
    cloner = build_cloner(config, None)
    try:
        history = [cloner.run_update() for _ in range(cloner.num_updates)]
    finally:
        cloner.close()
    first, last = history[:3], history[-5:]

    def mean(key: str, updates: list[dict[str, float]]) -> float:
        return float(np.mean([m[key] for m in updates]))

    assert mean("loss/bc_policy", last) < mean("loss/bc_policy", first) - 0.25
    assert mean("bc/accuracy/action", last) > mean("bc/accuracy/action", first) + 0.12
    assert mean("loss/bc_value", last) < mean("loss/bc_value", first)
    # held apart: live games of another seed, the same positions at each validation
    assert history[-1]["val/loss"] < history[9]["val/loss"] - 0.15
    assert history[-1]["val/accuracy/action"] > history[9]["val/accuracy/action"] + 0.05
    assert all(m["bc/illegal_labels"] == 0 for m in history)
    assert history[0]["bc/labelled_cells"] == 16 * 32  # one mover per board and step


def test_bfloat16_cloning_learns_like_float32() -> None:
    """``precision=bfloat16``: the update's products run in bfloat16 and its first losses are
    float32's to bfloat16's precision (the same teacher games)."""
    def updates(precision: str) -> tuple[list[dict[str, float]], set[torch.dtype]]:
        cloner = build_cloner(tictactoe_config(f"precision={precision}"), None)
        seen: set[torch.dtype] = set()

        def note(_module: torch.nn.Module, _in: object, out: torch.Tensor) -> None:
            if torch.is_grad_enabled():
                seen.add(out.dtype)

        for module in cloner.agent.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(note)
        try:
            return [cloner.run_update() for _ in range(3)], seen
        finally:
            cloner.close()

    full, full_types = updates("float32")
    half, half_types = updates("bfloat16")
    assert full_types == {torch.float32} and half_types == {torch.bfloat16}
    assert half[0]["loss/bc_policy"] == pytest.approx(full[0]["loss/bc_policy"], rel=0.02)
    assert half[0]["loss/bc_value"] == pytest.approx(full[0]["loss/bc_value"], rel=0.05,
                                                     abs=1e-3)
    assert half[-1]["loss/bc_policy"] < half[0]["loss/bc_policy"]


def test_validation_scores_positions_spread_over_its_games_the_same_each_time() -> None:
    """``bc.validation_stride``: the validation keeps the imitated seats' positions of every
    k-th step of its games (from its fixed seed), played once: they are the positions a fresh
    game of that seed reaches at those steps, every validation scores them alike, and the
    validation game is not stepped again after the first."""
    config = tictactoe_config("bc.validate_every=1", "bc.validation_steps=3",
                              "bc.validation_stride=2")
    cloner = build_cloner(config, None)
    try:
        first = cloner.validate()
        game = cloner.validation
        assert game is not None
        steps = []
        original_step = game.step

        def counting_step(actions: np.ndarray) -> Batch:
            steps.append(1)
            return original_step(actions)

        game.step = counting_step  # type: ignore[method-assign]
        assert cloner.validate() == first
        assert not steps  # the kept positions, not the game, the second time
        kept = cloner._held_out()
        assert len(kept) == 3
        batch = game.reset(seed=cloner.validation_seed)  # the same games by hand
        for t in range(5):
            if t % 2 == 0:
                rows = (batch.alive & game.imitate).reshape(-1)
                expected = batch.obs.reshape(-1, *batch.obs.shape[2:])[rows]
                assert np.array_equal(kept[t // 2].obs.numpy(), expected)
                labels = game.teacher_actions
                assert np.array_equal(kept[t // 2].labels.long().numpy(),
                                      labels.reshape(-1, *labels.shape[2:])[rows])
            batch = original_step(game.teacher_actions)
        assert first["val/labelled_cells"] == sum(len(p.obs) for p in kept)
    finally:
        cloner.close()
    with pytest.raises(ConfigError, match="bc.validation_stride must be >= 1"):
        tictactoe_config("bc.validation_stride=0")


# --------------------------------------------------------------------------- runs


@pytest.mark.parametrize("students", [[], ["bc.teachers=[win_or_block,random]",
                                              "bc.student_share=0.5", "bc.student_ramp=0.5"],
                                      ["bc.weight_average=0.9"]],
                         ids=["teachers", "students", "weight_average"])
def test_an_interrupted_run_resumes_exactly(tmp_path: Path, students: list[str]) -> None:
    """Killed after update 3 of 6 (its checkpoint kept), resumed: the same weights, optimizer
    and teacher games as the run that was never interrupted (rare labels weighted: the
    label counts the weights come from are part of the checkpoint; with students, the
    draws of their seats and of their moves too)."""
    config = tictactoe_config("bc.total_steps=3072", "checkpoint.every_updates=1",
                              "checkpoint.keep=10", "bc.validate_every=2",
                              "bc.validation_steps=4", "bc.balance=0.5", *students)
    whole = tmp_path / "whole"
    run_cloning(config, run_dir=whole)
    killed = tmp_path / "killed"
    shutil.copytree(whole, killed)
    for path in list_checkpoints(killed / "checkpoints")[3:]:
        path.unlink()
    summary = run_cloning(None, resume=killed)
    assert summary["updates"] == 6
    a = load_checkpoint(list_checkpoints(whole / "checkpoints")[-1])
    b = load_checkpoint(list_checkpoints(killed / "checkpoints")[-1])
    assert a["counters"] == b["counters"]
    if any("student_share" in o for o in students):
        assert a["students"]["steps"] > 0 and a["students"]["episodes"]["count"] > 0
        assert a["students"]["steps"] == b["students"]["steps"]
        assert a["students"]["episodes"] == b["students"]["episodes"]
        assert np.array_equal(a["students"]["seats"], b["students"]["seats"])
    else:
        assert a["students"] is None
    assert torch.equal(a["label_counts"], b["label_counts"])
    assert a["label_counts"].sum() > 0
    for key, value in a["agent"].items():
        assert torch.equal(value, b["agent"][key]), key
    if "bc.weight_average=0.9" in students:  # the trained weights under the average too
        assert a["weight_average"]["steps"] == b["weight_average"]["steps"] > 0
        for key, value in a["trained_agent"].items():
            assert torch.equal(value, b["trained_agent"][key]), key
    for key in ("marks", "to_move", "rng"):
        assert np.array_equal(a["game_state"]["game"][key], b["game_state"]["game"][key])
    assert np.array_equal(a["game_state"]["rng"], b["game_state"]["rng"])
    assert torch.equal(a["optimizer"]["state"][0]["exp_avg"],
                       b["optimizer"]["state"][0]["exp_avg"])


def test_the_weight_average_by_hand() -> None:
    """After each optimizer step the average moves ``1 - d`` of the way to the weights, ``d``
    warmed up as ``min(decay, (1 + n) / (10 + n))``; ``swap`` exchanges them and back."""
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    optimizer = FlatAdam(module, lr=0.1, eps=1e-8)
    average = WeightAverage(optimizer, module, decay=0.5)
    expected = optimizer.flat.detach().clone()
    for n in (1, 2, 3):
        optimizer.zero_grad()
        module(torch.randn(4, 3)).square().sum().backward()
        optimizer.step()
        average.update()
        d = min(0.5, (1 + n) / (10 + n))
        expected = d * expected + (1 - d) * optimizer.flat.detach()
    state = average.module_state(module)
    assert torch.allclose(torch.cat([state["weight"].reshape(-1), state["bias"]]), expected)
    assert not torch.allclose(module.weight.detach().reshape(-1), expected[:6])
    trained = optimizer.flat.detach().clone()
    average.swap()
    assert torch.allclose(torch.cat([module.weight.detach().reshape(-1), module.bias.detach()]),
                          expected)
    average.swap()
    assert torch.equal(optimizer.flat.detach(), trained)
    with pytest.raises(ValueError, match="decay must be in"):
        WeightAverage(optimizer, module, decay=1.0)


def test_a_cloning_run_gives_out_its_averaged_weights(tmp_path: Path) -> None:
    """With ``bc.weight_average`` a checkpoint's ``agent`` (what play, evaluations and
    ``--init-from`` read) is the average, the trained weights beside it; validation scores the
    average."""
    config = tictactoe_config("bc.total_steps=1536", "bc.weight_average=0.99",
                              "bc.validate_every=3", "bc.validation_steps=4")
    run_cloning(config, run_dir=tmp_path / "run")
    state = load_checkpoint(list_checkpoints(tmp_path / "run" / "checkpoints")[-1])
    assert state["weight_average"]["steps"] == 3 * 2 * 4  # updates x epochs x minibatches
    assert any(not torch.equal(v, state["trained_agent"][k]) for k, v in state["agent"].items())
    cloner = build_cloner(config, None)
    try:
        names = [n for n, p in cloner.agent.named_parameters() if p.requires_grad]
        flat = torch.cat([state["agent"][n].reshape(-1) for n in names])
        assert torch.equal(flat, state["weight_average"]["average"])
        cloner.load_state_dict(state)
        scored = cloner.validate()
        cloner.agent.load_state_dict(state["agent"])
        cloner.average = None
        assert cloner.validate() == scored
    finally:
        cloner.close()
    with pytest.raises(ConfigError, match=r"bc.weight_average must be in \[0, 1\)"):
        tictactoe_config("bc.weight_average=1.0")


def collected(cloner: Cloner) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One update's observations, labels and imitated rows (numpy copies)."""
    cloner.collect()
    cloner.update += 1
    return cloner.obs.numpy().copy(), cloner.labels.numpy().copy(), cloner.imitated.numpy().copy()


def test_students_play_the_clones_moves_and_learn_the_teachers_labels() -> None:
    """bc.student_share 1: the network's sampled moves are played on win_or_block's seats
    (the games differ from the teachers' own from the same seed), the labels there are
    still win_or_block's (it wins wherever it can), the students' games are counted, and the
    share rises over bc.student_ramp."""
    mixed = ["bc.teachers=[win_or_block,random]", "bc.imitate=[win_or_block]",
             "bc.total_steps=2048"]
    teachers = build_cloner(tictactoe_config(*mixed), None)
    learners = build_cloner(tictactoe_config(*mixed, "bc.student_share=1.0"), None)
    ramped = build_cloner(tictactoe_config(*mixed, "bc.student_share=0.8",
                                           "bc.student_ramp=0.5"), None)
    try:
        assert teachers.students is None and learners.students is not None
        assert ramped.students is not None
        assert [ramped.students.share(p) for p in (0, 0.25, 0.5, 1)] == [0, 0.4, 0.8, 0.8]
        assert not ramped.students.seats.any()  # its first games: the share is still 0
        obs_t, _, _ = collected(teachers)
        obs_s, labels, imitated = collected(learners)
        assert not np.array_equal(obs_t, obs_s)
        assert learners.students.steps == imitated.sum() > 100
        own = obs_s[imitated][:, 0].reshape(-1, 9) == 1
        opp = obs_s[imitated][:, 1].reshape(-1, 9) == 1
        wins = completing(own, ~own & ~opp)
        can_win = wins.any(1)
        assert can_win.sum() > 10
        assert wins[np.arange(len(own)), labels[imitated]][can_win].all()
        metrics = learners.run_update()
        assert metrics["bc/student_share"] == 1.0
        # the games the network played on win_or_block's seats, start to end (32 envs of
        # tic-tac-toe: most of them end within the update's 16 steps)
        assert metrics["students/games"] > 30
        rates = [metrics[f"students/{k}_rate"] for k in ("win", "draw", "loss")]
        assert sum(rates) == pytest.approx(1)
    finally:
        teachers.close()
        learners.close()
        ramped.close()


def test_the_students_games_are_counted_by_opponent() -> None:
    """bc.student_share 0.5 on win_or_block's seats, random the other teacher: every game of
    a student counts once, against the teacher on the other seat or against students (both
    seats the network's); the barely trained network wins far more often against random than
    against win_or_block, which wins or blocks wherever it can."""
    config = tictactoe_config("bc.teachers=[win_or_block,random]", "bc.imitate=[win_or_block]",
                              "bc.student_share=0.5", "bc.total_steps=4096",
                              "log.return_window=500")
    cloner = build_cloner(config, None)
    try:
        for _ in range(cloner.num_updates):
            metrics = cloner.run_update()
    finally:
        cloner.close()
    names = ("random", "win_or_block", "students")
    games = {name: metrics[f"students/games/{name}"] for name in names}
    assert sum(games.values()) == metrics["students/games"] > 150
    assert min(games.values()) >= 15, games
    assert metrics["students/win_rate/random"] > metrics["students/win_rate/win_or_block"] + 0.2


def test_cloning_starts_from_another_runs_network(tmp_path: Path) -> None:
    """bc --init-from: the new run's network is the checkpoint's, bit for bit, with a fresh
    optimizer and counters; a checkpoint of another game is one line."""
    first = run_cloning(tictactoe_config("bc.total_steps=1024"), run_dir=tmp_path / "first")
    path = list_checkpoints(Path(first["run_dir"]) / "checkpoints")[-1]
    config = replace(tictactoe_config("bc.total_steps=1024"), init_from=str(tmp_path / "first"))
    cloner = build_cloner(config, None, path)
    try:
        saved = load_checkpoint(path)["agent"]
        for key, value in cloner.agent.state_dict().items():
            assert torch.equal(value, saved[key]), key
        assert cloner.global_step == 0 and not cloner.optimizer.state_dict()["state"]
    finally:
        cloner.close()
    summary = run_cloning(config, run_dir=tmp_path / "second")
    assert summary["global_step"] == 1024
    saved_config = (tmp_path / "second" / "config.yaml").read_text()
    assert f"init_from: {path.resolve()}" in saved_config
    from selfplay.train import run_training

    other = build_config("CartPole-v1", overrides=["league.enabled=false", "game.num_envs=2",
                                                   "ppo.num_steps=8", "log.tensorboard=false",
                                                   "log.progress=false"], total_steps=16)
    run_training(other, run_dir=tmp_path / "cartpole")
    with pytest.raises(CheckpointError, match="is for game CartPole-v1, this run trains "
                                              "tictactoe"):
        build_cloner(config, None, list_checkpoints(tmp_path / "cartpole" / "checkpoints")[-1])


def test_checkpoints_load_eval_and_play_like_training_runs(tmp_path: Path) -> None:
    config = tictactoe_config("bc.total_steps=1024")
    summary = run_cloning(config, run_dir=tmp_path / "run")
    assert summary["global_step"] == 1024
    path = list_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    trained, agent, state = load_agent(path)
    assert trained.game.name == "tictactoe" and state["game"] == "tictactoe"
    assert trained.bc.teachers == [TEACHER]
    for key, value in agent.state_dict().items():
        assert torch.equal(value, state["agent"][key])
    assert (tmp_path / "run" / "config.yaml").is_file()
    assert "bc/accuracy/action" in (tmp_path / "run" / "metrics.jsonl").read_text()
    assert evaluate(path, episodes=2)["episodes"] == 2
    assert play(tmp_path / "run", "random", games=4)["games"] == 4


def test_resuming_a_training_run_as_cloning_is_refused(tmp_path: Path) -> None:
    from selfplay.train import run_training

    config = build_config("tictactoe", overrides=[
        "league.enabled=false", "game.num_envs=4", "ppo.num_steps=8", "log.tensorboard=false",
        "log.progress=false", f"bc.teachers=[{TEACHER}]"], total_steps=32)
    run_training(config, run_dir=tmp_path / "ppo")
    with pytest.raises(CheckpointError, match="is a selfplay train run, not a cloning run"):
        run_cloning(None, resume=tmp_path / "ppo")


@pytest.mark.parametrize(("overrides", "error", "message"), [
    (["bc.teachers=[]"], ConfigError, "name the teachers"),
    (["bc.teachers=[minimax]"], GameError, "unknown tictactoe bot 'minimax'; known: random, "
                                           "win_or_block"),
    (["bc.winners_only=true"], GameError, "winners_only needs replays"),
    (["bc.imitate=[random]"], GameError, "imitate names 'random', who does not play"),
    (["bc.teachers=[]", "bc.replays=/no/such/folder"], ConfigError,
     "bc.replays: no such folder /no/such/folder"),
    (["bc.teachers=[]", "bc.replays=/etc/hostname"], ConfigError,
     "bc.replays: /etc/hostname is a file, not a folder of replays"),
    (["bc.phase_weights=[1, 2]"], GameError,
     "bc.phase_weights: tictactoe's teacher games cannot tell how far their games have gone"),
])
def test_bad_teachers_are_one_line_errors(tmp_path: Path, overrides: list[str],
                                          error: type[Exception], message: str) -> None:
    config = tictactoe_config(*overrides)
    with pytest.raises(error, match=message) as caught:
        run_cloning(config, run_dir=tmp_path / "run")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()  # no empty run left behind


@pytest.mark.parametrize("weights", ["[1, -1]", "[0, 0]"])
def test_bad_phase_weights_are_a_config_error(weights: str) -> None:
    with pytest.raises(ConfigError, match=r"^bc.phase_weights must be >= 0 with one > 0, got "):
        tictactoe_config(f"bc.phase_weights={weights}")


def test_replays_of_a_game_without_them_are_refused(tmp_path: Path) -> None:
    config = tictactoe_config("bc.teachers=[]")
    config = replace(config, bc=replace(config.bc, replays=str(tmp_path)))
    with pytest.raises(GameError, match="tictactoe has no replays"):
        build_cloner(config, None)


def test_a_game_without_teachers_is_refused() -> None:
    config = build_config("CartPole-v1", overrides=["bc.teachers=[x]"])
    with pytest.raises(GameError, match="CartPole-v1 has no teachers for behaviour cloning"):
        build_cloner(config, None)


def test_exclusive_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="bc.imitate and bc.winners_only are exclusive"):
        tictactoe_config("bc.imitate=[a]", "bc.winners_only=true")
    with pytest.raises(ConfigError, match="bc.teachers and bc.replays are exclusive"):
        tictactoe_config("bc.replays=somewhere")
    with pytest.raises(ConfigError, match="bc.student_share needs live teachers"):
        tictactoe_config("bc.teachers=[]", "bc.replays=somewhere", "bc.student_share=0.5")
    with pytest.raises(ConfigError, match="bc.student_share must be between 0 and 1, got 1.5"):
        tictactoe_config("bc.student_share=1.5")
    with pytest.raises(ConfigError, match="bc.student_ramp must be between 0 and 1"):
        tictactoe_config("bc.student_ramp=-1")


# --------------------------------------------------------------------------- grid actions


class UnitGrid:
    """A tiny grid game whose teacher's per-cell orders are written on the board: units
    (plane 0) on a quarter of the cells, each showing whether it moves (plane 1) and where
    (planes 2-5, one-hot).

    Action per cell: (type: 0 stay / 1 move, direction 0..3), direction used only by a move;
    cells without a unit have no legal value, and their labels are garbage (never counted)."""

    def __init__(self, num_envs: int, seed: int) -> None:
        self.space = MultiDiscrete((2, 4), grid=(4, 4), gates=(None, (1,)))
        self.spec = GameSpec(name="unitgrid", num_envs=num_envs, num_seats=1,
                             obs_shape=(6, 4, 4), obs_dtype=np.dtype(np.float32),
                             action_space=self.space, obs_kind="grid")
        self.rng = np.random.default_rng(seed)
        self.teacher_actions = np.zeros((num_envs, 1, 16, 2), np.int64)
        self.imitate = np.ones((num_envs, 1), bool)
        self.steps = 0

    def _batch(self, done: bool) -> Batch:
        e = self.spec.num_envs
        unit = self.rng.random((e, 16)) < 0.25  # [E, 16]
        moves = self.rng.integers(0, 2, (e, 16))
        where = self.rng.integers(0, 4, (e, 16))
        towards = unit[:, None] * (where[:, None] == np.arange(4)[:, None])  # [E, 4, 16]
        obs = np.concatenate([np.stack([unit, unit * moves], 1), towards], 1)
        mask = np.zeros((e, 1, 16, 6), bool)
        mask[:, 0][unit] = True
        labels = self.rng.integers(0, 2, (e, 16, 2))  # garbage where there is no unit
        labels[unit] = np.stack([moves[unit], where[unit]], -1)
        self.teacher_actions = labels[:, None]
        ended = np.full(e, done)
        episodes = (EpisodeStats(np.arange(e), np.zeros(e, np.int64), np.zeros(e),
                                 np.full(e, 5), np.full(e, Outcome.WIN, np.int8))
                    if done else EpisodeStats.empty())
        return Batch(obs.reshape(e, 1, 6, 4, 4).astype(np.float32), mask, None,
                     np.zeros((e, 1), np.float32), ended, np.zeros(e, bool),
                     np.ones((e, 1), bool), episodes)

    def reset(self, seed: int | None = None) -> Batch:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.steps = 0
        return self._batch(False)

    def step(self, actions: np.ndarray) -> Batch:
        self.steps += 1
        return self._batch(self.steps % 5 == 0)

    def close(self) -> None:
        pass


def test_cloning_grid_orders_learns_each_component() -> None:
    """GridNet on per-cell gated orders: both components' accuracies climb near 1, counted on
    unit cells only (a quarter of them), the direction only on cells that move."""
    config = tictactoe_config("network.kind=gridnet", "network.channels=[32]",
                              "network.hidden=[32]", "bc.num_envs=16", "bc.num_steps=8",
                              "bc.total_steps=6144", "bc.learning_rate=1e-2",
                              "bc.validate_every=16", "bc.validation_steps=4")
    cloner = Cloner(config, UnitGrid(16, 0), UnitGrid(16, 1), validation_seed=1)
    history = [cloner.run_update() for _ in range(cloner.num_updates)]
    first, last = history[0], history[-1]
    assert first["bc/accuracy/c0"] < 0.7 and first["bc/accuracy/c1"] < 0.5
    assert last["val/accuracy/c0"] > 0.9 and last["val/accuracy/c1"] > 0.85
    assert last["loss/bc_policy"] < first["loss/bc_policy"] / 4
    cells = 16 * 8 * 16 * 0.25  # steps x envs x cells x unit share
    assert abs(first["bc/labelled_cells"] - cells) < 0.15 * cells
    assert first["bc/illegal_labels"] == 0


def test_students_need_a_game_that_lets_them_play() -> None:
    config = tictactoe_config("bc.student_share=0.5")
    with pytest.raises(GameError, match="unitgrid's teacher games cannot let the learner play"):
        Cloner(config, UnitGrid(4, 0))


def test_cloning_minibatches_cover_every_row_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """bc.minibatches minibatches per epoch, of nearly equal size, every row where a seat
    acted in one (their number varies in tic-tac-toe: the remainder was never learned)."""
    import selfplay.cloning as cloning

    seen: list[int] = []

    def counting(dist, labels, *rest):  # type: ignore[no-untyped-def]
        seen.append(len(labels))
        return clone_terms(dist, labels, *rest)

    monkeypatch.setattr(cloning, "clone_terms", counting)
    cloner = build_cloner(tictactoe_config("bc.minibatches=7"), None)
    try:
        for _ in range(3):
            cloner.collect()
            rows = int(cloner.alive.sum())
            seen.clear()
            cloner.learn()
            assert len(seen) == 2 * 7 and sum(seen) == 2 * rows, (rows, seen)
            assert max(seen) - min(seen) <= 1
    finally:
        cloner.close()
