"""microRTS end-to-end training throughput against the network's own compute bound.

    .venv/bin/python tools/bench_microrts_training.py --updates 4
    .venv/bin/python tools/bench_microrts_training.py --set network.channels=[32,64] --json-out X

Part 1 trains the default ``selfplay train --game microrts`` configuration (16x16, 24 envs,
default network; the league's rating games are switched off, they are not training) for
``--updates`` updates after one warm-up update, and reports env-steps/s with the split of the
wall time between env stepping, acting (inference, masking, sampling, buffers) and learning.

Part 2 is the micro-benchmark that bounds it: the same network, with the same batch sizes and
the rollout's real observations, timed without game, masks or buffers. Per update it runs
``num_steps`` forward passes of actor and critic over the rows the learner acted for (the
rollout),
then ``update_epochs x num_minibatches`` forward + backward passes and optimizer steps over
minibatches of the learner's rows. ``bound = env steps per update / that time``. The ratio
end-to-end / bound is what env, masking, sampling, buffers and logging leave of the network's
speed (the target is >= 0.85).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from selfplay.config import build_config
from selfplay.networks import count_parameters
from selfplay.ppo import Trainer
from selfplay.train import build_trainer


def end_to_end(trainer: Trainer, updates: int) -> dict[str, Any]:
    """Env-steps/s of ``updates`` collect + learn cycles (after one warm-up update)."""
    trainer.collect()
    trainer.learn()
    trainer.timer.pop()
    split = {"env": 0.0, "inference": 0.0, "learn": 0.0}
    per_update = []
    start = time.perf_counter()
    for _ in range(updates):
        begin = time.perf_counter()
        trainer.collect()
        tick = time.perf_counter()
        trainer.learn()
        trainer.timer.add("learn", tick)
        per_update.append(time.perf_counter() - begin)
        for name, seconds in trainer.timer.pop().items():
            split[name] += seconds
    elapsed = time.perf_counter() - start
    steps = trainer.steps_per_update * updates
    return {"env_steps_per_second": steps / elapsed,
            "median_update_seconds": statistics.median(per_update),
            "split": {k: v / elapsed for k, v in split.items()}}


def compute_bound(trainer: Trainer, repeats: int) -> dict[str, Any]:
    """The network's time per update with the rollout's batch sizes (no env, no masks)."""
    agent, cfg, buf = trainer.agent, trainer.config.ppo, trainer.buffer
    t_steps, e, a = buf.shape
    rows = e * a
    obs = buf.flat(buf.obs)
    critic = buf.flat(buf.critic_in) if buf.critic_in is not None else obs
    trained = torch.nonzero(buf.trained.reshape(-1)).squeeze(1)
    learner_rows = len(trained)
    minibatch = max(1, learner_rows // cfg.num_minibatches)
    optimizer = trainer.optimizer
    snapshot = {k: v.clone() for k, v in agent.state_dict().items()}
    opt_state = optimizer.state_dict()

    acting = [torch.nonzero(buf.trained[t].reshape(-1)).squeeze(1) + t * rows
              for t in range(t_steps)]  # the rows the learner acted for at each step

    def rollout() -> None:
        with torch.inference_mode():
            for sel in acting:
                features = agent.actor_torso(obs[sel])
                agent.actor_head(features)
                agent.value_normalized(critic[sel], features if agent.shared else None)

    def update() -> None:
        gen = torch.Generator().manual_seed(0)
        for _ in range(cfg.update_epochs):
            perm = trained[torch.randperm(learner_rows, generator=gen)]
            for start in range(0, learner_rows - minibatch + 1, minibatch):
                mb = perm[start:start + minibatch]
                features = agent.actor_torso(obs[mb])
                logits = agent.actor_head(features)
                value = agent.value_normalized(critic[mb], features if agent.shared else None)
                loss = logits.float().mean() + value.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.clip_grad_norm(cfg.max_grad_norm)
                optimizer.step()

    times = {"rollout": [], "update": []}
    for _ in range(repeats):
        for name, fn in (("rollout", rollout), ("update", update)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    agent.load_state_dict(snapshot)
    optimizer.load_state_dict(opt_state)
    seconds = {k: min(v) for k, v in times.items()}
    total = sum(seconds.values())
    return {"rollout_seconds": seconds["rollout"], "update_seconds": seconds["update"],
            "env_steps_per_second": trainer.steps_per_update / total,
            "rows_per_forward": rows, "learner_rows": learner_rows, "minibatch": minibatch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=4, help="timed updates end to end")
    parser.add_argument("--repeats", type=int, default=2, help="micro-benchmark repeats (min)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    config = build_config("microrts", overrides=["log.progress=false", "league.enabled=false",
                                                 *args.set])
    trainer = build_trainer(config, None)
    try:
        e2e = end_to_end(trainer, args.updates)
        bound = compute_bound(trainer, args.repeats)
    finally:
        trainer.game.close()
    ratio = e2e["env_steps_per_second"] / bound["env_steps_per_second"]
    result = {"config": {"map": config.game.options.get("map"), "num_envs": config.game.num_envs,
                         "network": {"kind": config.network.kind,
                                     "channels": config.network.channels,
                                     "hidden": config.network.hidden},
                         "parameters": count_parameters(trainer.agent),
                         "num_steps": config.ppo.num_steps,
                         "update_epochs": config.ppo.update_epochs,
                         "num_minibatches": config.ppo.num_minibatches,
                         "torch_threads": config.torch_threads, "overrides": args.set},
              "end_to_end": e2e, "compute_bound": bound, "ratio": ratio,
              "machine": f"{platform.machine()} {platform.node()}",
              "cpus": len(os.sched_getaffinity(0)), "load": os.getloadavg()[0],
              "date": time.strftime("%Y-%m-%d %H:%M")}
    split = ", ".join(f"{k} {v:.0%}" for k, v in e2e["split"].items())
    print(f"end to end {e2e['env_steps_per_second']:.0f} env-steps/s ({split}); network bound "
          f"{bound['env_steps_per_second']:.0f} env-steps/s (rollout {bound['rollout_seconds']:.2f}"
          f" s + update {bound['update_seconds']:.2f} s per update); ratio {ratio:.2f}; "
          f"{result['config']['parameters']:,} parameters")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
