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
Modes run interleaved in blocks of ``--block`` steps, so that all of them see the same machine
load; ratios are those of the median block times, by wall clock and by the
main thread's CPU time (``time.thread_time``: unaffected by other processes taking the CPU,
and, like the bare loop, blind to the JVM's GC threads).
Run: ``python tools/bench_microrts_adapter.py [--steps N] [--warmup W] [--block B] [--json]``.
The first seconds of a JVM are 2-3x slower (JIT), hence the warm-up steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from games.microrts import make  # noqa: E402
from games.microrts.adapter import (  # noqa: E402
    _JAVA_WINLOSS,
    MicroRTSVecGame,
    random_legal_actions,
)
from games.microrts.maps import resolve_map  # noqa: E402
from selfplay.cli_common import first_paragraph, nonnegative_int, positive_int, run_tool

MAX_STEPS = 2000
_VEC_RFS = ("WinLoss", "ResourceGather", "ProduceWorker", "ProduceBuilding", "Attack",
            "ProduceCombatUnit")  # MicroRTS-Py's order (REWARD_COMPONENTS)

# one loop iteration: returns (wall, thread CPU) seconds spent sampling actions, then (wall,
# thread CPU) seconds of bookkeeping that is not part of the measured work (recording actions)
Step = Callable[[], tuple[float, float, float, float]]


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


class ActionLog:
    """The engine action rows the adapter loop issued in the current block, for the bare loop
    to replay: both then play the very same games, step for step."""

    def __init__(self, rows: int, cells: int, block: int) -> None:
        self.actions = np.zeros((block, rows, cells, 7), np.int32)
        self.pos = 0
        self.reward_sum = np.zeros((rows, 6))  # every step's rewards, to check the replays


def adapter_loop(game: MicroRTSVecGame, rng: np.random.Generator,
                 log: ActionLog | None = None) -> Step:
    batch = game.reset()
    actions = np.zeros((game.num_envs, game.num_seats, game.height * game.width, 7), np.int64)

    def one() -> tuple[float, float, float, float]:
        nonlocal batch
        w0, c0 = _clocks()
        assert batch.action_mask is not None
        random_legal_actions(batch.action_mask, rng, out=actions)
        w1, c1 = _clocks()
        batch = game.step(actions)
        if log is None:
            return w1 - w0, c1 - c0, 0.0, 0.0
        w2, c2 = _clocks()
        np.copyto(log.actions[log.pos], game._engine_act)  # what the engine was handed
        log.pos += 1
        log.reward_sum += game.last_reward_components.reshape(len(log.reward_sum), -1)
        w3, c3 = _clocks()
        return w1 - w0, c1 - c0, w3 - w2, c3 - c2

    return one


def shm_bare_loop(game: MicroRTSVecGame, rng: np.random.Generator,
                  log: ActionLog | None = None) -> Step:
    """The adapter's own Java clients, stepped without any of its Python work. With ``log``,
    the actions are still sampled here (the same work, memory traffic included), then replaced
    by the adapter loop's (copied in, untimed), so that both loops play the same games."""
    game.reset()
    for g in game.groups:
        g.client.getMasks(g.learner)
    steps = [np.zeros(g.rows, np.int64) for g in game.groups]
    scratch = [np.zeros_like(g.act) for g in game.groups]

    def one() -> tuple[float, float, float, float]:
        w0, c0 = _clocks()
        for g, out in zip(game.groups, scratch, strict=True):
            random_legal_actions(g.mask, rng, out=g.act if log is None else out)
        w1, c1 = _clocks()
        if log is not None:
            np.copyto(game._engine_act, log.actions[log.pos])
            log.pos += 1
        w2, c2 = _clocks()
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
        return w1 - w0, c1 - c0, w2 - w1, c2 - c1

    return one


class VecLoop:
    """``tests.JNIGridnetVecClient``: Java arrays through JPype plus numpy conversions. With
    ``log`` it samples (timed) and then plays the adapter loop's actions instead (untimed), as
    the bare loop does; its rewards are summed to check that the games stayed the same."""

    def __init__(self, map_name: str, num_selfplay: int, num_bot: int, bot: str,
                 rng: np.random.Generator, log: ActionLog | None = None) -> None:
        self.step, self.close = _vec_numpy_loop(map_name, num_selfplay, num_bot, bot, rng, log,
                                                self)
        self.reward_sum = np.zeros((num_selfplay + num_bot, 6))  # every step's, for checks


def _vec_numpy_loop(map_name: str, num_selfplay: int, num_bot: int, bot: str,
                    rng: np.random.Generator, log: ActionLog | None, owner: VecLoop
                    ) -> tuple[Step, Callable[[], None]]:
    import jpype

    from games.microrts.bots import make_bot, resolve_bot

    info = resolve_map(map_name)
    height, width = info.shape
    cells = height * width
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    rf = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
    # MicroRTS-Py's order: win/loss first, so that the client starts a new game when one ends
    rfs = jpype.JArray(rf)([jpype.JClass(f"ai.rewardfunction.{n}RewardFunction")()
                            for n in _VEC_RFS])
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

    def one() -> tuple[float, float, float, float]:
        masks = np.asarray(client.getMasks(0))  # [N, H, W, 79]: source unit + components
        source = masks[..., 0].reshape(num, cells, 1) != 0
        comp = (masks[..., 1:].reshape(num, cells, -1) != 0) & source  # [N, HW, 78] bool
        w0, c0 = _clocks()
        random_legal_actions(comp, rng, out=actions)
        w1, c1 = _clocks()
        if log is not None:
            np.copyto(actions, log.actions[log.pos])
            # the adapter leaves stale values at cells without a unit of the seat (the engine
            # reads none there); this loop sends every non-zero cell to Java, so clear them
            actions[~source[..., 0]] = 0
            log.pos += 1
        w2, c2 = _clocks()
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
        owner.reward_sum += np.asarray(response.reward)  # [N, 6] in REWARD_COMPONENTS order
        np.asarray(response.done)
        return w1 - w0, c1 - c0, w2 - w1, c2 - c1

    return one, client.close


def _ratio(own: np.ndarray, ref: np.ndarray, col: int, without_sampling: bool) -> float:
    """Throughput ratio ``median ref time / median own time`` over blocks (``[blocks, 6]``
    arrays: wall, CPU, sampling wall, sampling CPU, excluded wall, excluded CPU seconds), the
    excluded bookkeeping left out of both, and their sampling with ``without_sampling``."""
    mine = own[:, col] - own[:, col + 4] - (own[:, col + 2] if without_sampling else 0)
    other = ref[:, col] - ref[:, col + 4] - (ref[:, col + 2] if without_sampling else 0)
    return float(np.median(other) / np.median(mine))


def run(steps: int, warmup: int, block: int, cases: list[str] | None = None,
        replay: bool = True) -> list[dict[str, Any]]:
    """Every mode of every case, interleaved in blocks of ``block`` steps (so all modes see the
    same machine load), ``steps`` timed steps per mode. With ``replay`` the bare loop replays
    the adapter loop's actions of the same block, so both play identical games (checked after
    every block) and the game's own speed, which changes with the number of units, cancels out.
    The bare loop still samples its own actions first (timed as its sampling): the sampler's
    memory traffic changes how fast the engine's calls run, so both loops should do it."""
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
        # the learner plays player 0 everywhere (one Java client, rows in env order), as in
        # the vec loop, so that all three can play the same games
        opts: dict[str, Any] = dict(map=map_name, bots=["WorkerRush"], alternate_sides=False,
                                    num_selfplay_envs=num_games, max_steps=MAX_STEPS)
        game = make("microrts", num_envs=num_envs, **opts)
        bare_game = make("microrts", num_envs=num_envs, **opts)  # same clients, own instance
        assert isinstance(game, MicroRTSVecGame) and isinstance(bare_game, MicroRTSVecGame)
        log = (ActionLog(game._engine_act.shape[0], game.height * game.width, block)
               if replay else None)
        loops: dict[str, Step] = {"adapter": adapter_loop(game, rng, log)}
        closers: list[Callable[[], None]] = [game.close]
        loops["shm-bare"] = shm_bare_loop(bare_game, rng, log)
        closers.append(bare_game.close)
        if num_games:
            rot_game = make("microrts", num_envs=num_envs, rotate_player1=True, **opts)
            assert isinstance(rot_game, MicroRTSVecGame)
            loops["adapter+rot"] = adapter_loop(rot_game, rng)
            closers.append(rot_game.close)
        vec = VecLoop(map_name, 2 * num_games, num_bot, "WorkerRush", rng, log)
        loops["vec+numpy"] = vec.step
        closers.append(vec.close)
        # per mode and block: wall, CPU, sampling wall, sampling CPU, excluded wall, excluded CPU
        times: dict[str, list[tuple[float, ...]]] = {m: [] for m in loops}
        blocks = -(-warmup // block) + max(1, steps // block)
        for b in range(blocks):
            for mode, step in loops.items():
                if log is not None:  # the replaying loops start the block's actions anew
                    log.pos = 0
                parts = np.zeros(4)
                w0, c0 = _clocks()
                for _ in range(block):
                    parts += step()
                w1, c1 = _clocks()
                if b * block >= warmup:
                    times[mode].append((w1 - w0, c1 - c0, *parts))
            if log is not None and not np.array_equal(game._engine_masks, bare_game._engine_masks):
                raise RuntimeError("the bare loop's games diverged from the adapter's")
            if log is not None and not np.allclose(vec.reward_sum, log.reward_sum):
                raise RuntimeError("the vec loop's games diverged from the adapter's")
        for close in closers:
            close()
        t = {m: np.array(v) for m, v in times.items()}  # [blocks, 6]
        bare, vec_times = t["shm-bare"], t["vec+numpy"]
        for mode, x in t.items():
            n = block * len(x)
            results.append({
                "case": title, "mode": mode, "envs": num_envs, "seats": num_envs * seats,
                "steps": n, "block": block, "replay": replay,
                "ms_per_step": 1e3 * float(np.median(x[:, 0] - x[:, 4])) / block,
                "cpu_ms_per_step": 1e3 * float(np.median(x[:, 1] - x[:, 5])) / block,
                "sampling_ms_per_step": 1e3 * float(np.median(x[:, 2])) / block,
                "env_steps_per_s": num_envs * block / float(np.median(x[:, 0] - x[:, 4])),
                "vs_bare": _ratio(x, bare, 0, False),
                "vs_bare_step_only": _ratio(x, bare, 0, True),
                "vs_bare_cpu": _ratio(x, bare, 1, False),
                "vs_bare_cpu_step_only": _ratio(x, bare, 1, True),
                "vs_vec_numpy": float(np.median(vec_times[:, 0] - vec_times[:, 4])
                                     / np.median(x[:, 0] - x[:, 4])),
            })
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--steps", type=positive_int, default=3000, help="timed steps per mode")
    parser.add_argument("--warmup", type=nonnegative_int, default=1000,
                        help="untimed steps per mode first")
    parser.add_argument("--block", type=positive_int, default=100,
                        help="steps per mode before switching to the next mode")
    parser.add_argument("--case", action="append", choices=["0", "1"],
                        help="only this case (0: 16x16 vs WorkerRush, 1: 8x8 self-play)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-replay", action="store_true",
                        help="the bare loop samples its own actions (its games then differ from "
                             "the adapter's)")
    args = parser.parse_args(argv)
    results = run(args.steps, args.warmup, args.block, args.case, replay=not args.no_replay)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'case':29} {'mode':11} {'ms/step':>7} {'env-steps/s':>11} | vs bare: {'wall':>5} "
          f"{'step':>5} {'cpu':>5} {'cpu step':>8} | {'vs vec':>6}")
    for r in results:
        print(f"{r['case']:29} {r['mode']:11} {r['ms_per_step']:7.3f} "
              f"{r['env_steps_per_s']:11,.0f} |          {r['vs_bare']:5.2f} "
              f"{r['vs_bare_step_only']:5.2f} {r['vs_bare_cpu']:5.2f} "
              f"{r['vs_bare_cpu_step_only']:8.2f} | {r['vs_vec_numpy']:6.2f}")
    print("ratios: throughput relative to shm-bare / vec+numpy (medians over interleaved blocks);"
          " wall = wall clock incl. sampling random legal actions, step = without sampling,"
          " cpu = the main thread's CPU time (insensitive to other processes' load)")
    return 0


if __name__ == "__main__":
    run_tool(main)
