"""Game registry: ``--game NAME`` resolves to a family (:class:`games.family.Family`) and its
adapter factory, imported lazily.

Names are case-insensitive. A family names the hyperparameter file
``hyperparams/<family>.yaml``. Families with a prefix (``atari/Pong``) accept any game of their
engine; the rest list their games one by one. Each family is a module under ``games/`` listed in
:data:`FAMILY_MODULES`: adding a family is one line there.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from games.core import GameError, VecGame
from games.family import Family

FAMILY_MODULES = (  # each defines FAMILIES: a tuple of Family objects
    "games.gym.family",
    "games.microrts.family",
    "games.boardgames.family",
    "games.pettingzoo.family",
    "games.lux.family",
)


@dataclass(frozen=True)
class GameEntry:
    name: str  # canonical name, e.g. "CartPole-v1" or "atari/Pong"
    family: str  # hyperparams/<family>.yaml
    factory: str  # "module:function" called as factory(name, num_envs=..., seed=..., **options)
    summary: str = ""


@cache
def families() -> tuple[Family, ...]:
    """Every registered family, in registry order."""
    found: list[Family] = []
    for module_name in FAMILY_MODULES:
        found.extend(importlib.import_module(module_name).FAMILIES)
    return tuple(found)


def family_named(name: str) -> Family:
    """The family called ``name`` (``microrts``, ``classic``, ...)."""
    for fam in families():
        if fam.name == name.lower():
            return fam
    raise GameError(f"unknown game family {name!r}; known: "
                    f"{', '.join(f.name for f in families())}")


def _listed() -> dict[str, tuple[str, Family]]:
    """Lower-case names and aliases -> (canonical name, family)."""
    out: dict[str, tuple[str, Family]] = {}
    for fam in families():
        for game in fam.games:
            out[game.lower()] = (game, fam)
        for alias, game in fam.aliases.items():
            out[alias.lower()] = (game, fam)
    return out


def known_games() -> list[str]:
    """Every registered name, prefixes shown as ``prefix/<game>``."""
    names = sorted(game for fam in families() for game in fam.games)
    names += [f"{p}/<game>" for p in sorted(f.prefix for f in families() if f.prefix)]
    return names


def family_of(name: str) -> Family:
    """The family of game ``name``; :class:`GameError` listing known games otherwise."""
    return _resolve(name)[1]


def resolve(name: str) -> GameEntry:
    """The registry entry for ``name``; :class:`GameError` listing known games otherwise."""
    game, fam = _resolve(name)
    return GameEntry(game, fam.name, fam.factory, fam.summary)


def _resolve(name: str) -> tuple[str, Family]:
    listed = _listed()
    if name.lower() in listed:
        return listed[name.lower()]
    prefix, sep, rest = name.partition("/")
    if sep and rest:
        for fam in families():
            if fam.prefix == prefix.lower():
                return f"{fam.prefix}/{fam.canonical(rest)}", fam
    close = difflib.get_close_matches(name, list({g for g, _ in listed.values()}) +
                                      [a for f in families() for a in f.aliases], n=3,
                                      cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise GameError(f"unknown game {name!r}{hint}; known: {', '.join(known_games())}")


def make_game(name: str, num_envs: int = 1, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> VecGame:
    """Build the adapter for ``name`` with ``num_envs`` environments."""
    game, family = _resolve(name)
    return family.make(game, num_envs, seed, options)
