"""Behaviour cloning: the update against the network's compute bound, and decoding (the teacher
game's steps: replays, or live teachers) against the update.

    .venv/bin/python -m tools.bench_cloning --replays runs/bc16/replays --rounds 5 \
        --set game.options.map=basesWorkers16x16A
    .venv/bin/python -m tools.bench_cloning --game lux --replays runs/lux-replays --rounds 3
    .venv/bin/python -m tools.bench_cloning --game lux --teachers heuristic --rounds 3

A :class:`~selfplay.cloning.Cloner` with the run's settings (``hyperparams/<family>.yaml``,
``bc`` section; ``--set`` overrides) plays its teacher game. Per round it collects one update's
steps (decoding: the teacher game stepping, labels and buffers) and learns from them (the
cloning update: masked cross-entropy and value loss, gradient steps); then the bound runs the
same network over the same rows with the same minibatches, forward + backward + optimizer
step of the logits the policy computes under the rows' masks and the values (no labels or
loss terms). Reported (medians over
rounds): update / bound (the target is >= 0.85), decoding speed / update speed in samples
(seat-steps) per second (the target is >= 5), and env-steps per second of collect + learn.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any, cast

import torch

from games.core import MultiDiscrete
from selfplay.bc import build_cloner
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.cloning import Cloner
from selfplay.config_files import build_config
from selfplay.distributions import GridMaskIndex, MaskedMultiCategorical


def bound_update(cloner: Cloner) -> float:
    """Seconds of the update's gradient steps on the collected rows without the cloning
    loss's labels: the network's forward pass as the policy runs it (the rows' masks: a U-Net
    decoder computes the logits of the cells with a legal value only), a loss on those logits
    and the values, backward, Adam; the network and optimizer are restored afterwards."""
    agent, optimizer, cfg = cloner.agent, cloner.optimizer, cloner.bc
    snapshot = {k: v.clone() for k, v in agent.state_dict().items()}
    opt_state = optimizer.state_dict()
    obs = cloner.obs.reshape(-1, *cloner.obs.shape[3:])
    masks = cloner.mask.reshape(-1, *cloner.mask.shape[3:])
    rows = torch.nonzero(cloner.alive.reshape(-1)).squeeze(1)
    size = len(rows)
    bounds = [size * k // cfg.minibatches for k in range(cfg.minibatches + 1)]  # as the update
    gen = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    b_obs = agent.normalize_obs(obs[rows])
    space = cloner.spec.action_space
    if not (isinstance(space, MultiDiscrete) and space.cells is not None):
        raise SystemExit(f"cloning bench: {cloner.spec.name} has no grid actions")
    grid = GridMaskIndex(masks[rows], space.cells)  # the masks' legal cells, as the update
    for _ in range(cfg.epochs):
        perm = torch.randperm(size, generator=gen)
        for first, end in zip(bounds[:-1], bounds[1:], strict=True):
            if end == first:
                continue
            pick = perm[first:end]
            mb = b_obs[pick]
            dist, value = agent.forward_all(mb, grid.select(pick), mb)
            logits = cast(MaskedMultiCategorical, dist).logits
            loss = torch.cat(logits, -1).mean() + value.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.clip_grad_norm(cfg.max_grad_norm)
            optimizer.step()
    seconds = time.perf_counter() - start
    agent.load_state_dict(snapshot)
    optimizer.load_state_dict(opt_state)
    return seconds


def measure(cloner: Cloner, rounds: int) -> dict[str, Any]:
    samples = int(cloner.alive.numel())
    collect_s, learn_s, bound_s = [], [], []
    for _ in range(2):  # warm-up: the JIT compiler, allocator
        cloner.collect()
        cloner.learn()
    for _ in range(rounds):
        start = time.perf_counter()
        cloner.collect()
        tick = time.perf_counter()
        cloner.learn()
        done = time.perf_counter()
        collect_s.append(tick - start)
        learn_s.append(done - tick)
        bound_s.append(bound_update(cloner))
    collect, learn, bound = (statistics.median(x) for x in (collect_s, learn_s, bound_s))
    return {"samples_per_update": samples, "rounds": rounds,
            "collect_s": collect_s, "learn_s": learn_s, "bound_s": bound_s,
            "decode_samples_per_s": samples / collect, "update_samples_per_s": samples / learn,
            "bound_samples_per_s": samples / bound,
            "update_vs_bound": bound / learn, "decode_vs_update": learn / collect,
            "env_steps_per_s": cloner.steps_per_update / (collect + learn)}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", default="microrts")
    teachers = parser.add_mutually_exclusive_group(required=True)
    teachers.add_argument("--replays", help="a replay folder")
    teachers.add_argument("--teachers", help="live teachers: the game's scripted players, A,B")
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    who = (f"bc.replays={args.replays}" if args.replays is not None
           else f"bc.teachers=[{args.teachers}]")
    config = build_config(args.game, overrides=[
        "log.progress=false", "log.tensorboard=false", who, "bc.validate_every=0", *args.set])
    cloner = build_cloner(config, None)
    try:
        result = measure(cloner, args.rounds)
    finally:
        cloner.close()
    result.update({"machine": platform.machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
                   "torch_threads": config.torch_threads, "bc": vars(config.bc)})
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    run_tool(main)
