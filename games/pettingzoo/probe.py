"""A game's ROM, game mode and action set, read from PettingZoo's own env for it.

PettingZoo's ``raw_env`` knows each game's ROM and translates its variant arguments
(``game_version``, ``guided_missile``, ...) into an ALE game mode; building it once (two ROM
loads) tells the adapter how to set up its own emulators. Results are cached per process.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from games.ale_roms import rom_folder_problem
from games.core import GameError
from games.pettingzoo.catalog import ROM_PACKAGE, GameInfo, rom_directory

NUM_SEATS = 2
# raw_env arguments the adapter sets itself
_RESERVED = {"num_players", "auto_rom_install_path", "obs_type", "full_action_space",
             "max_cycles", "render_mode", "seed", "mode_num", "env_name", "game"}
_CACHE: dict[tuple[str, str, str, bool], GameSetup] = {}


@dataclass(frozen=True)
class GameSetup:
    rom_path: Path
    mode: int
    action_mapping: tuple[int, ...]  # agent action -> ALE action code


def game_setup(info: GameInfo, rom_dir: Path, game_kwargs: Mapping[str, Any],
               full_action_space: bool) -> GameSetup:
    """The set-up of ``info`` with variant arguments ``game_kwargs`` (GameError if bad)."""
    key = (info.name, str(rom_dir), repr(sorted(game_kwargs.items())), full_action_space)
    if key not in _CACHE:
        _CACHE[key] = _probe(info, rom_dir, game_kwargs, full_action_space)
    return _CACHE[key]


def _probe(info: GameInfo, rom_dir: Path, game_kwargs: Mapping[str, Any],
           full_action_space: bool) -> GameSetup:
    raw_env = info.module().raw_env
    params = {name for name, p in inspect.signature(raw_env).parameters.items()
              if p.kind is not inspect.Parameter.VAR_KEYWORD} - _RESERVED
    bad = sorted(set(game_kwargs) - params)
    if bad:
        allowed = ", ".join(sorted(params)) or "none"
        raise GameError(f"{info.registry_name}: unknown game_kwargs {bad}; allowed: {allowed}")
    lists = sorted(k for k, v in game_kwargs.items()
                   if not isinstance(v, str | int | float | bool) and v is not None)
    if lists:
        raise GameError(f"{info.registry_name}: game_kwargs {lists} must be single values "
                        f"(a string, number or boolean), got "
                        f"{', '.join(repr(game_kwargs[k]) for k in lists)}")
    if rom_dir.resolve() != rom_directory().resolve():  # a user's folder: check its ROMs
        problem = rom_folder_problem(rom_dir)
        if problem is not None:
            raise GameError(f"{info.registry_name}: game.options.rom_dir: {problem}")
    kwargs = dict(game_kwargs)
    if "num_players" in inspect.signature(raw_env).parameters:
        kwargs["num_players"] = NUM_SEATS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = raw_env(auto_rom_install_path=str(rom_dir),
                          full_action_space=full_action_space, **kwargs)
    except OSError as exc:
        reason = str(exc).split(". Please install roms")[0]  # PettingZoo's AutoROM advice
        raise GameError(f"{info.registry_name}: ROM not found in {rom_dir} ({reason}). The ROMs "
                        f"ship with the {ROM_PACKAGE} package (pip install "
                        f"'{ROM_PACKAGE}>=0.9'); AutoROM is not needed") from exc
    except (AssertionError, TypeError, ValueError) as exc:
        raise GameError(f"{info.registry_name}: bad game_kwargs {dict(game_kwargs)}: "
                        f"{exc}") from exc
    base = getattr(env, "env", env)  # parallel_to_aec_wrapper -> ParallelAtariEnv
    base.close()
    if base.num_players != NUM_SEATS:
        raise GameError(f"{info.registry_name} has {base.num_players} players; only "
                        "two-player games are supported")
    return GameSetup(Path(base.rom_path), int(base.mode),
                     tuple(int(a) for a in base.action_mapping))
