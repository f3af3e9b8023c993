"""microRTS end-to-end training throughput against the network's own compute bound.

    .venv/bin/python tools/bench_microrts_training.py --rounds 5
    .venv/bin/python tools/bench_microrts_training.py --set network.channels=[32,64] --json-out X

End to end: the default ``selfplay train --game microrts`` configuration (16x16, 24 envs,
default network; the league's rating games are switched off, they are not training), one
collect + learn cycle at a time, with the split of its wall time between env stepping, acting
(inference, masking, sampling, buffers) and learning.

The bound: the same network, with the same batch sizes and the rollout's real observations,
timed without game, masks or buffers. Per update it runs ``num_steps`` forward passes of actor
and critic over the rows the learner acted for (the rollout), then ``update_epochs x
num_minibatches`` forward + backward passes and optimizer steps over minibatches of the
learner's rows.

The two alternate for ``--rounds`` rounds after a warm-up (``--warmup-collects`` rollouts, then one
update: the JVM's JIT compiler takes a core for the first ~16 updates' worth of engine steps, and
two torch threads beside a busy compiler thread run slower than one), so both see the same
machine; the JIT compilers' CPU time during the rounds is reported. The
ratio (bound time / end-to-end time per update, median over rounds) is what env, masking,
sampling, buffers and logging leave of the network's speed (the target is >= 0.85).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from games.core import MultiDiscrete
from games.files import atomic_write_text
from selfplay.cell_decoder import CellDecoder
from selfplay.cli_common import first_paragraph, nonnegative_int, positive_int, run_tool
from selfplay.config_files import build_config
from selfplay.distributions import CompactGridMask, GridMaskIndex, compact_grid_mask
from selfplay.grid_networks import GridDecoder, GridFeatures
from selfplay.networks import count_parameters
from selfplay.ppo import Trainer
from selfplay.train import build_trainer


def end_to_end_update(trainer: Trainer) -> dict[str, float]:
    """One collect + learn cycle: its wall time and the env / acting / learning split."""
    begin = time.perf_counter()
    trainer.collect()
    tick = time.perf_counter()
    trainer.learn()
    trainer.timer.add("learn", tick)
    seconds = time.perf_counter() - begin
    split = {"env": 0.0, "inference": 0.0, "learn": 0.0}
    for name, spent in trainer.timer.pop().items():
        split[name] += spent
    return {"seconds": seconds, **split}


class ComputeBound:
    """The network's time per update with the rollout's batch sizes (no env, no masks).

    Built from a filled rollout buffer: its observations, and the rows the learner acted for.
    A grid decoder (U-Net, cell decoder) computes the logits of the cells with a legal value
    only, as the rollout and the update do (from the rows' masks); a plain network computes
    every cell's, as they do.
    """

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        cfg, buf = trainer.config.ppo, trainer.buffer
        t_steps, e, a = buf.shape
        self.rows = e * a
        self.obs = buf.flat(buf.obs).clone()
        self.critic = buf.flat(buf.critic_in).clone() if buf.critic_in is not None else self.obs
        self.trained = torch.nonzero(buf.trained.reshape(-1)).squeeze(1)
        self.learner_rows = len(self.trained)
        space = trainer.agent.space
        self.cells = (space.cells if isinstance(space, MultiDiscrete) and buf.mask is not None
                      else None)
        self.mask = (buf.flat(buf.mask).clone() if self.cells is not None
                     and buf.mask is not None else None)
        # the update's legal cells, found once for the rollout's rows as the update does
        self.grid = (GridMaskIndex(self.mask[self.trained], self.cells)
                     if self.mask is not None and self.cells is not None else None)
        self.bounds = [self.learner_rows * k // cfg.num_minibatches  # as the update splits
                       for k in range(cfg.num_minibatches + 1)]
        # the rows the learner acted for at each rollout step
        self.acting = [torch.nonzero(buf.trained[t].reshape(-1)).squeeze(1) + t * self.rows
                       for t in range(t_steps)]

    def _logits(self, obs: torch.Tensor, features: torch.Tensor | GridFeatures,
                legal: Callable[[], CompactGridMask]) -> torch.Tensor:
        """The policy's logits: a grid decoder's on the legal cells only (``legal()``)."""
        agent = self.trainer.agent
        if isinstance(features, GridFeatures) and self.cells is not None:
            head = cast(GridDecoder | CellDecoder, agent.actor_head)
            return head.forward_rows(features, legal().rows)
        return agent.params_from_features(obs, features)

    def rollout(self) -> None:
        agent = self.trainer.agent
        with torch.inference_mode():
            for sel in self.acting:
                obs = self.obs[sel]
                features = agent.actor_torso(obs)
                self._logits(obs, features, functools.partial(
                    compact_grid_mask, cast(torch.Tensor, self.mask)[sel], cast(int, self.cells)))
                agent.value_normalized(obs if self.critic is self.obs else self.critic[sel],
                                       features if agent.shared else None)

    def update(self) -> None:
        agent, cfg = self.trainer.agent, self.trainer.config.ppo
        optimizer = self.trainer.optimizer
        gen = torch.Generator().manual_seed(0)
        for _ in range(cfg.update_epochs):
            order = torch.randperm(self.learner_rows, generator=gen)
            for start, end in zip(self.bounds[:-1], self.bounds[1:], strict=True):
                if end == start:
                    continue
                pick = order[start:end]
                mb = self.trained[pick]
                obs = self.obs[mb]
                features = agent.actor_torso(obs)
                logits = self._logits(obs, features, functools.partial(
                    cast(GridMaskIndex, self.grid).select, pick))
                value = agent.value_normalized(obs if self.critic is self.obs else self.critic[mb],
                                               features if agent.shared else None)
                loss = logits.float().mean() + value.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.clip_grad_norm(cfg.max_grad_norm)
                optimizer.step()

    def measure(self) -> dict[str, float]:
        """One rollout's forward passes and one update's epochs, with the trainer's threads;
        the network and optimizer are restored afterwards."""
        agent, optimizer, config = self.trainer.agent, self.trainer.optimizer, self.trainer.config
        snapshot = {k: v.clone() for k, v in agent.state_dict().items()}
        opt_state = optimizer.state_dict()
        out = {}
        for name, fn in (("rollout", self.rollout), ("update", self.update)):
            torch.set_num_threads(config.torch_threads)
            start = time.perf_counter()
            fn()
            out[name] = time.perf_counter() - start
        agent.load_state_dict(snapshot)
        optimizer.load_state_dict(opt_state)
        return out


def thread_cpu_seconds(prefixes: tuple[str, ...]) -> float | None:
    """CPU seconds so far of this process's threads whose names start with ``prefixes`` (the
    JVM names its JIT compilers "C1 CompilerThread0", "C2 CompilerThread0"); None off Linux."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    ticks = 0
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name.startswith(prefixes):
            fields = stat[stat.rindex(")") + 2:].split()
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def jit_seconds() -> float | None:
    return thread_cpu_seconds(("C1 Compiler", "C2 Compiler"))


def warm_up(trainer: Trainer, collects: int) -> None:
    """``collects`` rollouts without learning, then one full update: the JVM compiles the
    engine's and bots' hot code (its compiler thread takes a core for about 4,000 steps of
    the default envs, longer than a short benchmark), torch allocates its buffers."""
    for _ in range(collects):
        trainer.collect()
    end_to_end_update(trainer)


def measure(trainer: Trainer, rounds: int, warmup_collects: int) -> dict[str, Any]:
    """``rounds`` alternations of one end-to-end update and one bound measurement.

    Alternating puts both under the same machine conditions (a shared VM's speed drifts by
    10-20 % over minutes); each is summarized by its median, and the ratio is the median of the
    per-round ratios.
    """
    warm_up(trainer, warmup_collects)
    jit_before = jit_seconds()
    bound = ComputeBound(trainer)
    bound.measure()
    e2e_rounds, bound_rounds, ratios = [], [], []
    for _ in range(rounds):
        e2e = end_to_end_update(trainer)
        net = bound.measure()
        e2e_rounds.append(e2e)
        bound_rounds.append(net)
        ratios.append((net["rollout"] + net["update"]) / e2e["seconds"])
    jit_after = jit_seconds()
    steps = trainer.steps_per_update
    e2e_seconds = statistics.median(r["seconds"] for r in e2e_rounds)
    bound_seconds = statistics.median(r["rollout"] + r["update"] for r in bound_rounds)
    total = sum(r["seconds"] for r in e2e_rounds)
    split = {k: sum(r[k] for r in e2e_rounds) / total for k in ("env", "inference", "learn")}
    return {
        "end_to_end": {"env_steps_per_second": steps / e2e_seconds,
                       "median_update_seconds": e2e_seconds, "split": split,
                       "rounds": e2e_rounds},
        "compute_bound": {"env_steps_per_second": steps / bound_seconds,
                          "rollout_seconds": statistics.median(r["rollout"]
                                                               for r in bound_rounds),
                          "update_seconds": statistics.median(r["update"] for r in bound_rounds),
                          "rows_per_forward": bound.rows, "learner_rows": bound.learner_rows,
                          "minibatch": bound.bounds[1] - bound.bounds[0],
                          "rounds": bound_rounds},
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "jit_cpu_seconds_during_rounds": (None if jit_before is None or jit_after is None
                                          else jit_after - jit_before),
    }


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--rounds", type=positive_int, default=5,
                        help="alternations of one end-to-end update and one bound measurement")
    parser.add_argument("--warmup-collects", type=nonnegative_int, default=16,
                        help="rollouts without learning before measuring (JVM JIT warm-up)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    config = build_config("microrts", overrides=["log.progress=false", "league.enabled=false",
                                                 *args.set])
    trainer = build_trainer(config, None)
    try:
        measured = measure(trainer, args.rounds, args.warmup_collects)
    finally:
        trainer.game.close()
    e2e, bound, ratio = measured["end_to_end"], measured["compute_bound"], measured["ratio"]
    result = {"config": {"map": config.game.options.get("map"), "num_envs": config.game.num_envs,
                         "network": {"kind": config.network.kind,
                                     "channels": config.network.channels,
                                     "hidden": config.network.hidden},
                         "parameters": count_parameters(trainer.agent),
                         "num_steps": config.ppo.num_steps,
                         "update_epochs": config.ppo.update_epochs,
                         "num_minibatches": config.ppo.num_minibatches,
                         "torch_threads": config.torch_threads,
                         "acting_threads": config.acting_threads, "overrides": args.set},
              "end_to_end": e2e, "compute_bound": bound, "ratio": ratio,
              "ratios": measured["ratios"], "warmup_collects": args.warmup_collects,
              "jit_cpu_seconds_during_rounds": measured["jit_cpu_seconds_during_rounds"],
              "machine": f"{platform.machine()} {platform.node()}",
              "cpus": len(os.sched_getaffinity(0)), "load": os.getloadavg()[0],
              "date": time.strftime("%Y-%m-%d %H:%M")}
    split = ", ".join(f"{k} {v:.0%}" for k, v in e2e["split"].items())
    print(f"end to end {e2e['env_steps_per_second']:.0f} env-steps/s ({split}); network bound "
          f"{bound['env_steps_per_second']:.0f} env-steps/s (rollout {bound['rollout_seconds']:.2f}"
          f" s + update {bound['update_seconds']:.2f} s per update); ratio {ratio:.2f} (median of "
          f"{', '.join(f'{r:.2f}' for r in measured['ratios'])}); "
          f"{result['config']['parameters']:,} parameters; JVM JIT compilers: "
          f"{_seconds(measured['jit_cpu_seconds_during_rounds'])} CPU during the rounds")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(result, indent=1))


if __name__ == "__main__":
    run_tool(main)
