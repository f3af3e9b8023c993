"""Throughput of the microRTS adapter against bare loops over the engine's Java clients.

Modes, each stepping every env once per iteration with random legal actions (numpy, sampled
outside the timed region; its cost is printed separately):

- ``adapter``: :class:`games.microrts.adapter.MicroRTSVecGame` ``step`` (obs/mask conversion,
  rewards, episode bookkeeping included);
- ``adapter+rot``: the same with ``rotate_player1`` (self-play case only);
- ``shm-bare``: the same shared-memory Java clients driven directly (``gameStep``, reading
  rewards, resetting finished games, ``getMasks``), no conversion: the floor for the adapter
  (it never truncates at max_steps, so it resets a little less often);
- ``vec+numpy``: ``tests.JNIGridnetVecClient`` (Java arrays in and out) with the numpy conversions
  a gym wrapper needs (one-hot planes, bool masks, per-unit action arrays).

Cases: 16x16 with 24 envs against WorkerRush; 8x8 self-play with 24 seats (12 games).
Run: ``python tools/bench_microrts_adapter.py [--steps N] [--repeats R] [--json]``.
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
    ACTION_NVEC,
    MicroRTSVecGame,
)
from games.microrts.maps import resolve_map  # noqa: E402

_OFFSETS = np.cumsum((0, *ACTION_NVEC))


def sample_cells(mask: np.ndarray, rng: np.random.Generator) -> tuple[tuple[np.ndarray, ...],
                                                                       np.ndarray]:
    """Random legal actions for the cells of ``mask`` ``[..., 78]`` that have a unit.

    Returns the cells' indices and their actions ``int32 [K, 7]`` (uniform per component among
    its legal values)."""
    cells = np.nonzero(mask.any(-1))
    rows = mask[cells] != 0  # [K, 78]
    noise = rng.random(rows.shape)
    noise[~rows] = -1.0
    picks = np.stack([noise[:, a:b].argmax(-1) for a, b in zip(_OFFSETS[:-1], _OFFSETS[1:],
                                                                  strict=True)], -1)
    return cells, picks.astype(np.int32)


def timed(step: Callable[[], float], steps: int, warmup: int) -> float:
    """Seconds spent in ``step`` (which returns its own timed part) over ``steps`` calls."""
    for _ in range(warmup):
        step()
    return sum(step() for _ in range(steps))


def bench_adapter(game: MicroRTSVecGame, rng: np.random.Generator, steps: int,
                  warmup: int) -> tuple[float, float]:
    batch = game.reset()
    sampler = [0.0]
    actions = np.zeros((game.num_envs, game.num_seats, game.height * game.width, 7), np.int64)

    def one() -> float:
        nonlocal batch
        t0 = time.perf_counter()
        actions[:] = 0
        assert batch.action_mask is not None
        cells, picks = sample_cells(batch.action_mask, rng)
        actions[cells] = picks
        t1 = time.perf_counter()
        batch = game.step(actions)
        sampler[0] += t1 - t0
        return time.perf_counter() - t1

    total = timed(one, steps, warmup)
    return total, sampler[0] / (steps + warmup)


def bench_shm_bare(game: MicroRTSVecGame, rng: np.random.Generator, steps: int,
                   warmup: int) -> float:
    """The adapter's own Java clients, stepped without any of its Python work."""
    game.reset()
    for g in game.groups:
        g.client.getMasks(g.learner)

    def one() -> float:
        for g in game.groups:
            g.act[:] = 0
            cells, picks = sample_cells(g.mask, rng)
            g.act[cells] = picks
        t0 = time.perf_counter()
        for g in game.groups:
            response = g.client.gameStep(g.players_j)
            np.asarray(response.reward)
            over = np.asarray(response.done)[:, 1]  # game over (win/loss component)
            for row in np.flatnonzero(over[::2][: len(g.sp_envs)]) * 2:  # self-play games
                g.client.selfPlayClients[row // 2].reset()
            for j in np.flatnonzero(over[2 * len(g.sp_envs):]):  # bot envs
                g.client.clients[j].reset(g.learner)
            g.client.getMasks(g.learner)
        return time.perf_counter() - t0

    return timed(one, steps, warmup)


def bench_vec_numpy(map_name: str, num_selfplay: int, num_bot: int, bot: str, max_steps: int,
                    rng: np.random.Generator, steps: int, warmup: int) -> float:
    """``tests.JNIGridnetVecClient``: Java arrays through JPype plus numpy conversions."""
    import jpype

    from games.microrts.bots import make_bot, resolve_bot

    info = resolve_map(map_name)
    height, width = info.shape
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    rf = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
    rfs = jpype.JArray(rf)([jpype.JClass(f"ai.rewardfunction.{n}RewardFunction")()
                            for n in _JAVA_RFS])
    num = num_selfplay + num_bot
    ais = jpype.JArray(jpype.JClass("ai.core.AI"))([make_bot(resolve_bot(bot), utt)
                                                    for _ in range(num_bot)])
    maps = jpype.JArray(jpype.JString)([str(info.path)] * num)
    client = jpype.JClass("tests.JNIGridnetVecClient")(num_selfplay, num_bot, max_steps, rfs, "",
                                                       maps, ais, utt, False)
    players = jpype.JArray(jpype.JInt)([0] * num)
    client.reset(players)
    int3 = jpype.JArray(jpype.JArray(jpype.JArray(jpype.JInt)))
    sizes = np.array([5, 5, 3, 8, 6])
    plane_offset = np.cumsum((0, *sizes[:-1]))

    def one() -> float:
        t0 = time.perf_counter()
        masks = np.asarray(client.getMasks(0))  # [N, H, W, 79]: source unit + components
        source = masks[..., 0].reshape(num, -1) != 0
        comp = masks[..., 1:].reshape(num, height * width, -1) != 0  # [N, HW, 78] bool
        t1 = time.perf_counter()
        cells, picks = sample_cells(np.where(source[..., None], comp, False), rng)
        t2 = time.perf_counter()
        rows = np.concatenate([cells[1][:, None].astype(np.int32), picks], 1)  # [K, 8]
        counts = np.bincount(cells[0], minlength=num)
        per_env = np.split(rows, np.cumsum(counts)[:-1])
        actions = int3([jpype.JArray.of(r) if len(r) else jpype.JArray(jpype.JInt, 2)(0)
                        for r in per_env])
        response = client.gameStep(actions, players)
        raw = np.asarray(response.observation).reshape(num, 5, -1)  # [N, 5, HW]
        obs = np.zeros((num, height * width, int(sizes.sum())), np.uint8)
        clipped = np.minimum(np.maximum(raw, 0), sizes[None, :, None] - 1) + plane_offset[
            None, :, None]
        np.put_along_axis(obs, clipped.transpose(0, 2, 1), 1, axis=2)
        reward = np.asarray(response.reward)[:, _CANON_FROM_JAVA]
        np.asarray(response.done)
        del comp, obs, reward
        return (t1 - t0) + (time.perf_counter() - t2)

    total = timed(one, steps, warmup)
    client.close()
    return total


def run(steps: int, warmup: int, repeats: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    cases: list[tuple[str, str, int, int]] = [  # title, map, self-play games, bot envs
        ("16x16, 24 envs vs WorkerRush", "basesWorkers16x16", 0, 24),
        ("8x8 self-play, 12 games", "basesWorkers8x8", 12, 0),
    ]
    results = []
    for title, map_name, num_games, num_bot in cases:
        num_envs = num_games + num_bot
        selfplay = num_games > 0
        opts: dict[str, Any] = dict(map=map_name, bots=["WorkerRush"],
                                    num_selfplay_envs=num_games)
        seats = 2 if selfplay else 1
        game = make("microrts", num_envs=num_envs, **opts)
        rot_game = make("microrts", num_envs=num_envs, rotate_player1=True, **opts) \
            if selfplay else None
        samples: dict[str, list[float]] = {}
        sampler_ms: list[float] = []
        for _ in range(repeats):
            t, s = bench_adapter(game, rng, steps, warmup)
            samples.setdefault("adapter", []).append(t)
            sampler_ms.append(s * 1e3)
            if rot_game is not None:
                t, _ = bench_adapter(rot_game, rng, steps, warmup)
                samples.setdefault("adapter+rot", []).append(t)
            samples.setdefault("shm-bare", []).append(bench_shm_bare(game, rng, steps, warmup))
            samples.setdefault("vec+numpy", []).append(bench_vec_numpy(
                map_name, 2 * num_games, num_bot, "WorkerRush", 2000, rng, steps, warmup))
        game.close()
        if rot_game is not None:
            rot_game.close()
        for mode, seconds in samples.items():
            sec = statistics.median(seconds)
            results.append({
                "case": title, "mode": mode, "envs": num_envs, "seats": num_envs * seats,
                "steps": steps, "ms_per_step": 1e3 * sec / steps,
                "env_steps_per_s": num_envs * steps / sec,
                "agent_steps_per_s": num_envs * seats * steps / sec,
                "sampler_ms_per_step": statistics.median(sampler_ms),
            })
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=1000, help="untimed steps before each")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per mode (median)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    results = run(args.steps, args.warmup, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'case':32} {'mode':12} {'ms/step':>8} {'env-steps/s':>12} {'agent-steps/s':>14}")
    for r in results:
        print(f"{r['case']:32} {r['mode']:12} {r['ms_per_step']:8.3f} "
              f"{r['env_steps_per_s']:12,.0f} {r['agent_steps_per_s']:14,.0f}")
    sampler = {r["case"]: r["sampler_ms_per_step"] for r in results}
    for case, ms in sampler.items():
        print(f"(random legal actions, not timed above: {ms:.3f} ms/step for {case})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
