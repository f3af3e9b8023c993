"""Which PettingZoo Atari games exist, how to name them, and where their ROMs are.

Names follow PettingZoo: ``pettingzoo/pong_v3`` (also accepted: ``pong_v3``, ``pong-v3``,
``atari/pong_v3`` and the bare ``pong``, which means the current version). The list comes from
the installed PettingZoo package (its ``pettingzoo/atari/<game>_v<N>.py`` modules); the
two-player ones are every game but the four-player-only ``quadrapong`` and ``warlords``.

The ROMs are the ones bundled in the ale-py wheel (``ale_py/roms/*.bin``), handed to PettingZoo
through its ``auto_rom_install_path``; AutoROM (which downloads them) is never needed.

:func:`builtin_opponent_games` lists the games whose ROM, run in a single-player mode, has the
console play the other side (Pong's CPU paddle, Boxing's CPU boxer, ...).
"""

from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Literal

from games.ale_roms import single_player_games
from games.core import GameError

Kind = Literal["competitive", "mixed", "cooperative"]

# PettingZoo's own classification (each game's docstring). In competitive games a point for one
# seat is a point against the other, so the seat with the higher return wins; timed-serve
# penalties (pong family, tennis, double dunk, othello, video checkers) are the only rewards
# that are not zero-sum. Mixed and cooperative games have no winner (Outcome.NONE).
_KINDS: dict[str, Kind] = {
    "basketball_pong": "competitive",
    "boxing": "competitive",
    "combat_plane": "competitive",
    "combat_tank": "competitive",
    "double_dunk": "competitive",
    "entombed_competitive": "competitive",
    "entombed_cooperative": "cooperative",
    "flag_capture": "competitive",
    "foozpong": "competitive",
    "ice_hockey": "competitive",
    "joust": "mixed",
    "mario_bros": "mixed",
    "maze_craze": "competitive",
    "othello": "competitive",
    "pong": "competitive",
    "space_invaders": "mixed",
    "space_war": "competitive",
    "surround": "competitive",
    "tennis": "competitive",
    "video_checkers": "competitive",
    "volleyball_pong": "competitive",
    "wizard_of_wor": "mixed",
}
# Games whose ROM has a single-player mode in which the console plays the other side, as
# (PettingZoo's two-player mode, the single-player mode of the same variant), in the mode
# numbers of multi_agent_ale_py (``getAvailableModes(1)``). ale-py numbers them differently
# and plays the same game (its Pong modes 0 and 1 are these 1 and 2: equal screens up to a
# 2-frame shift after reset). How they were found: random play in every game's single-player
# modes; only these gave negative rewards, the console scoring against the player
# (entombed, flag_capture, space_war, joust, mario_bros, space_invaders and wizard_of_wor
# play alone there; combat and maze_craze have no single-player mode; basketball_pong,
# foozpong and volleyball_pong share pong.bin, whose single-player modes are classic Pong
# only). The single-player mode is the one whose RAM after reset differs least from the
# two-player mode's (pong: mode 2 shares mode 4's variant bit, mode 1 does not); othello,
# surround and video_checkers tie, and their first single-player mode (the computer's first
# skill level; ale-py's default) is used.
_BUILTIN_MODES: dict[str, tuple[int, int]] = {
    "boxing": (2, 1),
    "double_dunk": (16, 0),
    "ice_hockey": (1, 0),
    "othello": (4, 1),
    "pong": (4, 2),
    "surround": (1, 2),
    "tennis": (2, 1),
    "video_checkers": (10, 1),
}
FOUR_PLAYER_ONLY = frozenset({"quadrapong", "warlords"})
# ROMs that PettingZoo plays under other names
_ROM_GAMES = {"combat": ("combat_plane", "combat_tank"),
              "entombed": ("entombed_competitive", "entombed_cooperative")}
ROM_PACKAGE = "ale-py"
_NAME = re.compile(r"^([a-z0-9_]+?)_v(\d+)$")


@dataclass(frozen=True)
class GameInfo:
    """One PettingZoo Atari game."""

    name: str  # "pong_v3"
    base: str  # "pong": the PettingZoo module pettingzoo.atari.<base>.<base>
    kind: Kind

    @property
    def registry_name(self) -> str:
        return f"pettingzoo/{self.name}"

    def module(self) -> ModuleType:
        """PettingZoo's module defining ``raw_env`` (imported without deprecation warnings)."""
        return importlib.import_module(f"pettingzoo.atari.{self.base}.{self.base}")


@cache
def pettingzoo_atari_games() -> dict[str, str]:
    """Every PettingZoo Atari env of the installed version: base name -> versioned name."""
    games: dict[str, str] = {}
    for entry in resources.files("pettingzoo.atari").iterdir():
        match = _NAME.match(entry.name.removesuffix(".py"))
        if entry.name.endswith(".py") and match:
            games[match.group(1)] = entry.name.removesuffix(".py")
    return games


def two_player_games() -> list[str]:
    """Versioned names of the two-player PettingZoo Atari games, e.g. ``["boxing_v2", ...]``."""
    return sorted(v for b, v in pettingzoo_atari_games().items() if b not in FOUR_PLAYER_ONLY)


def builtin_opponent_games() -> list[str]:
    """Versioned names of the games with a built-in single-player opponent, e.g.
    ``["boxing_v2", ..., "pong_v3", ...]`` (see ``builtin_opponent_share`` in the options)."""
    games = pettingzoo_atari_games()
    return sorted(games[b] for b in _BUILTIN_MODES if b in games)


def builtin_opponent_mode(info: GameInfo, two_player_mode: int) -> int:
    """The single-player mode in which the console plays seat 1 of ``info`` (played in
    ``two_player_mode``); :class:`GameError` when the game or its variant has none."""
    modes = _BUILTIN_MODES.get(info.base)
    if modes is None:
        known = ", ".join(f"pettingzoo/{n}" for n in builtin_opponent_games())
        raise GameError(f"{info.registry_name} has no built-in single-player opponent; set "
                        f"builtin_opponent_share: 0, or train one of {known}")
    if modes[0] != two_player_mode:
        raise GameError(f"{info.registry_name}: the built-in opponent plays only the default "
                        f"variant (mode {modes[0]}), not mode {two_player_mode}; drop "
                        "game_kwargs or set builtin_opponent_share: 0")
    return modes[1]


def rom_directory() -> Path:
    """The ROM folder bundled with ale-py."""
    try:
        import ale_py
    except ModuleNotFoundError as exc:
        raise GameError(f"the Atari ROMs ship with the {ROM_PACKAGE} package, which is not "
                        "installed: pip install 'selfplay[pettingzoo]'") from exc
    return Path(ale_py.__file__).resolve().parent / "roms"


def _known() -> str:
    return ", ".join(f"pettingzoo/{n}" for n in two_player_games())


def resolve(name: str) -> GameInfo:
    """The game named ``name``; :class:`GameError` naming the known games otherwise."""
    key = name.strip().lower()
    for prefix in ("pettingzoo/", "atari/"):
        key = key.removeprefix(prefix)
    key = key.replace("-", "_")
    games = pettingzoo_atari_games()
    match = _NAME.match(key)
    base = match.group(1) if match else key
    if base in games and (match is None or games[base] == key):
        if base in FOUR_PLAYER_ONLY:
            raise GameError(f"{games[base]} is a four-player game; this adapter plays the "
                            f"two-player PettingZoo Atari games: {_known()}")
        return GameInfo(games[base], base, _KINDS.get(base, "mixed"))
    if base in games:
        raise GameError(f"PettingZoo {_pettingzoo_version()} has {games[base]}, not {key}; "
                        f"use pettingzoo/{games[base]}")
    if base in _ROM_GAMES:
        variants = " or ".join(f"pettingzoo/{games[b]}" for b in _ROM_GAMES[base] if b in games)
        raise GameError(f"PettingZoo plays {base} as {variants}")
    single = _single_player_games().get(base.replace("_", ""))
    if single is not None:
        raise GameError(f"{base} is a one-player Atari game (PettingZoo has no two-player "
                        f"version); train it with --game atari/{single}")
    close = difflib.get_close_matches(key, [*games.values(), *games], n=4, cutoff=0.6)
    names = list(dict.fromkeys(f"pettingzoo/{games.get(c, c)}" for c in close))
    hint = f" (did you mean {', '.join(names)}?)" if names else ""
    raise GameError(f"unknown PettingZoo Atari game {name!r}{hint}; two-player games: "
                    f"{_known()}")


def canonical_name(name: str) -> str:
    """The versioned PettingZoo name of ``name`` (``pong`` -> ``pong_v3``); raises
    :class:`GameError` for unknown games."""
    return resolve(name).name


def _single_player_games() -> dict[str, str]:
    """ale-py's one-player games: lower-case key without separators -> CamelCase name."""
    try:
        return single_player_games()
    except ModuleNotFoundError:  # gymnasium's Atari support missing: no hint
        return {}


def _pettingzoo_version() -> str:
    import pettingzoo

    return str(pettingzoo.__version__)
