"""What the ranks of ``tests/selfplay/test_data_parallel.py`` run: a fixed rollout split by env,
learned from by two gloo ranks, and a two-rank tic-tac-toe run saved and resumed.

The test spawns :func:`run_ranks` once (process start-up is most of its cost) and checks what
each scenario wrote against single-process references computed in the test.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from games.core import GameSpec
from games.registry import make_game
from selfplay.config import TrainConfig
from selfplay.config_files import build_config
from selfplay.data_parallel import Ranks, pin_gloo_to_loopback
from selfplay.learning import PPOLearner
from selfplay.networks import ActorCritic
from selfplay.normalize import RunningMeanStd
from selfplay.ppo import Trainer
from selfplay.rollout import RolloutBuffer
from selfplay.tracking import RunDir

STEPS, ENVS = 6, 8  # the fixed rollout: [T, E, A], E split between the ranks
RMS_ROWS = (37, 11)  # rows of the merged running statistics, per rank


def learn_config() -> TrainConfig:
    """Tic-tac-toe's network, 3 minibatches, 2 epochs, normalized advantages and values."""
    return build_config("tictactoe", overrides=[
        "league.enabled=false", "log.progress=false", "log.tensorboard=false",
        "ppo.num_minibatches=3", "ppo.update_epochs=2", "ppo.norm_adv=true",
        "normalize.value=true", "network.hidden=[32,32]"], seed=3)


def fixed_rollout(spec: GameSpec, agent: ActorCritic, envs: slice = slice(None)
                  ) -> tuple[RolloutBuffer, torch.Tensor, torch.Tensor]:
    """A seeded synthetic rollout of ``ENVS`` envs (idle and trained seats, episode ends, legal
    actions), restricted to ``envs``: ``(buffer, last_values [E' * A], learner_next [E', A])``."""
    gen = torch.Generator().manual_seed(11)
    t, e, a = STEPS, ENVS, spec.num_seats
    critic = spec.state_shape if agent.critic_reads_state else None
    full = RolloutBuffer(replace(spec, num_envs=e), t, torch.float32,
                         critic, torch.float32)
    full.obs.copy_(torch.rand(full.obs.shape, generator=gen).round())
    if full.critic_in is not None:
        full.critic_in.copy_(torch.rand(full.critic_in.shape, generator=gen).round())
    assert full.mask is not None
    full.mask.copy_(torch.rand(full.mask.shape, generator=gen) < 0.6)
    actions = torch.randint(0, full.mask.shape[-1], (t, e, a), generator=gen)
    full.mask.scatter_(-1, actions[..., None], True)  # the action taken is legal
    full.actions.copy_(actions.view(full.actions.shape))
    full.logprobs.copy_(-2.2 + 0.3 * torch.randn((t, e, a), generator=gen))
    full.values.copy_(torch.randn((t, e, a), generator=gen))
    full.rewards.copy_(torch.randn((t, e, a), generator=gen))
    full.dones.copy_((torch.rand((t, e, 1), generator=gen) < 0.2).float().expand(t, e, a))
    full.trained.copy_(torch.rand((t, e, a), generator=gen) < 0.7)
    last_values = torch.randn((e, a), generator=gen)
    learner_next = torch.rand((e, a), generator=gen) < 0.7
    if envs == slice(None):
        return full, last_values.reshape(-1), learner_next
    part = RolloutBuffer(replace(spec, num_envs=envs.stop - envs.start), t,
                         torch.float32, critic, torch.float32)
    for name in ("obs", "critic_in", "mask", "actions", "logprobs", "values", "rewards", "dones",
                 "trained"):
        mine = getattr(part, name)
        if mine is not None:
            mine.copy_(getattr(full, name)[:, envs])
    return part, last_values[envs].reshape(-1), learner_next[envs]


def learn_once(ranks: Ranks, envs: slice = slice(None)) -> dict[str, Any]:
    """One :meth:`PPOLearner.learn` on the fixed rollout's ``envs``: the weights after it, the
    value statistics and the metrics."""
    config = learn_config()
    spec = make_game("tictactoe", 2, 0).spec
    torch.manual_seed(0)
    agent = ActorCritic(spec, config.network, config.normalize)
    learner = PPOLearner(config, agent, torch.device("cpu"), torch.Generator().manual_seed(5),
                         ranks=ranks)
    buf, last_values, learner_next = fixed_rollout(spec, agent, envs)
    metrics = learner.learn(buf, last_values, learner_next.numpy(), progress=0.0)
    assert agent.value_rms is not None
    return {"flat": learner.optimizer.flat.detach().clone(), "metrics": metrics,
            "value_rms": {k: v.clone() for k, v in agent.value_rms.state_dict().items()}}


def rms_rows(rank: int) -> torch.Tensor:
    """Rank ``rank``'s rows ``[K, 3]`` for the merged running statistics."""
    gen = torch.Generator().manual_seed(100 + rank)
    return 5.0 + 3.0 * torch.randn((RMS_ROWS[rank], 3), generator=gen, dtype=torch.float64)


def rms_start() -> RunningMeanStd:
    """Running statistics that already hold some data (the same on every rank)."""
    rms = RunningMeanStd((3,))
    rms.update(torch.linspace(-1.0, 4.0, 30, dtype=torch.float64).view(10, 3))
    return rms


def tictactoe_config(run: Path) -> TrainConfig:
    return build_config("tictactoe", overrides=[
        "league.enabled=false", "log.progress=false", "log.tensorboard=false",
        "game.num_envs=8", "ppo.num_steps=8", "ppo.num_minibatches=2", "ppo.update_epochs=2",
        "normalize.reward=true", "network.hidden=[32,32]", "checkpoint.every_updates=2"],
        seed=7, total_steps=3 * 64)


def trainer(ranks: Ranks, run: Path) -> Trainer:
    config = tictactoe_config(run)
    game = make_game("tictactoe", ranks.local_envs(config.game.num_envs),
                     ranks.seed(config.seed))
    return Trainer(config, game, RunDir(run), ranks)


def train_save_resume(ranks: Ranks, run: Path) -> dict[str, Any]:
    """Three updates straight, and two saved (rank 0 writes) then resumed in new trainers for
    the third: both runs' weights."""
    straight = trainer(ranks, run / "straight")
    straight.train()
    first = trainer(ranks, run / "saved")
    while first.update < 2:
        first.run_update()
    path = first.save()
    first.game.close()
    resumed = trainer(ranks, run / "saved")
    from selfplay.checkpoint import load_checkpoint

    exact = resumed.load_state_dict(load_checkpoint(path))
    resumed.run_update()
    return {"straight": straight.optimizer.flat.detach().clone(),
            "resumed": resumed.optimizer.flat.detach().clone(), "exact": exact,
            "global_step": resumed.global_step, "checkpoint": str(path)}


def league_config() -> TrainConfig:
    """Tic-tac-toe in a league: a snapshot every update, PFSP, a scripted training opponent,
    rating games in this process every second update."""
    return build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "game.num_envs=8", "ppo.num_steps=8",
        "ppo.num_minibatches=2", "ppo.update_epochs=1", "network.hidden=[32,32]",
        "league.snapshot_every=1", "league.eval_every=2", "league.eval_process=false",
        "league.eval_games=2", "league.self_play=0.2", "league.bots=[random]",
        "league.bot_share=0.3"], seed=9)


def league_trainer(ranks: Ranks, run: Path, checkpoint: Path | None = None
                   ) -> tuple[Any, Any, list[int]]:
    """A league run's trainer, its league hook (restored from ``checkpoint`` when given; the
    payoff table undecayed, so it counts games) and this rank's count of finished games
    against league players (an episode listener that reads the opponents before the league
    replaces them)."""
    from games.core import EpisodeStats, Outcome
    from selfplay.checkpoint import load_checkpoint
    from selfplay.league_bot_envs import LEARNER
    from selfplay.league_training import attach

    config = league_config()
    game = make_game("tictactoe", ranks.local_envs(config.game.num_envs),
                     ranks.seed(config.seed))
    run.mkdir(parents=True, exist_ok=True)
    trained = Trainer(config, game, RunDir(run), ranks)
    if checkpoint is not None:
        trained.load_state_dict(load_checkpoint(checkpoint))
    counted, box = [0], []

    def count(stats: EpisodeStats) -> None:
        seat0 = stats.seat == 0
        picks = box[0].opponent[stats.env[seat0]]
        counted[0] += int(((picks != LEARNER) & (stats.outcome[seat0] != Outcome.NONE)).sum())

    trained.add_episode_listener(count)
    hook = attach(trained, run)
    hook.matchmaker.payoff.decay = 1.0
    box.append(hook)
    return trained, hook, counted


def league_save_resume(ranks: Ranks, run: Path) -> dict[str, Any]:
    """Three league updates straight, and two saved then resumed for the third: each rank's
    weights, payoff table, opponents and the database's snapshots."""
    out: dict[str, Any] = {}
    straight, hook, counted = league_trainer(ranks, run / "straight")
    tables = []
    for _ in range(3):
        straight.run_update()
        tables.append(hook.matchmaker.state_dict())
    out["straight"] = {"flat": straight.optimizer.flat.detach().clone(), "tables": tables,
                       "opponent": hook.opponent.copy(), "rng": hook.rng.bit_generator.state,
                       "players": [(p.name, p.kind) for p in hook.db.players()],
                       "matches": len(hook.db.matches()), "counted": counted[0]}
    hook.close()
    first, hook, _ = league_trainer(ranks, run / "saved")
    while first.update < 2:
        first.run_update()
    path = first.save()
    hook.close()
    resumed, hook, _ = league_trainer(ranks, run / "saved", path)
    resumed.run_update()
    out["resumed"] = {"flat": resumed.optimizer.flat.detach().clone(),
                      "table": hook.matchmaker.state_dict(), "opponent": hook.opponent.copy(),
                      "rng": hook.rng.bit_generator.state, "checkpoint": str(path)}
    hook.close()
    return out


def _rank(rank: int, world: int, rendezvous: str, out: str) -> None:
    torch.set_num_threads(1)
    err = os.open(f"{out}.{rank}.stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(err, 2)  # a rank that aborts (gloo's C++ errors) says why in the test's failure
    pin_gloo_to_loopback()
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)
    try:
        ranks = Ranks(rank, world)
        result: dict[str, Any] = {"learn": learn_once(ranks, slice(rank * ENVS // world,
                                                                   (rank + 1) * ENVS // world))}
        rms = rms_start()
        with ranks.merged([rms]):
            rms.update(rms_rows(rank))
        result["rms"] = {k: v.clone() for k, v in rms.state_dict().items()}
        # rank 0's window holds 1 episode (return 10), rank 1's 3 (returns 2): 4 in all
        result["averaged"] = ranks.average_metrics(
            {"episodes": 1.0 + 2 * rank, "episode/return_mean": 10.0 - 8 * rank, "other": rank},
            {"episode/return_mean": 1.0 + 2 * rank})
        result["train"] = train_save_resume(ranks, Path(out).parent / "runs")
        result["league"] = league_save_resume(ranks, Path(out).parent / "league")
        torch.save(result, f"{out}.{rank}")
    except BaseException:
        dist.destroy_process_group()
        raise
    Ranks(rank, world).close()


def run_ranks(tmp: Path, world: int = 2, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run the scenarios on ``world`` gloo ranks (spawned processes); each rank's results."""
    ctx = multiprocessing.get_context("spawn")
    out = tmp / "result"
    procs = [ctx.Process(target=_rank, args=(r, world, str(tmp / "rendezvous"), str(out)))
             for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    codes = [proc.exitcode for proc in procs]
    if codes != [0] * world:
        logs = [Path(f"{out}.{r}.stderr") for r in range(world)]
        tails = ["".join(log.read_text(errors="replace").splitlines(True)[-15:])
                 if log.exists() else "(no stderr file)" for log in logs]
        raise AssertionError(f"ranks exited with {codes}:\n" + "\n".join(
            f"--- rank {r} stderr ---\n{tail}" for r, tail in enumerate(tails)))
    return [torch.load(f"{out}.{r}", weights_only=False) for r in range(world)]
