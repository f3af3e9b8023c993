"""A game's network: forward + backward + Adam step over a batch, for several settings.

    .venv/bin/python tools/bench_networks.py --game lux --rows 256 \\
        --variant network.grid_head=0 --variant network.grid_head=16

Each ``--variant`` (``KEY=VALUE[,KEY=VALUE...]``, applied after ``--set``) builds the network
of ``hyperparams/<family>.yaml`` for the game's spec and times ``--repeats`` steps of the
update's work on ``--rows`` random observations: the actor and the critic on one encoder pass,
a loss on the logits and values, backward, Adam. Variants alternate repeat by repeat.
Prints the parameters and the median milliseconds per step of each, as one JSON object.

With ``--legal-cells N`` each row's mask has a legal value on ``N`` random cells (a Lux seat's
units and factories: a few dozen of 2,304 cells), the loss is the policy's (log-probabilities
of sampled actions and the entropy) and each variant is timed twice: ``legal cells``, the
network as policies run it (a U-Net decoder computes the logits of those cells only), and
``every cell``, the same loss on the logits of every cell.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time

import torch

from games.core import GameSpec
from games.registry import make_game
from selfplay.allocator import keep_freed_memory
from selfplay.cli_common import UserError, first_paragraph, positive_int, run_tool
from selfplay.config import TrainConfig
from selfplay.config_files import build_config
from selfplay.distributions import make_dist
from selfplay.networks import ActorCritic
from selfplay.rollout import torch_dtype

VARIANT_SPLIT = re.compile(r",(?=[\w.]+=)")
"""a variant's settings are split at the commas before a ``key=`` (lists keep theirs)"""


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


def policy_step_seconds(agent: ActorCritic, obs: torch.Tensor, mask: torch.Tensor,
                        optimizer: torch.optim.Optimizer, every_cell: bool) -> float:
    """Seconds of one step with the policy's loss under ``mask``: log-probabilities of sampled
    actions and the entropy, the value; ``every_cell`` computes the logits of every cell (the
    convolution over the board) instead of the legal cells' only."""
    start = time.perf_counter()
    obs_n = agent.normalize_obs(obs)
    features = agent.actor_torso(obs_n)
    if every_cell:
        dist = make_dist(agent.space, agent.params_from_features(obs_n, features), mask)
        value = agent.value_normalized(obs_n, features if agent.shared else None)
    else:
        dist, value = agent.forward_all(obs_n, mask, obs_n)
    actions = dist.sample()
    (value.mean() - dist.log_prob(actions).mean() - 0.01 * dist.entropy().mean()).backward()
    optimizer.step()
    optimizer.zero_grad()
    return time.perf_counter() - start


def legal_mask(spec: GameSpec, rows: int, cells: int, gen: torch.Generator) -> torch.Tensor:
    """bool ``[rows, board cells, sum(nvec)]``: every value legal on ``cells`` random cells of
    each row, none elsewhere."""
    space = spec.action_space
    board = spec.obs_shape[-2] * spec.obs_shape[-1]
    width = int(sum(space.nvec))  # type: ignore[union-attr]
    mask = torch.zeros(rows, board, width, dtype=torch.bool)
    picks = torch.rand(rows, board, generator=gen).argsort(1)[:, :cells]
    mask[torch.arange(rows)[:, None], picks] = True
    return mask


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", default="lux")
    parser.add_argument("--rows", type=positive_int, default=256)
    parser.add_argument("--repeats", type=positive_int, default=6)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE,...")
    parser.add_argument("--legal-cells", type=int, default=0,
                        help="cells with a legal value per row (0: no mask, every cell's logits)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variants = args.variant or [""]
    configs: list[TrainConfig] = [
        build_config(args.game, overrides=[*args.set, *[o for o in VARIANT_SPLIT.split(v) if o]])
        for v in variants]
    if configs[0].keep_freed_memory:
        keep_freed_memory()  # as training and cloning run on CPU
    # as many envs as the config's (its options may need them: microRTS's self-play pairs)
    game = make_game(args.game, configs[0].game.num_envs, 0,
                     options=dict(configs[0].game.options))
    spec = game.spec
    game.close()
    obs = torch.randint(0, 256, (args.rows, *spec.obs_shape)).to(torch_dtype(spec.obs_dtype))
    agents = [ActorCritic(spec, c.network, c.normalize) for c in configs]
    if any(agent.critic_reads_state for agent in agents):
        raise UserError(f"{args.game}'s critic reads the game's global state, which this "
                        "bench does not feed: time a game whose critic reads the observations "
                        "(microRTS, Lux, Atari), or --set network.critic_input=obs")
    optimizers = [torch.optim.Adam(a.parameters(), lr=1e-4) for a in agents]
    mask = (legal_mask(spec, args.rows, args.legal_cells, torch.Generator().manual_seed(0))
            if args.legal_cells else None)
    paths = [False] if mask is None else [False, True]  # every_cell
    times: dict[tuple[int, bool], list[float]] = {(i, e): [] for i in range(len(agents))
                                                  for e in paths}
    for repeat in range(args.repeats + 1):  # the first is a warm-up
        for i, (agent, optimizer) in enumerate(zip(agents, optimizers, strict=True)):
            for every_cell in paths:
                seconds = (step_seconds(agent, obs, optimizer) if mask is None else
                           policy_step_seconds(agent, obs, mask, optimizer, every_cell))
                if repeat:
                    times[i, every_cell].append(seconds)
    rows = []
    for i, (v, a) in enumerate(zip(variants, agents, strict=True)):
        row = {"variant": v or "(defaults)", "parameters": sum(p.numel() for p in a.parameters())}
        if mask is None:
            row["ms_per_step"] = round(1000 * statistics.median(times[i, False]), 1)
        else:
            row["ms_per_step_legal_cells"] = round(1000 * statistics.median(times[i, False]), 1)
            row["ms_per_step_every_cell"] = round(1000 * statistics.median(times[i, True]), 1)
        rows.append(row)
    result = {"game": args.game, "rows": args.rows, "threads": args.threads,
              "legal_cells": args.legal_cells, "machine": platform.machine(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "variants": rows}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_tool(main)
