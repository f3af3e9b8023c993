"""What the players of a replay folder won against each other: the ceiling of a clone.

    .venv/bin/python tools/replay_outcomes.py --replays runs/replays [--json]

A perfect clone of a player wins, against each opponent, what that player won in the recorded
games (on their maps, with their openings; against itself, at most half of the decided
games). Prints a Markdown table:
each player's win rate against each opponent (95 % Wilson interval; wins / losses / draws, both
sides together) and the mean over the opponents it met; ``--json`` one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from games.replays import ReplayError, scan
from selfplay.cli_common import first_paragraph, run_tool
from selfplay.play import wilson_interval


def outcome_table(folder: Path) -> dict[str, dict[str, list[int]]]:
    """``table[player][opponent] = [wins, losses, draws]`` over every readable game of
    ``folder`` (a game counts once for each side, a mirror game's too)."""
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for shard in scan(folder):
        for game in shard.games:
            players, winner = game["players"], int(game["winner"])
            for side in (0, 1):
                result = 0 if winner == side else 1 if winner == 1 - side else 2
                table[players[side]][players[1 - side]][result] += 1
    return {p: dict(row) for p, row in table.items()}


def markdown(table: dict[str, dict[str, list[int]]]) -> str:
    """The table as Markdown rows, players and opponents sorted by name."""
    names = sorted(set(table) | {o for row in table.values() for o in row})
    lines = ["| player | " + " | ".join(f"vs {n}" for n in names) + " | mean |",
             "|---|" + "---|" * (len(names) + 1)]
    for player in sorted(table):
        cells, rates = [], []
        for opponent in names:
            wins, losses, draws = table[player].get(opponent, (0, 0, 0))
            games = wins + losses + draws
            if not games:
                cells.append("")
                continue
            low, high = wilson_interval(wins, games)
            rates.append(wins / games)
            cells.append(f"{wins / games:.2f} ({low:.2f}-{high:.2f}; {wins}/{losses}/{draws})")
        lines.append(f"| {player} | " + " | ".join(cells) + f" | {sum(rates) / len(rates):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--replays", type=Path, required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        table = outcome_table(args.replays)
    except ReplayError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.json:
        print(json.dumps({"replays": str(args.replays), "outcomes": table}))
    else:
        print(markdown(table))


if __name__ == "__main__":
    run_tool(main)
