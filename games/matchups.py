"""How each game family stages a match against a named opponent (``selfplay play``, leagues).

An opponent is either a policy given by the caller (another checkpoint or snapshot) or a
scripted bot named by the user. Bots live inside some engines (microRTS: the engine plays
them, the game then has one seat per env) and outside others (tic-tac-toe: NumPy functions
that act for seat 1). :func:`match_setup` hides that difference behind game options plus an
optional scripted :class:`ScriptedPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.core import GameError
from games.registry import resolve


class ScriptedPolicy:
    """A NumPy bot ``fn(obs, mask, rng) -> actions`` with its own seeded generator."""

    def __init__(self, name: str, fn: Callable[..., np.ndarray], seed: int) -> None:
        self.name = name
        self.fn = fn
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        return self.fn(obs, mask, self.rng)


@dataclass
class MatchSetup:
    """Game options for the match, and the bot acting for seat 1 when it is not in the engine."""

    options: dict[str, Any] = field(default_factory=dict)
    scripted: ScriptedPolicy | None = None
    opponent_name: str = ""


def _tictactoe_bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.boardgames.bots import random_legal, win_or_block

    return {"random": lambda obs, mask, rng: random_legal(mask, rng),
            "win_or_block": win_or_block}


def bot_names(game: str) -> list[str]:
    """The scripted opponents ``game`` knows by name."""
    family = resolve(game).family
    if family == "microrts":
        from games.microrts.bots import bot_names as microrts_bots

        return microrts_bots()
    if family == "boardgames":
        return sorted(_tictactoe_bots())
    if family == "pettingzoo":
        from games.pettingzoo.catalog import builtin_opponent_games
        from games.pettingzoo.catalog import resolve as pz_resolve

        return ["builtin"] if pz_resolve(game).name in builtin_opponent_games() else []
    return []


def match_setup(game: str, bot: str | None, num_envs: int, seed: int,
                map_name: str | None = None) -> MatchSetup:
    """Options (and scripted policy) for ``num_envs`` games of ``game`` against ``bot``.

    ``bot=None`` means policy against policy: the game gets two seats per env, seat 0 for the
    player being measured and seat 1 for its opponent. The options go over a checkpoint's
    training options: microRTS matches alternate sides even where training did not
    (``alternate_sides``), and a ``map_name`` replaces the training's ``maps`` list too.
    """
    entry = resolve(game)
    if entry.family == "microrts":
        options: dict[str, Any] = {"alternate_sides": True}
        if map_name is not None:
            options.update(map=map_name, maps=[])
        if bot is None:
            return MatchSetup({**options, "num_selfplay_envs": num_envs}, None, "")
        from games.microrts.bots import resolve_bot

        spec = resolve_bot(bot)
        return MatchSetup({**options, "bots": [spec.name], "num_selfplay_envs": 0}, None,
                          spec.name)
    if map_name is not None:
        raise GameError(f"game {entry.name!r} has no maps; drop --map")
    if entry.family == "pettingzoo":
        if bot is None:  # both seats played by policies: no env against the console
            return MatchSetup({"builtin_opponent_share": 0.0}, None, "")
        if bot.lower() == "builtin":  # the console's own player, inside the emulator
            from games.pettingzoo.catalog import builtin_opponent_games
            from games.pettingzoo.catalog import resolve as pz_resolve

            info = pz_resolve(entry.name)
            if info.name not in builtin_opponent_games():
                raise GameError(f"{entry.name} has no built-in opponent; games with one: "
                                f"{', '.join(builtin_opponent_games())}")
            return MatchSetup({"builtin_opponent_share": 1.0}, None, "builtin")
        raise GameError(f"{entry.name} has no scripted opponents yet; play another checkpoint")
    if entry.family == "boardgames":
        if bot is None:
            return MatchSetup({}, None, "")
        bots = _tictactoe_bots()
        key = bot.lower()
        if key not in bots:
            raise GameError(f"unknown {entry.name} bot {bot!r}; known: {', '.join(sorted(bots))}")
        return MatchSetup({}, ScriptedPolicy(key, bots[key], seed), key)
    raise GameError(f"game {entry.name!r} is single-agent: there is no opponent to play against")
