"""Lux adapter throughput against the raw Jux step, in one process, interleaved.

    .venv/bin/python tools/bench_lux.py --envs 64 256 --json-out runs/bench/lux_speed.json

For each batch size: games are played 30 steps with random legal actions, then, on that batch
of states, one jitted call of each is timed (``--repeats`` rounds, each ``--calls`` calls,
interleaved; the median round is reported):

- ``raw``: Jux's own main-phase step (``State._step_late_game``, vmapped) on already converted
  actions: the peer;
- ``conversion``: what the adapter adds around it: grid actions to Jux's queues, the reward
  components, both seats' observations and legal-action masks;
- ``kernel``: the adapter's whole jitted step (conversion and engine step in one call);
- ``adapter``: ``LuxVecGame.step`` end to end, host copies of the arrays included (actions
  drawn beforehand; episode ends and the buffer of games started ahead as they come);
- ``adapter_dlpack``: the same step with device arrays (``array_handover``): the actions go in
  as torch tensors and the observations and masks come out as torch tensors, by DLPack, with
  no host copy (``dlpack vs host``: its speed over ``adapter``'s).

Env-steps/s are games x steps / second. ``conversion vs raw`` is the conversion's throughput as
a share of the raw step's (the issue's >= 0.7), ``adapter vs raw`` the whole step's.
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

import numpy as np
import torch

from games.files import atomic_write_text
from selfplay.cli_common import first_paragraph, positive_int, run_tool


def _timed(fn: Any, calls: int) -> float:
    import jax

    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / calls


def legal_sampler(nvec: Any) -> Any:
    """A jitted draw of uniformly random legal actions ``[E, 2, cells, components]`` from masks
    ``[E, 2, cells, sum(nvec)]`` on JAX's device (the host's ``random_actions`` takes seconds
    a step at thousands of games): per component the argmax of uniform noise over its legal
    values, value 0 where none is legal."""
    import jax
    import jax.numpy as jnp

    bounds = [int(b) for b in np.cumsum(nvec)[:-1]]

    @jax.jit
    def draw(key: Any, mask: Any) -> Any:
        noise = jnp.where(mask, jax.random.uniform(key, mask.shape), -1.0)
        return jnp.stack([p.argmax(-1) for p in jnp.split(noise, bounds, axis=-1)],
                         -1).astype(jnp.int32)

    return draw


def bench(envs: int, repeats: int, calls: int) -> dict[str, Any]:
    import jax

    from games.lux.adapter import LuxOptions, LuxVecGame
    from games.lux.layout import NVEC
    from games.lux.observe import next_near_planes, view
    from games.lux.orders import step_components, to_jux

    game = LuxVecGame(LuxOptions(), envs, seed=1)
    draw = legal_sampler(NVEC)
    key = jax.random.PRNGKey(0)
    game.device_arrays = True  # the warm-up's actions are drawn where the masks are
    batch = game.reset()
    for _ in range(30):
        key, sub = jax.random.split(key)
        batch = game.step(draw(sub, batch.action_mask))
    game.device_arrays = False
    mask = batch.action_mask

    def random_plan() -> np.ndarray:
        nonlocal key
        key, sub = jax.random.split(key)
        return np.array(draw(sub, mask))

    k = game._k
    states, near, goals = game._states, game._near, game._goals
    cells = game.size * game.size
    grid = jax.numpy.asarray(random_plan().reshape(envs, 2, cells, -1))
    max_units = k.rules.max_units
    max_steps = jax.numpy.int32(1000)
    raw = jax.jit(jax.vmap(lambda s, a: s._step_late_game(a)))
    actions = jax.jit(jax.vmap(to_jux))(states, grid, goals)
    after = raw(states, actions)

    def conversion_fn(states: Any, near: Any, goals: Any, grid: Any, after: Any) -> Any:
        # as the adapter's step: the near_* planes of ice and ore kept, the others renewed,
        # the goal steps of the masks before given to the orders
        acts = jax.vmap(to_jux)(states, grid, goals)
        comps = jax.vmap(step_components)(states, acts, after)
        near = next_near_planes(near, after)
        return acts, comps, jax.vmap(lambda s, n: view(s, max_units, max_steps, n))(after, near)

    conversion = jax.jit(conversion_fn)
    plan = [random_plan() for _ in range(calls)]

    def adapter_round() -> float:
        start = time.perf_counter()
        for a in plan:
            game.step(a)
        return (time.perf_counter() - start) / calls

    # the same games with device arrays: actions in and observations and masks out by DLPack
    on_device = LuxVecGame(LuxOptions(), envs, seed=1)
    on_device.set_state(game.get_state())
    on_device.device_arrays = True
    on = torch.device("cuda" if jax.default_backend() == "gpu" else "cpu")
    plan_t = [torch.from_numpy(a).to(on, torch.int32) for a in plan]

    def dlpack_round() -> float:
        start = time.perf_counter()
        for a in plan_t:
            out = on_device.step(a)
            torch.from_dlpack(out.obs), torch.from_dlpack(out.action_mask)
        return (time.perf_counter() - start) / calls

    cases = {
        "raw": lambda: _timed(lambda: raw(states, actions), calls),
        "conversion": lambda: _timed(lambda: conversion(states, near, goals, grid, after),
                                     calls),
        "kernel": lambda: _timed(lambda: k.step(states, near, goals, grid, max_steps), calls),
        "adapter": adapter_round,
        "adapter_dlpack": dlpack_round,
    }
    for fn in cases.values():  # compile and warm up
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            seconds[name].append(fn())
    median = {name: statistics.median(v) for name, v in seconds.items()}
    rate = {name: round(envs / s) for name, s in median.items()}
    return {"envs": envs, "env_steps_per_second": rate,
            "ms_per_call": {n: round(s * 1000, 2) for n, s in median.items()},
            "conversion_vs_raw": round(median["raw"] / median["conversion"], 3),
            "adapter_vs_raw": round(median["raw"] / median["adapter"], 3),
            "dlpack_vs_host": round(median["adapter"] / median["adapter_dlpack"], 3),
            "kernel_vs_raw": round(median["raw"] / median["kernel"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--envs", type=positive_int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--calls", type=positive_int, default=10)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    import jax

    rows = []
    for envs in args.envs:
        row = bench(envs, args.repeats, args.calls)
        rows.append(row)
        r = row["env_steps_per_second"]
        print(f"{envs} games: raw Jux {r['raw']:,} env-steps/s; conversion {r['conversion']:,} "
              f"({row['conversion_vs_raw']:.2f}x raw); adapter kernel {r['kernel']:,} "
              f"({row['kernel_vs_raw']:.2f}x); LuxVecGame.step {r['adapter']:,} "
              f"({row['adapter_vs_raw']:.2f}x); with device arrays by DLPack "
              f"{r['adapter_dlpack']:,} ({row['dlpack_vs_host']:.2f}x the host copies)",
              flush=True)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps({
            "date": time.strftime("%Y-%m-%d"), "machine": platform.node(),
            "cpus": len(os.sched_getaffinity(0)), "jax": jax.__version__,
            "backend": jax.default_backend(), "rows": rows}, indent=1))


if __name__ == "__main__":
    run_tool(main)
