"""PPO end to end on real games: learning, determinism, exact resume, masking in the loop."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from games.registry import make_game
from selfplay.config_files import build_config
from selfplay.ppo import Trainer
from selfplay.tracking import RunDir


def make_trainer(game: str, overrides: list[str], run: RunDir | None = None,
                 seed: int = 1, total_steps: int = 50_000) -> Trainer:
    config = build_config(game, overrides=["log.progress=false", "log.tensorboard=false",
                                           *overrides], seed=seed, total_steps=total_steps)
    return Trainer(config, make_game(game, config.game.num_envs, config.seed,
                                     config.game.options), run)


def test_cartpole_training_mechanics() -> None:
    """The loop of test_cartpole_learns_quickly over three updates: the step and update
    counters, finished episodes in the summary, weights that moved (not the learning)."""
    trainer = make_trainer("CartPole-v1", [], total_steps=3 * 1024)
    before = [p.detach().clone() for p in trainer.agent.parameters()]
    trainer.train()
    assert trainer.update * trainer.steps_per_update == trainer.global_step >= 3 * 1024
    summary = trainer.episodes.summary()
    assert summary["episodes"] > 0 and summary["episode/return_mean"] > 0, summary
    assert any(not torch.equal(a, p.detach()) for a, p in zip(before, trainer.agent.parameters(),
                                                              strict=True))


@pytest.mark.slow  # a learning run (`make bench`): 50 s on the 2-core machine
def test_cartpole_learns_quickly() -> None:
    """Learning smoke test: CartPole mean return >= 200 within 50k steps."""
    trainer = make_trainer("CartPole-v1", [], total_steps=50_000)
    trainer.train()
    summary = trainer.episodes.summary()
    assert trainer.global_step >= 50_000 - trainer.steps_per_update
    assert summary["episode/return_mean"] >= 200, summary


def test_same_seed_same_result() -> None:
    runs = []
    for _ in range(2):
        trainer = make_trainer("CartPole-v1", [], total_steps=2048)
        trainer.train()
        runs.append(torch.cat([p.detach().flatten() for p in trainer.agent.parameters()]))
    assert torch.equal(runs[0], runs[1])


@pytest.mark.parametrize("game,overrides", [
    ("CartPole-v1", []),
    ("tictactoe", ["league.enabled=false"]),  # 0-d state arrays (see test_checkpoint)
    ("Pendulum-v1", ["ppo.num_steps=64", "ppo.num_minibatches=4", "ppo.update_epochs=2",
                     "normalize.value=true"]),
])
def test_resume_gives_same_next_update(tmp_path: Path, game: str, overrides: list[str]) -> None:
    """Save after 2 updates, resume in a fresh trainer: update 3 matches an uninterrupted run."""
    steps = 3
    base = make_trainer(game, [*overrides, "checkpoint.every_updates=2"], RunDir(tmp_path / "a"))
    per = base.steps_per_update
    base.config = replace(base.config, total_steps=per * steps)
    base.train()
    reference = [p.detach().clone() for p in base.agent.parameters()]

    first = make_trainer(game, [*overrides, "checkpoint.every_updates=2"], RunDir(tmp_path / "b"))
    first.config = replace(first.config, total_steps=per * steps)
    while first.update < 2:
        first.collect()
        first.learn()
        first.update += 1
    path = first.save()
    from selfplay.checkpoint import load_checkpoint

    resumed = make_trainer(game, [*overrides], RunDir(tmp_path / "b"), seed=999)
    resumed.config = replace(resumed.config, total_steps=per * steps)
    assert resumed.load_state_dict(load_checkpoint(path)) is True
    resumed.collect()
    resumed.learn()
    for got, want in zip(resumed.agent.parameters(), reference, strict=True):
        assert torch.equal(got.detach(), want), "resumed update differs from uninterrupted run"


def test_signal_mid_rollout_finishes_the_update_then_resumes_exactly(tmp_path: Path) -> None:
    """A SIGINT arriving in the middle of update 2's rollout: the update finishes, the
    checkpoint sits after it, and a resumed run ends with the weights of an uninterrupted one."""
    import signal

    from selfplay.checkpoint import load_checkpoint
    from selfplay.ppo import TrainingInterrupted

    sets = ["checkpoint.every_updates=100"]
    base = make_trainer("CartPole-v1", sets, RunDir(tmp_path / "a"), total_steps=4 * 1024)
    base.train()
    reference = [p.detach().clone() for p in base.agent.parameters()]

    first = make_trainer("CartPole-v1", sets, RunDir(tmp_path / "b"), total_steps=4 * 1024)
    calls = 0

    def interrupt_mid_rollout(_stats: object) -> None:
        nonlocal calls
        calls += 1
        if first.update == 1 and first.loop._stop_signal is None:  # noqa: SLF001
            signal.raise_signal(signal.SIGINT)  # as a user's Ctrl-C

    first.add_episode_listener(interrupt_mid_rollout)
    with pytest.raises(TrainingInterrupted) as stop:
        first.train()
    assert first.update == 2 and stop.value.checkpoint is not None
    resumed = make_trainer("CartPole-v1", [], RunDir(tmp_path / "b"), seed=999,
                           total_steps=4 * 1024)
    assert resumed.load_state_dict(load_checkpoint(stop.value.checkpoint)) is True
    resumed.train()
    assert resumed.update == base.update > 2
    for got, want in zip(resumed.agent.parameters(), reference, strict=True):
        assert torch.equal(got.detach(), want), "resumed run differs from uninterrupted run"
    first.actor.listeners.clear()
    first.train()  # the interrupted trainer itself may go on: to the same weights
    assert first.update == base.update
    for got, want in zip(first.agent.parameters(), reference, strict=True):
        assert torch.equal(got.detach(), want), "continued trainer differs"


def test_loading_a_checkpoint_restores_python_random_and_replaces_episode_log(
        tmp_path: Path) -> None:
    import random

    from selfplay.checkpoint import load_checkpoint

    trainer = make_trainer("CartPole-v1", [], RunDir(tmp_path / "a"), total_steps=2 * 1024)
    trainer.train()
    random.seed(11)
    path = trainer.save()
    expected = random.random()
    episodes = trainer.episodes.state_dict()
    assert episodes["returns"]
    state = load_checkpoint(path)
    trainer.load_state_dict(state)
    trainer.load_state_dict(state)  # twice: the episode window is replaced, not extended
    assert random.random() == expected
    assert trainer.episodes.state_dict() == episodes


def test_masked_actions_never_illegal_in_rollout() -> None:
    """The learner on tic-tac-toe self-play never plays an occupied cell (illegal = loss)."""
    trainer = make_trainer("tictactoe", ["ppo.num_steps=16", "game.num_envs=32"],
                           total_steps=16 * 32 * 3)
    trainer.train()
    buf = trainer.buffer
    flat_actions = buf.actions.reshape(-1)
    assert buf.mask is not None
    flat_mask = buf.mask.reshape(-1, 9)
    trained = buf.trained.reshape(-1)
    legal = flat_mask[torch.arange(len(flat_actions)), flat_actions]
    assert bool(legal[trained].all())


def test_selfplay_tictactoe_trains_both_seats() -> None:
    """The set-up of test_selfplay_tictactoe_beats_random over two updates: the critic reads
    the global state, the learner's rows are both seats' turns, the weights move."""
    trainer = make_trainer("tictactoe", [], total_steps=2 * 32 * 32)
    assert trainer.agent.critic_reads_state
    before = [p.detach().clone() for p in trainer.agent.parameters()]
    trainer.train()
    assert trainer.update == 2
    per_seat = trainer.buffer.trained.float().mean(dim=(0, 1))  # [A]: turns alternate
    assert torch.allclose(per_seat, torch.full((2,), 0.5), atol=0.05), per_seat
    summary = trainer.episodes.summary()
    assert summary["episodes"] > 0 and summary["episode/length_mean"] >= 5, summary
    assert any(not torch.equal(a, p.detach()) for a, p in zip(before, trainer.agent.parameters(),
                                                              strict=True))


def test_a_turn_based_rollout_too_short_to_train_is_refused() -> None:
    """A seat waiting for its turn at a rollout's end leaves its last move out of the update:
    with ppo.num_steps=1 nothing trained at all."""
    from selfplay.config import ConfigError

    with pytest.raises(ConfigError, match="ppo.num_steps=2: tictactoe's seats take turns"):
        make_trainer("tictactoe", ["ppo.num_steps=2", "league.enabled=false"])
    trainer = make_trainer("tictactoe", ["ppo.num_steps=8", "league.enabled=false",
                                         "game.num_envs=4"], total_steps=8 * 4)
    trainer.train()
    assert trainer.update == 1 and trainer.buffer.trained.sum() > 0


def test_reward_scale_counts_the_returns_of_seats_waiting_for_their_turn() -> None:
    """normalize.reward on tic-tac-toe: a game's loss arrives on the winner's move, when the
    loser's seat does not act; its return feeds the scale (only the acting seats' did: the
    statistics saw every win and no loss)."""
    trainer = make_trainer("tictactoe", ["normalize.reward=true", "league.enabled=false",
                                         "ppo.num_steps=16", "game.num_envs=8"],
                           total_steps=16 * 8)
    trainer.train()
    scaler = trainer.actor.reward_scaler
    assert scaler is not None
    # every acting step, and the waiting seat's steps once it has moved in its game
    assert 16 * 8 + 1 < scaler.stats.count < 16 * 8 * 2
    assert scaler.stats.mean.item() == pytest.approx(0.0, abs=0.05)  # zero-sum: wins and losses


@pytest.mark.slow  # a learning run (`make bench`): 20 s on the 2-core machine
def test_selfplay_tictactoe_beats_random() -> None:
    """Two-seat self-play with a centralized critic learns to beat a random player."""
    from games.boardgames.bots import random_legal
    from selfplay.policy import FrozenPolicy

    trainer = make_trainer("tictactoe", [], total_steps=80_000)
    assert trainer.agent.critic_reads_state
    trainer.train()
    game = make_game("tictactoe", 256, seed=123)
    policy = FrozenPolicy(trainer.agent, deterministic=False,
                          generator=torch.Generator().manual_seed(0))
    rng = np.random.default_rng(0)
    batch = game.reset(seed=123)
    outcomes = []
    learner_seat = np.arange(256) % 2  # learner plays seat 0 in even envs, seat 1 in odd
    while len(outcomes) < 400:
        assert batch.action_mask is not None
        ours = policy.act(batch.obs.reshape(512, 3, 3, 3), batch.action_mask.reshape(512, 9),
                          None).reshape(256, 2)
        rand = random_legal(batch.action_mask.reshape(512, 9), rng).reshape(256, 2)
        seats = np.arange(2)[None, :] == learner_seat[:, None]
        batch = game.step(np.where(seats, ours, rand))
        ep = batch.episodes
        mine = ep.seat == learner_seat[ep.env]
        outcomes.extend(ep.outcome[mine].tolist())
    outcomes_arr = np.asarray(outcomes)
    print("tictactoe vs random (loss, draw, win):", np.bincount(outcomes_arr + 1))
    assert (outcomes_arr == 1).mean() > 0.7, np.bincount(outcomes_arr + 1)


def test_a_rollout_beyond_memory_is_a_config_error_naming_its_settings() -> None:
    """Guards: 100M Lux games were a torch allocation traceback (or, within virtual memory,
    a run the kernel killed later); the rollout's size is checked against the host's memory."""
    from selfplay.config import ConfigError
    from selfplay.rollout import RolloutBuffer, rollout_bytes

    game = make_game("tictactoe", 2, 0)
    spec = replace(game.spec, num_envs=10**10)
    game.close()
    with pytest.raises(ConfigError, match=r"game\.num_envs=10000000000 .*GiB"):
        RolloutBuffer(spec, 128, torch.float32, None, torch.float32)
    for name in ("tictactoe", "Pendulum-v1"):  # int64 and float32 actions
        game = make_game(name, 2, 0)
        small = replace(game.spec, num_envs=4)
        game.close()
        buffer = RolloutBuffer(small, 8, torch.float32, None, torch.float32)
        stored = sum(x.numel() * x.element_size() for x in buffer.tensors())
        assert rollout_bytes(small, 8, torch.float32, None, torch.float32) == stored, name


@pytest.mark.parametrize(("minibatches", "sizes"), [(100, {1, 2}), (3, {42, 43}), (4, {32})])
def test_minibatches_cover_every_row_once_however_they_divide(
        monkeypatch: pytest.MonkeyPatch, minibatches: int, sizes: set[int]) -> None:
    """ppo.num_minibatches minibatches per epoch, of nearly equal size, every row in one: 100
    of 128 rows took 128 optimizer steps of one row each, and 3 dropped 2 rows per epoch."""
    from selfplay.learning import PPOLearner

    trainer = make_trainer("CartPole-v1", ["game.num_envs=2", "ppo.num_steps=64",
                                           f"ppo.num_minibatches={minibatches}",
                                           "ppo.update_epochs=2"])
    seen: list[int] = []
    backward = PPOLearner._backward

    def counting(self: PPOLearner, rows: object, mb: torch.Tensor, *rest: object) -> object:
        seen.append(len(mb))
        return backward(self, rows, mb, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(PPOLearner, "_backward", counting)
    trainer.collect()
    trainer.learn()
    assert len(seen) == 2 * minibatches and sum(seen) == 2 * 128 and set(seen) == sizes


def test_value_clipping_is_centred_on_the_critics_own_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: with normalize.value and clip_vloss the old values were normalized with the
    statistics already updated by this rollout's returns, so the clip's centre sat away from
    what the critic had output (a shift of the mean made the clipped branch constant: no
    gradient). At the first minibatch, before any step, the critic still outputs them."""
    from selfplay.learning import PPOLearner

    trainer = make_trainer("CartPole-v1", ["game.num_envs=2", "ppo.num_steps=64",
                                           "normalize.value=true", "ppo.clip_vloss=true",
                                           "ppo.num_minibatches=1", "ppo.update_epochs=1"])
    first: list[tuple[torch.Tensor, torch.Tensor]] = []
    backward = PPOLearner._backward

    def watching(self: PPOLearner, rows: object, mb: torch.Tensor, *rest: object) -> object:
        if not first:
            with torch.no_grad():
                _, value = self.agent.forward_all(rows.obs[mb], None,  # type: ignore[attr-defined]
                                                  rows.obs[mb])  # type: ignore[attr-defined]
            first.append((value.float(), rows.values_vs[mb]))  # type: ignore[attr-defined]
        return backward(self, rows, mb, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(PPOLearner, "_backward", watching)
    for _ in range(2):  # the second rollout: statistics that this one's returns move
        first.clear()
        trainer.collect()
        trainer.learn()
    output, centre = first[0]
    torch.testing.assert_close(centre, output, atol=1e-4, rtol=1e-4)


def test_a_seat_out_of_its_game_on_the_last_step_bootstraps_nothing() -> None:
    """Guards (review): with every row of the rollout trained, a seat that left its game on
    the rollout's last step (not acting after it) was bootstrapped from its value there (a
    position the critic never trains on); only rollouts with idle rows zeroed it."""
    from data_parallel_ranks import fixed_rollout, learn_config

    from selfplay.learning import PPOLearner
    from selfplay.networks import ActorCritic

    config = learn_config()
    spec = make_game("tictactoe", 2, 0).spec

    def learned(last_values: torch.Tensor, learner_next: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(0)
        agent = ActorCritic(spec, config.network, config.normalize)
        learner = PPOLearner(config, agent, torch.device("cpu"),
                             torch.Generator().manual_seed(5), turn_based=False)
        buf, _, _ = fixed_rollout(spec, agent)
        buf.trained.fill_(True)
        learner.learn(buf, last_values, learner_next.numpy(), progress=0.0)
        return learner.optimizer.flat.detach().clone()

    last = torch.linspace(-1.0, 1.0, 8 * spec.num_seats)
    out = torch.ones((8, spec.num_seats), dtype=torch.bool)
    out[3, 1] = False  # env 3's seat 1 lost its game on the last step
    zeroed = last.clone()
    zeroed[3 * spec.num_seats + 1] = 0.0
    assert torch.equal(learned(last, out), learned(zeroed, torch.ones_like(out)))
    assert not torch.equal(learned(last, out), learned(last, torch.ones_like(out)))
