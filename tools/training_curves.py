"""Win-rate curves of a training run, as a Markdown table: one row every ``--every`` env steps.

    .venv/bin/python tools/training_curves.py --run runs/cpu16 [--every 500000] \
        [--opponents WorkerRush,LightRush,CoacAI,RandomBiased,selfplay] [--max-gap 600] \
        [--json-out FILE]

Reads ``RUN/metrics.jsonl`` (one record per update) and, when the run kept a league,
``RUN/league.db``. Each row is the last update at or before the row's step: the learner's win
rate over its last games against each opponent (``win_rate/<name>``: a window of recent
training games per opponent), the minutes of training so far and the mean env-steps/s since the
previous row. Minutes are wall-clock between updates (rating games and checkpoints included);
a pause longer than ``--max-gap`` seconds between two updates (the run was stopped and resumed
later) counts only the update's own time, from its logged env-steps/s. The league column is the
TrueSkill rating (mu +- sigma) of the run's newest rated snapshot at or before that step, as it
stood right after the snapshot's own rating games (later snapshots' games move it afterwards).
Use it for the curves that BENCHMARKS.md reports.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from games.files import atomic_write_text
from league.db import LeagueDB
from selfplay.cli_common import check_output, first_paragraph, positive_float, run_tool

DEFAULT_OPPONENTS = ("WorkerRush", "LightRush", "CoacAI", "RandomBiased", "selfplay")


@dataclass(frozen=True)
class RatedSnapshot:
    """A snapshot's rating after its own rating tournament, and its results there against
    each scripted bot: ``vs_bots[bot] = (wins, games)``."""

    env_steps: int
    mu: float
    sigma: float
    vs_bots: dict[str, tuple[int, int]] = field(default_factory=dict)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The run's per-update records, in step order; a torn last line (a killed run) is skipped,
    any other unreadable line is an error naming it."""
    records = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                continue
            raise ValueError(f"{path}:{number}: not a JSON record ({exc.msg})") from exc
        if not (isinstance(record, dict) and type(record.get("step")) is int
                and isinstance(record.get("time"), (int, float))):
            raise ValueError(f"{path}:{number}: not a metrics record (an object with an "
                             "integer step and a time)")
        # the updates' records ("snapshot": a snapshot's rating, at the snapshot's step)
        if "snapshot" not in record:
            records.append(record)
    if not records:
        raise ValueError(f"{path} holds no update record")
    # a resumed run rewrites the updates after its last checkpoint: keep the latest of each step
    by_step = {int(r["step"]): r for r in records}
    return [by_step[s] for s in sorted(by_step)]


def training_seconds(records: Sequence[Mapping[str, Any]], max_gap: float) -> list[float]:
    """Seconds of training at each record: wall-clock between consecutive updates, except that
    a gap over ``max_gap`` (a stop and a later resume) counts as the update's own time,
    ``steps / perf/steps_per_second``. The first update counts the same way."""
    def own_time(record: Mapping[str, Any], steps: int) -> float:
        rate = float(record.get("perf/steps_per_second") or 0.0)
        return steps / rate if rate > 0 else 0.0

    elapsed = [own_time(records[0], int(records[0]["step"]))] if records else []
    for before, record in zip(records[:-1], records[1:], strict=True):
        gap = float(record["time"]) - float(before["time"])
        steps = int(record["step"]) - int(before["step"])
        elapsed.append(elapsed[-1] + (gap if 0 <= gap <= max_gap else own_time(record, steps)))
    return elapsed


def curve_rows(records: Sequence[Mapping[str, Any]], every: int, opponents: Sequence[str],
               snapshots: Sequence[RatedSnapshot] = (),
               max_gap: float = 600.0) -> list[dict[str, Any]]:
    """One row per multiple of ``every`` env steps that the run reached, plus its last update.

    ``snapshots``: the run's rated snapshots, any order. A row's ``league`` is the newest one's
    rating at or before its step; its ``eval`` sums the rating games against each bot of the
    snapshots taken since the previous row: ``{bot: (wins, games)}``."""
    if every <= 0:
        raise ValueError(f"--every must be positive, got {every}")
    if not records:
        return []
    seconds = training_seconds(records, max_gap)
    marks = list(range(every, int(records[-1]["step"]) + 1, every))
    picked: list[int] = []  # record indices
    index = 0
    for mark in marks:
        while index + 1 < len(records) and int(records[index + 1]["step"]) <= mark:
            index += 1
        if int(records[index]["step"]) <= mark and (not picked or picked[-1] != index):
            picked.append(index)
    if not picked or picked[-1] != len(records) - 1:
        picked.append(len(records) - 1)
    ordered = sorted(snapshots, key=lambda snap: snap.env_steps)
    rows = []
    previous_step, previous_time = 0, 0.0
    for index in picked:
        record = records[index]
        step, now = int(record["step"]), seconds[index]
        row: dict[str, Any] = {
            "step": step, "minutes": now / 60.0,
            "steps_per_second": ((step - previous_step) / (now - previous_time)
                                 if now > previous_time else math.nan)}
        for name in opponents:
            value = record.get(f"win_rate/{name}")
            row[name] = None if value is None else float(value)
        rated = [snap for snap in ordered if snap.env_steps <= step]
        row["league"] = (rated[-1].mu, rated[-1].sigma) if rated else None
        row["eval"] = {}
        for snap in rated:
            if snap.env_steps > previous_step:
                for bot, (wins, games) in snap.vs_bots.items():
                    total = row["eval"].get(bot, (0, 0))
                    row["eval"][bot] = (total[0] + wins, total[1] + games)
        rows.append(row)
        previous_step, previous_time = step, now
    return rows


def run_snapshots(db_path: Path, run: str | None = None) -> list[RatedSnapshot]:
    """The main snapshots in a league database (of one run when ``run`` is given: the player
    names' ``<run>@<update>`` prefix), each with its rating right after its own rating
    tournament (``eval@<name>/``), before later snapshots' games moved it, and its results
    there against the scripted bots; snapshots not rated yet are left out."""
    if not db_path.exists():
        return []
    out = []
    with LeagueDB(db_path) as db:
        for player in db.players():
            if player.kind != "snapshot" or player.metadata.get("role", "main") != "main":
                continue
            if run is not None and not player.name.startswith(f"{run}@"):
                continue
            own = db.matches(f"eval@{player.name}/")
            if not own or "env_steps" not in player.metadata:
                continue
            history = db.rating_history([player.id])[player.id]  # [K, 4]: match, mu, sigma, elo
            rows = history[history[:, 0] <= max(m.id for m in own)]
            if not len(rows):
                continue
            vs_bots = {bot: (wins, games)
                       for bot, (wins, _, games) in db.results_vs_bots(player.id, own).items()}
            out.append(RatedSnapshot(int(player.metadata["env_steps"]), float(rows[-1, 1]),
                                     float(rows[-1, 2]), vs_bots))
    return out


def markdown(rows: Sequence[Mapping[str, Any]], opponents: Sequence[str]) -> str:
    """The rows as a Markdown table (a dash where an opponent has no finished game yet); the
    rating games against each bot as ``wins/games`` per row."""
    bots = sorted({bot for row in rows for bot in row.get("eval", {})})
    head = ["env steps", "minutes", *opponents, "league mu +- sigma",
            *(f"rating games vs {bot}" for bot in bots), "env-steps/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{row['step'] / 1e6:.3f}M", f"{row['minutes']:.0f}"]
        cells += ["-" if row[name] is None else f"{row[name]:.2f}" for name in opponents]
        league = row["league"]
        cells.append("-" if league is None else f"{league[0]:.1f} +- {league[1]:.1f}")
        for bot in bots:
            wins, games = row.get("eval", {}).get(bot, (0, 0))
            cells.append(f"{wins}/{games}" if games else "-")
        rate = row["steps_per_second"]
        cells.append("-" if math.isnan(rate) else f"{rate:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--run", type=Path, required=True, help="the run directory")
    parser.add_argument("--every", type=int, default=500_000, help="env steps between rows")
    parser.add_argument("--opponents", default=",".join(DEFAULT_OPPONENTS),
                        help="comma-separated opponent names (the win_rate/<name> metrics)")
    parser.add_argument("--run-name", default=None,
                        help="the snapshots' name prefix in league.db (default: all main ones)")
    parser.add_argument("--max-gap", type=positive_float, default=600.0,
                        help="seconds between updates beyond which the run counts as paused")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    metrics = args.run / "metrics.jsonl"
    if not metrics.is_file():
        print(f"error: {metrics} not found: is {args.run} a training run directory?",
              file=sys.stderr)
        return 2
    if args.json_out is not None:  # before the work, never over an input
        check_output("--json-out", args.json_out, [metrics, args.run / "league.db"])
    opponents = [name.strip() for name in args.opponents.split(",") if name.strip()]
    try:
        records = read_metrics(metrics)
        rows = curve_rows(records, args.every, opponents,
                          run_snapshots(args.run / "league.db", args.run_name), args.max_gap)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(rows, opponents))
    if args.json_out is not None:  # NaN (no rate for the first row) as null: valid JSON
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in row.items()} for row in rows]  # tuples become lists
        atomic_write_text(args.json_out, json.dumps(clean, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_tool(main)
