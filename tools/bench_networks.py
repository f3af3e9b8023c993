"""A game's network: forward + backward + Adam step over a batch, for several settings.

    .venv/bin/python tools/bench_networks.py --game lux --rows 256 \\
        --variant network.grid_head=0 --variant network.grid_head=16

Each ``--variant`` (``KEY=VALUE[,KEY=VALUE...]``, applied after ``--set``) builds the network
of ``hyperparams/<family>.yaml`` for the game's spec and times ``--repeats`` steps of the
update's work on ``--rows`` random observations: the actor and the critic on one encoder pass,
a loss on the logits and values, backward, Adam. Variants alternate repeat by repeat.
Prints the parameters and the median milliseconds per step of each, as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from games.registry import make_game
from selfplay.config import TrainConfig, build_config
from selfplay.networks import ActorCritic
from selfplay.rollout import torch_dtype


def step_seconds(agent: ActorCritic, obs: torch.Tensor, optimizer: torch.optim.Optimizer
                 ) -> float:
    """Seconds of one step: the update's forward pass (actor and critic on the shared
    features, as the cloning benchmark's bound), a loss on logits and values, backward, Adam."""
    start = time.perf_counter()
    obs_n = agent.normalize_obs(obs)
    features = agent.actor_torso(obs_n)
    logits = agent.params_from_features(obs_n, features)
    value = agent.value_normalized(obs_n, features if agent.shared else None)
    (logits.float().mean() + value.mean()).backward()
    optimizer.step()
    optimizer.zero_grad()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="lux")
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE,...")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variants = args.variant or [""]
    configs: list[TrainConfig] = [
        build_config(args.game, overrides=[*args.set, *[o for o in v.split(",") if o]])
        for v in variants]
    game = make_game(args.game, 1, 0, options=dict(configs[0].game.options))
    spec = game.spec
    game.close()
    obs = torch.randint(0, 256, (args.rows, *spec.obs_shape)).to(torch_dtype(spec.obs_dtype))
    agents = [ActorCritic(spec, c.network, c.normalize) for c in configs]
    optimizers = [torch.optim.Adam(a.parameters(), lr=1e-4) for a in agents]
    times: list[list[float]] = [[] for _ in agents]
    for repeat in range(args.repeats + 1):  # the first is a warm-up
        for i, (agent, optimizer) in enumerate(zip(agents, optimizers, strict=True)):
            seconds = step_seconds(agent, obs, optimizer)
            if repeat:
                times[i].append(seconds)
    result = {"game": args.game, "rows": args.rows, "threads": args.threads,
              "machine": platform.machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
              "variants": [{"variant": v or "(defaults)",
                            "parameters": sum(p.numel() for p in a.parameters()),
                            "ms_per_step": round(1000 * statistics.median(t), 1)}
                           for v, a, t in zip(variants, agents, times, strict=True)]}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
