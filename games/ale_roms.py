"""The Atari games bundled with ale-py, which two families play: single-player Atari
(:mod:`games.gym.atari`) and two-player PettingZoo Atari (:mod:`games.pettingzoo`)."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

MAX_SCREEN_SIZE = 512
"""the largest observation side an Atari option may ask for (the screen is 210x160: more only
costs memory, and a mistyped 4000 asked for 32 GB)"""
MAX_FRAME_STACK = 64
"""the most frames an Atari observation may stack"""


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


@cache
def expected_rom_md5() -> dict[str, str]:
    """ale-py's list of the ROMs it supports: file name (``pong.bin``) -> MD5 digest."""
    import ale_py

    return dict(json.loads((Path(ale_py.__file__).parent / "roms" / "md5.json").read_text()))


def rom_folder_problem(folder: Path) -> str | None:
    """Why a user's ROM folder cannot be played (None if it can): a ROM file there, under a
    name ale-py supports (in the folder, ``roms/`` or ``ROM/<game>/``, where PettingZoo
    looks), whose content is not that ROM. The emulator picks a game's settings by the file
    name and then hangs for ever (deaf to signals) or exits the process on another file."""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return (f"{folder} {what}: name the folder holding the ROMs, or drop rom_dir to play "
                "the ROMs that ship with ale-py")
    expected = expected_rom_md5()
    candidates = [*folder.glob("*.bin"), *folder.glob("roms/*.bin"), *folder.glob("ROM/*/*.bin")]
    for path in sorted(candidates):
        want = expected.get(path.name)
        if want is None:
            continue
        try:
            digest = hashlib.md5(path.read_bytes()).hexdigest()
        except OSError as exc:
            return f"cannot read ROM {path}: {exc.strerror or exc}"
        if digest != want:
            return (f"{path} is not the {path.stem} ROM ale-py supports (MD5 {digest}, "
                    f"expected {want}): replace it with the original, or drop "
                    "game.options.rom_dir to play the ROMs that ship with ale-py")
    return None
