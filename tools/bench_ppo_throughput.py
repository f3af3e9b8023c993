"""Training throughput of selfplay's PPO against Stable-Baselines3 PPO, measured in one run.

Both train with the same hyperparameters and network (64-64 tanh MLP, separate actor and
critic, 1 torch thread) on the same gymnasium environments; each measurement is the full
training loop (rollouts + updates), wall-clock, after one warm-up update. Runs alternate
between the two libraries so machine noise hits both alike.

    .venv/bin/python tools/bench_ppo_throughput.py            # both cases, 3 repeats
    .venv/bin/python tools/bench_ppo_throughput.py --case cartpole --repeats 1 --json

Needs the `bench` extra (stable-baselines3) and `mujoco` for HalfCheetah.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import dataclass, replace

import torch

from selfplay.cli_common import first_paragraph, positive_int, run_tool

CASES = {
    # name: (game, num_envs, num_steps, epochs, minibatch size, total steps, normalize)
    "cartpole": ("CartPole-v1", 8, 128, 4, 256, 102_400, False),
    "halfcheetah": ("HalfCheetah-v5", 1, 2048, 10, 64, 40_960, True),
}


@dataclass
class Case:
    game: str
    num_envs: int
    num_steps: int
    epochs: int
    minibatch: int
    total: int
    normalize: bool


def run_selfplay(case: Case, seed: int) -> float:
    from games.registry import make_game
    from selfplay.config_files import build_config
    from selfplay.ppo import Trainer

    batch = case.num_envs * case.num_steps
    overrides = [
        f"game.num_envs={case.num_envs}", f"ppo.num_steps={case.num_steps}",
        f"ppo.update_epochs={case.epochs}", f"ppo.num_minibatches={batch // case.minibatch}",
        "network.kind=mlp", "network.hidden=[64, 64]", "network.activation=tanh",
        f"normalize.obs={str(case.normalize).lower()}",
        f"normalize.reward={str(case.normalize).lower()}",
        "log.progress=false", "log.tensorboard=false", "torch_threads=1",
    ]
    config = build_config(case.game, overrides=overrides, seed=seed, total_steps=batch)
    trainer = Trainer(config, make_game(case.game, case.num_envs, seed))
    trainer.train()  # warm-up update
    trainer.config = replace(config, total_steps=batch + case.total)
    start = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - start
    trainer.game.close()
    return case.total / elapsed


def run_sb3(case: Case, seed: int) -> float:
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    env = make_vec_env(case.game, n_envs=case.num_envs, seed=seed)
    if case.normalize:
        env = VecNormalize(env, gamma=0.99)
    model = PPO("MlpPolicy", env, n_steps=case.num_steps, batch_size=case.minibatch,
                n_epochs=case.epochs, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
                clip_range=0.2, ent_coef=0.0 if case.normalize else 0.01, vf_coef=0.5,
                max_grad_norm=0.5, policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                                                  "activation_fn": torch.nn.Tanh},
                seed=seed, device="cpu", verbose=0)
    batch = case.num_envs * case.num_steps
    model.learn(total_timesteps=batch)  # warm-up update
    start = time.perf_counter()
    model.learn(total_timesteps=case.total, reset_num_timesteps=False)
    elapsed = time.perf_counter() - start
    env.close()
    del gym
    return case.total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = list(CASES) if args.case == "all" else [args.case]
    results = {}
    for name in names:
        case = Case(*CASES[name])
        ours, theirs = [], []
        for rep in range(args.repeats):
            ours.append(run_selfplay(case, seed=rep + 1))
            theirs.append(run_sb3(case, seed=rep + 1))
        med_ours, med_theirs = statistics.median(ours), statistics.median(theirs)
        results[name] = {"game": case.game, "num_envs": case.num_envs,
                         "num_steps": case.num_steps, "epochs": case.epochs,
                         "minibatch": case.minibatch, "steps_measured": case.total,
                         "selfplay_steps_per_s": ours, "sb3_steps_per_s": theirs,
                         "selfplay_median": med_ours, "sb3_median": med_theirs,
                         "ratio": med_ours / med_theirs}
        if not args.json:
            print(f"{case.game:16s} selfplay {med_ours:9,.0f}/s   SB3 {med_theirs:9,.0f}/s   "
                  f"ratio {med_ours / med_theirs:4.2f}x   (runs: "
                  f"{', '.join(f'{v:,.0f}' for v in ours)} vs "
                  f"{', '.join(f'{v:,.0f}' for v in theirs)})", flush=True)
    import stable_baselines3

    meta = {"machine": f"{platform.processor() or platform.machine()}, "
                       f"{torch.get_num_threads()} torch thread",
            "sb3_version": stable_baselines3.__version__, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d")}
    if args.json:
        print(json.dumps({"meta": meta, "results": results}))


if __name__ == "__main__":
    run_tool(main)
