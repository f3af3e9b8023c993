"""The Lux family: ``selfplay train --game lux``, its scripted opponents and ``setup lux``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.core import GameError, ScriptedPolicy
from games.family import Family
from games.matches import MatchSetup


def _bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.lux.bots import BOTS

    return BOTS


class LuxFamily(Family):
    name = "lux"
    title = "Lux AI Season 2"
    summary = ("Lux AI Season 2 on Jux (JAX): 48x48, factories and robots, two seats, "
               "per-cell masked actions")
    factory = "games.lux:make"
    games = ("lux",)
    aliases = {"luxai_s2": "lux", "lux_ai_s2": "lux", "luxai-s2": "lux", "lux-s2": "lux"}
    two_player = True
    needs_setup = True

    def bot_names(self, game: str) -> list[str]:
        return sorted(_bots())

    def scripted(self, game: str, bot: str, seed: int) -> MatchSetup:
        bots = _bots()
        key = bot.lower()
        if key not in bots:
            raise GameError(f"unknown {game} bot {bot!r}; known: {', '.join(sorted(bots))}")
        return MatchSetup({}, ScriptedPolicy(key, bots[key], seed), key)

    def setup(self, quiet: bool = False) -> Mapping[str, Any]:
        import dataclasses

        from games.lux.engine import setup

        return dataclasses.asdict(setup(quiet=quiet))


FAMILIES = (LuxFamily(),)
