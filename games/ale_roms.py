"""The Atari games bundled with ale-py, which two families play: single-player Atari
(:mod:`games.gym.atari`) and two-player PettingZoo Atari (:mod:`games.pettingzoo`)."""

from __future__ import annotations

import re
from functools import cache


def rom_key(name: str) -> str:
    """A game name without case or separators: ``"Space_Invaders"`` -> ``"spaceinvaders"``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def single_player_games() -> dict[str, str]:
    """Playable single-player games bundled with ale-py: :func:`rom_key` -> CamelCase name
    (``ModuleNotFoundError`` without ale-py or gymnasium)."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    games = {}
    for rom in ale_py.roms.get_all_rom_ids():
        camel = "".join(part.capitalize() for part in rom.split("_"))
        if f"ALE/{camel}-v5" in gym.registry:  # multi-player-only ROMs are not registered
            games[rom_key(camel)] = camel
    return games
