"""The Lux family: ``selfplay train --game lux``, its scripted opponents and ``setup lux``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from games.core import GameError, VecGame
from games.family import SeatBotsFamily, Teachers


def _bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.lux.bots import BOTS

    return BOTS


class LuxFamily(SeatBotsFamily):
    name = "lux"
    title = "Lux AI Season 2"
    summary = ("Lux AI Season 2 on Jux (JAX): 48x48, factories and robots, two seats, "
               "per-cell masked actions")
    factory = "games.lux:make"
    options_type = "games.lux.adapter:LuxOptions"
    games = ("lux",)
    aliases = {"luxai_s2": "lux", "lux_ai_s2": "lux", "luxai-s2": "lux", "lux-s2": "lux"}
    two_player = True
    needs_setup = True
    length_option = "max_steps"

    def with_game_length(self, game: str, options: Mapping[str, Any],
                         steps: int) -> dict[str, Any]:
        """Games cut after ``steps`` main-phase steps (the rules' 1000 at most)."""
        if not 1 <= steps <= 1000:
            raise GameError(f"--max-steps {steps}: Lux games last 1 to 1000 main-phase steps "
                            "(the rules' length)")
        return super().with_game_length(game, options, steps)

    def seat_bots(self) -> Mapping[str, Callable[..., np.ndarray]]:
        return _bots()

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        """Replays (converted Kaggle episodes: :class:`~games.lux.replay_game.LuxReplayGame`)
        or the live seat bots."""
        if teachers.replays is None:
            return super().teacher_game(game, teachers, num_envs, seed, options)
        if teachers.bots:
            raise GameError("name either live teachers or replays, not both")
        from games.lux.adapter import LuxOptions
        from games.lux.replay_game import LuxReplayGame
        from games.options import from_mapping

        return LuxReplayGame(from_mapping(LuxOptions, options, "game.options."), num_envs,
                             teachers.replays, teachers.imitate, teachers.winners_only,
                             teachers.held_out, teachers.validation_share, seed, game)

    def import_replays(self, game: str, fmt: str, paths: list[Path], out: Path,
                       shard_games: int = 100, skip_bad: bool = False) -> Mapping[str, Any]:
        """Kaggle episode JSON (``fmt == "kaggle"``) into a replay folder
        (:func:`games.lux.kaggle_replay.convert_kaggle`)."""
        if fmt.lower() != "kaggle":
            raise GameError(f"{game} imports replays of format 'kaggle' only, not {fmt!r}")
        from games.lux.kaggle_replay import convert_kaggle

        return convert_kaggle(paths, out, shard_games=shard_games, skip_bad=skip_bad)

    def setup(self, quiet: bool = False) -> Mapping[str, Any]:
        import dataclasses

        from games.lux.engine import setup

        return dataclasses.asdict(setup(quiet=quiet))


FAMILIES = (LuxFamily(),)
