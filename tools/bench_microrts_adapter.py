"""Throughput of the microRTS adapter against bare loops over the engine's Java clients.

Every mode steps every env once per iteration with random legal actions drawn by the same numpy
routine (:func:`games.microrts.adapter.random_legal_actions`: only cells with a unit that may
act, uniform per component), and the timed region covers the whole loop, sampling included
(the issue's definition of "the full adapter"). The sampler's own share is timed too, so the
ratios are also printed without it (``step only``), the stricter measure.

- ``adapter``: :class:`games.microrts.adapter.MicroRTSVecGame` ``step`` (obs/mask conversion,
  rewards, truncation, episode statistics included), sampling from ``Batch.action_mask``;
- ``adapter+rot``: the same with ``rotate_player1`` (self-play case only);
- ``shm-bare``: the same shared-memory Java clients driven directly: sample from the engine's
  int32 mask buffer into its action buffer, ``gameStep``, read rewards (game over = a win/loss
  reward), reset games that ended or reached ``max_steps``, ``getMasks``. No conversion: the
  adapter's floor;
- ``vec+numpy``: ``tests.JNIGridnetVecClient`` (Java arrays in and out, MicroRTS-Py's path) with
  the numpy conversions a gym wrapper needs (one-hot planes, bool masks, per-unit action arrays).

Cases: 16x16 with 24 envs against WorkerRush; 8x8 self-play with 24 seats (12 games).
Modes run interleaved (one measurement of each per repeat) and the median is reported.
Run: ``python tools/bench_microrts_adapter.py [--steps N] [--warmup W] [--repeats R] [--json]``.
The first seconds of a JVM are 2-3x slower (JIT), hence the warm-up steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from games.microrts import make  # noqa: E402
from games.microrts.adapter import (  # noqa: E402
    _CANON_FROM_JAVA,
    _JAVA_RFS,
    _JAVA_WINLOSS,
    MicroRTSVecGame,
    random_legal_actions,
)
from games.microrts.maps import resolve_map  # noqa: E402

MAX_STEPS = 2000

# one loop iteration: returns the seconds it spent sampling actions
Step = Callable[[], float]


def measure(step: Step, steps: int, warmup: int) -> tuple[float, float]:
    """(total seconds, sampling seconds) of ``steps`` iterations after ``warmup`` ones."""
    for _ in range(warmup):
        step()
    sampling = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        sampling += step()
    return time.perf_counter() - t0, sampling


def adapter_loop(game: MicroRTSVecGame, rng: np.random.Generator) -> Step:
    batch = game.reset()
    actions = np.zeros((game.num_envs, game.num_seats, game.height * game.width, 7), np.int64)

    def one() -> float:
        nonlocal batch
        t0 = time.perf_counter()
        assert batch.action_mask is not None
        random_legal_actions(batch.action_mask, rng, out=actions)
        t1 = time.perf_counter()
        batch = game.step(actions)
        return t1 - t0

    return one


def shm_bare_loop(game: MicroRTSVecGame, rng: np.random.Generator) -> Step:
    """The adapter's own Java clients, stepped without any of its Python work."""
    game.reset()
    for g in game.groups:
        g.client.getMasks(g.learner)
    steps = [np.zeros(g.rows, np.int64) for g in game.groups]

    def one() -> float:
        t0 = time.perf_counter()
        for g in game.groups:
            random_legal_actions(g.mask, rng, out=g.act)
        t1 = time.perf_counter()
        for g, count in zip(game.groups, steps, strict=True):
            rewards = np.asarray(g.client.gameStep(g.players_j).reward)
            count += 1
            # game over <=> win/loss reward is +-1 (as the adapter reads it)
            over = (rewards[:, _JAVA_WINLOSS] != 0) | (count >= MAX_STEPS)
            if over.any():
                num_sp = len(g.sp_envs)
                for row in np.flatnonzero(over):
                    if row < 2 * num_sp:
                        if row % 2 == 0:  # a self-play game has two rows
                            g.client.selfPlayClients[row // 2].reset()
                    else:
                        g.client.clients[row - 2 * num_sp].reset(g.learner)
                count[over] = 0
            g.client.getMasks(g.learner)
        return t1 - t0

    return one


def vec_numpy_loop(map_name: str, num_selfplay: int, num_bot: int, bot: str,
                   rng: np.random.Generator) -> tuple[Step, Callable[[], None]]:
    """``tests.JNIGridnetVecClient``: Java arrays through JPype plus numpy conversions."""
    import jpype

    from games.microrts.bots import make_bot, resolve_bot

    info = resolve_map(map_name)
    height, width = info.shape
    cells = height * width
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    rf = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
    rfs = jpype.JArray(rf)([jpype.JClass(f"ai.rewardfunction.{n}RewardFunction")()
                            for n in _JAVA_RFS])
    num = num_selfplay + num_bot
    ais = jpype.JArray(jpype.JClass("ai.core.AI"))([make_bot(resolve_bot(bot), utt)
                                                    for _ in range(num_bot)])
    maps = jpype.JArray(jpype.JString)([str(info.path)] * num)
    client = jpype.JClass("tests.JNIGridnetVecClient")(num_selfplay, num_bot, MAX_STEPS, rfs, "",
                                                       maps, ais, utt, False)
    players = jpype.JArray(jpype.JInt)([0] * num)
    client.reset(players)
    int3 = jpype.JArray(jpype.JArray(jpype.JArray(jpype.JInt)))
    sizes = np.array([5, 5, 3, 8, 6])
    plane_offset = np.cumsum((0, *sizes[:-1]))
    actions = np.zeros((num, cells, 7), np.int64)

    def one() -> float:
        masks = np.asarray(client.getMasks(0))  # [N, H, W, 79]: source unit + components
        source = masks[..., 0].reshape(num, cells, 1) != 0
        comp = (masks[..., 1:].reshape(num, cells, -1) != 0) & source  # [N, HW, 78] bool
        t0 = time.perf_counter()
        random_legal_actions(comp, rng, out=actions)
        t1 = time.perf_counter()
        env, cell = np.nonzero(actions[..., 0])
        rows = np.concatenate([cell[:, None], actions[env, cell]], 1).astype(np.int32)  # [K, 8]
        per_env = np.split(rows, np.cumsum(np.bincount(env, minlength=num))[:-1])
        java_actions = int3([jpype.JArray.of(r) if len(r) else jpype.JArray(jpype.JInt, 2)(0)
                             for r in per_env])
        response = client.gameStep(java_actions, players)
        raw = np.asarray(response.observation).reshape(num, 5, -1)  # [N, 5, HW]
        obs = np.zeros((num, cells, int(sizes.sum())), np.uint8)
        clipped = np.minimum(np.maximum(raw, 0), sizes[None, :, None] - 1) + plane_offset[
            None, :, None]
        np.put_along_axis(obs, clipped.transpose(0, 2, 1), 1, axis=2)
        np.asarray(response.reward)[:, _CANON_FROM_JAVA]
        np.asarray(response.done)
        return t1 - t0

    return one, client.close


def run(steps: int, warmup: int, repeats: int,
        cases: list[str] | None = None) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    all_cases: list[tuple[str, str, int, int]] = [  # title, map, self-play games, bot envs
        ("16x16, 24 envs vs WorkerRush", "basesWorkers16x16", 0, 24),
        ("8x8 self-play, 12 games", "basesWorkers8x8", 12, 0),
    ]
    results = []
    for index, (title, map_name, num_games, num_bot) in enumerate(all_cases):
        if cases and str(index) not in cases:
            continue
        num_envs = num_games + num_bot
        seats = 2 if num_games else 1
        opts: dict[str, Any] = dict(map=map_name, bots=["WorkerRush"],
                                    num_selfplay_envs=num_games, max_steps=MAX_STEPS)
        game = make("microrts", num_envs=num_envs, **opts)
        loops: dict[str, Step] = {"adapter": adapter_loop(game, rng)}
        closers: list[Callable[[], None]] = [game.close]
        if num_games:
            rot_game = make("microrts", num_envs=num_envs, rotate_player1=True, **opts)
            loops["adapter+rot"] = adapter_loop(rot_game, rng)
            closers.append(rot_game.close)
        bare_game = make("microrts", num_envs=num_envs, **opts)  # same clients, own instance
        loops["shm-bare"] = shm_bare_loop(bare_game, rng)
        closers.append(bare_game.close)
        vec_step, vec_close = vec_numpy_loop(map_name, 2 * num_games, num_bot, "WorkerRush", rng)
        loops["vec+numpy"] = vec_step
        closers.append(vec_close)
        totals: dict[str, list[float]] = {m: [] for m in loops}
        sampling: dict[str, list[float]] = {m: [] for m in loops}
        for r in range(repeats):
            for mode, step in loops.items():
                total, sample = measure(step, steps, warmup if r == 0 else warmup // 4)
                totals[mode].append(total)
                sampling[mode].append(sample)
        for close in closers:
            close()
        for mode in loops:
            sec = statistics.median(totals[mode])
            sec_step = statistics.median(t - s for t, s in zip(totals[mode], sampling[mode],
                                                               strict=True))
            results.append({
                "case": title, "mode": mode, "envs": num_envs, "seats": num_envs * seats,
                "steps": steps, "repeats": repeats,
                "ms_per_step": 1e3 * sec / steps,
                "ms_per_step_without_sampling": 1e3 * sec_step / steps,
                "sampling_ms_per_step": 1e3 * statistics.median(sampling[mode]) / steps,
                "env_steps_per_s": num_envs * steps / sec,
                "agent_steps_per_s": num_envs * seats * steps / sec,
            })
    for r in results:  # ratios against the bare loop of the same case
        bare = next(x for x in results if x["case"] == r["case"] and x["mode"] == "shm-bare")
        r["vs_bare"] = bare["ms_per_step"] / r["ms_per_step"]
        r["vs_bare_without_sampling"] = (bare["ms_per_step_without_sampling"]
                                         / r["ms_per_step_without_sampling"])
        vec = next(x for x in results if x["case"] == r["case"] and x["mode"] == "vec+numpy")
        r["vs_vec_numpy"] = vec["ms_per_step"] / r["ms_per_step"]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=1000,
                        help="untimed steps before the first measurement (a quarter later)")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per mode (median)")
    parser.add_argument("--case", action="append", choices=["0", "1"],
                        help="only this case (0: 16x16 vs WorkerRush, 1: 8x8 self-play)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    results = run(args.steps, args.warmup, args.repeats, args.case)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'case':30} {'mode':11} {'ms/step':>8} {'env-steps/s':>12} {'vs bare':>8} "
          f"{'vs vec':>7} {'step only':>10} {'vs bare':>8}")
    for r in results:
        print(f"{r['case']:30} {r['mode']:11} {r['ms_per_step']:8.3f} "
              f"{r['env_steps_per_s']:12,.0f} {r['vs_bare']:8.2f} {r['vs_vec_numpy']:7.2f} "
              f"{r['ms_per_step_without_sampling']:10.3f} {r['vs_bare_without_sampling']:8.2f}")
    print("(ms/step includes sampling random legal actions; 'step only' excludes it; ratios "
          "are throughput relative to shm-bare / vec+numpy, medians of interleaved repeats)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
