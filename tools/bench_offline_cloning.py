"""Offline cloning: how well a network setting fits a teacher's labels, in minutes, not an hour.

    .venv/bin/python tools/bench_offline_cloning.py collect --game lux --teachers \\
        heuristic-raid,heuristic --imitate heuristic-raid --envs 32 --every 4 --seed 11 \\
        --out runs/bench/offline/train.npz
    .venv/bin/python tools/bench_offline_cloning.py collect ... --envs 8 --seed 12 \\
        --out runs/bench/offline/val.npz
    .venv/bin/python tools/bench_offline_cloning.py fit --game lux --teachers \\
        heuristic-raid,heuristic --train \\
        runs/bench/offline/train.npz --val runs/bench/offline/val.npz --minutes 6 \\
        --set "network.grid_cells=[128]" --set network.grid_cell_bins=40 --json-out F.json

A live cloning run (``selfplay bc``, ``tools/bench_lux_learning.py``) spends most of its time
playing the teachers and takes an hour to say whether a network setting clones a teacher
better. ``collect`` plays the teachers' games once (``selfplay bc``'s cloner with no learner
seats, the game's ``bc`` settings plus ``--set``) and keeps every ``--every``-th step of the
imitated seats for ``--steps`` steps per env (default: as many as one game lasts, the game's
``max_steps``, else 1,000):
observations, masks (bit-packed) and labels. ``fit`` trains ``selfplay bc``'s network of the
game's config plus ``--set`` on those positions (minibatches of ``--batch``, Adam at
``--lr``, the cloning loss of :func:`selfplay.bc_loss.clone_terms`) for ``--minutes`` of wall
time, and every ``--eval-every`` minutes reports on the held-out positions: the loss, each
component's accuracy and each labelled value's recall (the share of its labels the most likely
value got right). The held-out games are other games, not other steps of the same ones.
``score`` reports the same on the held-out positions for a trained checkpoint (a live clone,
say: its figures over whole games, where ``selfplay bc``'s validation sees their first steps;
with ``--confusion`` which value it picks for each labelled one), and with ``--phases N``
(``fit``'s reports too) the same over each of N equal parts of the games (where the game tells
how far its games have gone, as Lux's does).

    .venv/bin/python tools/bench_offline_cloning.py score --checkpoint RUN_DIR \
        --val runs/bench/offline/val.npz --phases 10
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from games.core import Discrete, MultiDiscrete
from games.files import atomic_write_bytes, atomic_write_text
from selfplay.bc import build_cloner
from selfplay.bc_loss import clone_confusion, clone_terms
from selfplay.checkpoint import resolve_checkpoint
from selfplay.cli_common import UserError, check_output, first_paragraph, positive_int, run_tool
from selfplay.cloning import component_names, component_sizes
from selfplay.config_files import build_config
from selfplay.evaluate import load_agent
from selfplay.networks import ActorCritic, count_parameters


def collect(args: argparse.Namespace) -> None:
    """Play the teachers' games and save the imitated seats' positions to ``args.out``."""
    check_output("--out", args.out)  # before the games
    config = build_config(args.game, overrides=[
        "log.progress=false", f"bc.teachers=[{args.teachers}]",
        f"bc.imitate=[{args.imitate}]", f"bc.num_envs={args.envs}", "bc.validate_every=0",
        "bc.student_share=0", *args.set], seed=args.seed)
    cloner = build_cloner(config, None)
    length = args.steps or int(config.game.options.get("max_steps", 1000))
    parts: dict[str, list[np.ndarray]] = {"obs": [], "mask": [], "labels": [], "step": []}
    progress = cloner.game_progress  # where in its game each position lies, if the game tells
    if progress is not None:
        parts["progress"] = []
    start = time.perf_counter()
    try:
        while cloner.global_step < length * args.envs:
            first = cloner.global_step // args.envs
            cloner.collect()
            for t in range(0, cloner.bc.num_steps, args.every):
                seats = cloner.imitated[t].numpy()
                parts["obs"].append(cloner.obs[t].numpy()[seats])
                parts["mask"].append(np.packbits(cloner.mask[t].numpy()[seats], axis=-1))
                parts["labels"].append(cloner.labels[t].numpy()[seats].astype(np.int16))
                parts["step"].append(np.full(int(seats.sum()), first + t))
                if progress is not None:
                    parts["progress"].append(np.broadcast_to(
                        progress[t].numpy()[:, None], seats.shape)[seats])
    finally:
        cloner.close()
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    width = np.array(cloner.mask.shape[-1])  # written whole under the exact name --out gives
    atomic_write_bytes(args.out, lambda handle: np.savez(handle, mask_width=width, **arrays))
    print(json.dumps({"positions": len(arrays["obs"]), "env_steps": cloner.global_step,
                      "seconds": round(time.perf_counter() - start, 1), "out": str(args.out)}))


def load(path: Path, flag: str = "--val") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(obs, mask, labels)`` of a ``collect`` file; a :class:`UserError` naming ``flag`` for
    another file."""
    try:
        with np.load(path, allow_pickle=False) as data:
            width = int(data["mask_width"])
            mask = np.unpackbits(data["mask"], axis=-1)[..., :width].astype(bool)
            return (torch.from_numpy(data["obs"]), torch.from_numpy(mask),
                    torch.from_numpy(data["labels"].astype(np.int64)))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise UserError(f"{flag} {path} is not a file of `collect` ({unreadable(exc)})") from exc


def unreadable(exc: BaseException) -> str:
    """Why an .npz file could not be read, in one line."""
    if isinstance(exc, KeyError):
        return f"no array {exc}"
    if "pickled" in str(exc):  # what numpy says of any file that is no .npy or .npz
        return "not a NumPy .npz file"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def load_progress(path: Path) -> np.ndarray:
    """``float [N]``: where in its game each position of a ``collect`` file lies."""
    with np.load(path, allow_pickle=False) as data:
        if "progress" not in data:
            raise UserError(f"{path}: its game did not tell its progress; --phases needs it")
        return np.asarray(data["progress"], np.float64)


def by_phase(agent: ActorCritic, val: tuple[torch.Tensor, ...], progress: np.ndarray,
             phases: int, names: list[str], sizes: list[int],
             confusion: bool = False) -> list[dict[str, Any]]:
    """:func:`held_out`'s figures over each of ``phases`` equal parts of the games."""
    part = np.minimum((progress * phases).astype(np.int64), phases - 1)
    reports = []
    for k in range(phases):
        rows = torch.from_numpy(np.flatnonzero(part == k))
        if len(rows):
            reports.append({"from": round(k / phases, 4), "to": round((k + 1) / phases, 4),
                            "positions": len(rows),
                            **held_out(agent, tuple(x[rows] for x in val), names, sizes,
                                         confusion)})
    return reports


def held_out(agent: ActorCritic, val: tuple[torch.Tensor, ...], names: list[str],
             sizes: list[int], confusion: bool = False) -> dict[str, Any]:
    """Loss, accuracy per component and recall per labelled value on the held-out positions;
    with ``confusion`` each component's confusion matrix (``confusion[name][label][picked]``:
    the counted labels of each value by the most likely value)."""
    totals: list[torch.Tensor] | None = None
    matrices = [torch.zeros(n, n, dtype=torch.int64) for n in sizes]
    with torch.no_grad():
        for s in range(0, len(val[0]), 128):
            obs, mask, labels = (x[s:s + 128] for x in val)
            dist = agent.dist(obs, mask)
            terms = clone_terms(dist, labels, torch.ones(len(obs), dtype=torch.bool))
            if confusion:
                matrices = [a + b for a, b in zip(matrices, clone_confusion(dist, labels),
                                                  strict=True)]
            part = [terms.nll, terms.cells, terms.used, terms.correct, terms.values,
                    terms.values_right]
            totals = part if totals is None else [a + b for a, b in zip(totals, part, strict=True)]
    assert totals is not None
    nll, cells, used, correct, values, right = totals
    accuracy = {n: round(float(correct[i] / used[i]), 4)
                for i, n in enumerate(names) if used[i] > 0}
    recall, start = {}, 0
    for name, size in zip(names, sizes, strict=True):
        for v in range(size):
            if values[start + v] > 0:
                recall[f"{name}={v}"] = [round(float(right[start + v] / values[start + v]), 4),
                                         int(values[start + v])]
        start += size
    report = {"loss": round(float(nll / cells), 4), "accuracy": accuracy, "recall": recall}
    if confusion:
        report["confusion"] = {n: m.tolist() for n, m in zip(names, matrices, strict=True)}
    return report


def fit(args: argparse.Namespace) -> None:
    """Train the config's network on ``args.train``; held-out reports on ``args.val``."""
    if args.json_out is not None:  # before the work, never over an input
        check_output("--json-out", args.json_out, [args.train, args.val])
    torch.set_num_threads(args.threads)
    config = build_config(args.game, overrides=[f"bc.teachers=[{args.teachers}]",
                                                "bc.num_envs=1", "bc.validate_every=0",
                                                *args.set], seed=args.seed)
    cloner = build_cloner(config, None)  # the game's spec and selfplay bc's network
    spec, names, sizes = cloner.spec, component_names(cloner.game), component_sizes(cloner.game)
    cloner.close()
    torch.manual_seed(args.seed)
    agent = ActorCritic(spec, config.network, config.normalize)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    train, val = load(args.train, "--train"), load(args.val, "--val")
    val_progress = load_progress(args.val) if args.phases else None
    draw = torch.Generator().manual_seed(args.seed)
    start, steps, reports, next_report = time.perf_counter(), 0, [], 0.0
    everyone = torch.ones(args.batch, dtype=torch.bool)
    while True:
        minutes = (time.perf_counter() - start) / 60
        done = minutes >= args.minutes or (args.steps > 0 and steps >= args.steps)
        if minutes >= next_report or done:
            report = {"minutes": round(minutes, 2), "steps": steps,
                      **held_out(agent, val, names, sizes)}
            if val_progress is not None:
                report["phases"] = by_phase(agent, val, val_progress, args.phases, names, sizes)
            reports.append(report)
            print(json.dumps(report), flush=True)
            next_report += args.eval_every
            if done:
                break
        rows = torch.randint(0, len(train[0]), (args.batch,), generator=draw)
        terms = clone_terms(agent.dist(train[0][rows], train[1][rows]), train[2][rows], everyone)
        optimizer.zero_grad()
        terms.loss().backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        optimizer.step()
        steps += 1
    result = {"game": args.game, "set": args.set, "train": str(args.train),
              "positions": len(train[0]), "held_out": len(val[0]),
              "parameters": count_parameters(agent), "batch": args.batch, "lr": args.lr,
              "threads": args.threads, "machine": platform.node(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "reports": reports}
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(result, indent=1))


def score(args: argparse.Namespace) -> None:
    """Held-out figures of a trained checkpoint on ``args.val``."""
    torch.set_num_threads(args.threads)
    path = resolve_checkpoint(args.checkpoint)
    if args.json_out is not None:  # before the work, never over an input
        check_output("--json-out", args.json_out, [args.val, path])
    _, agent, _ = load_agent(path)
    space = agent.space
    names, sizes = ((list(space.component_names), [int(n) for n in space.nvec])
                    if isinstance(space, MultiDiscrete)
                    else (["action"], [int(cast(Discrete, space).n)]))
    val = load(args.val)
    try:
        report = {"checkpoint": str(path), **held_out(agent, val, names, sizes,
                                                       args.confusion)}
    except (RuntimeError, IndexError) as exc:  # positions the network cannot take
        raise UserError(f"{path} cannot score the positions of --val {args.val} (another "
                        f"game's or settings'?): {unreadable(exc)}") from exc
    if args.phases:
        report["phases"] = by_phase(agent, val, load_progress(args.val), args.phases, names,
                                    sizes, args.confusion)
    print(json.dumps(report), flush=True)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(report, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("collect", "fit"):
        p = sub.add_parser(name)
        p.add_argument("--game", default="lux")
        p.add_argument("--teachers", required=True, help="comma-separated, as bc.teachers")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    scoring = sub.add_parser("score")
    scoring.add_argument("--checkpoint", required=True, help="a checkpoint or run directory")
    scoring.add_argument("--val", type=Path, required=True)
    scoring.add_argument("--threads", type=positive_int, default=1)
    for p in (scoring, sub.choices["fit"]):
        p.add_argument("--phases", type=int, default=0,
                       help="also report each of N equal parts of the held-out games")
    scoring.add_argument("--confusion", action="store_true",
                         help="also each component's confusion matrix (label x most likely)")
    scoring.add_argument("--json-out", type=Path)
    collecting, fitting = sub.choices["collect"], sub.choices["fit"]
    collecting.add_argument("--imitate", required=True, help="comma-separated, as bc.imitate")
    collecting.add_argument("--envs", type=positive_int, default=32)
    collecting.add_argument("--every", type=positive_int, default=4, help="keep every n-th step")
    collecting.add_argument("--steps", type=int, default=0,
                            help="steps per env to play (0: the game's max_steps, else 1,000)")
    collecting.add_argument("--out", type=Path, required=True)
    fitting.add_argument("--train", type=Path, required=True)
    fitting.add_argument("--val", type=Path, required=True)
    fitting.add_argument("--minutes", type=float, default=6.0)
    fitting.add_argument("--steps", type=int, default=0,
                         help="stop after this many updates too (0: the minutes only)")
    fitting.add_argument("--eval-every", type=float, default=2.0, help="minutes")
    fitting.add_argument("--batch", type=positive_int, default=64)
    fitting.add_argument("--lr", type=float, default=5e-4)
    fitting.add_argument("--threads", type=positive_int, default=1)
    fitting.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    {"collect": collect, "fit": fit, "score": score}[args.command](args)


if __name__ == "__main__":
    run_tool(main)
