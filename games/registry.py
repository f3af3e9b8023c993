"""Game registry: ``--game NAME`` resolves to a family (:class:`games.family.Family`) and its
adapter factory, imported lazily.

Names are case-insensitive. A family names the hyperparameter file
``hyperparams/<family>.yaml`` (or its own :attr:`Family.hyperparams`). Families with a prefix
(``atari/Pong``) accept any game of their engine; the rest list their games one by one.

Families come from the modules of :data:`FAMILY_MODULES` (selfplay's own) and from plugins:
the ``selfplay.families`` entry points of installed packages (``module`` or
``module:ATTRIBUTE``), and the modules named in ``$SELFPLAY_FAMILIES`` (comma-separated). A
module defines ``FAMILIES``, a sequence of :class:`Family` objects (an entry point's attribute
may be one family or such a sequence). A plugin that does not import, or whose names are taken,
is left out with a one-line warning; the others load.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Mapping, Sequence
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


ENTRY_POINT_GROUP = "selfplay.families"
PLUGINS_VARIABLE = "SELFPLAY_FAMILIES"
WARNED_VARIABLE = "SELFPLAY_PLUGIN_WARNINGS_SHOWN"
"""set by selfplay: the plugin warnings this process and its parents have printed"""


@cache
def families() -> tuple[Family, ...]:
    """Every registered family: selfplay's own, then the plugins' (see the module
    docstring)."""
    found: list[Family] = []
    for module_name in FAMILY_MODULES:
        found.extend(importlib.import_module(module_name).FAMILIES)
    seen: set[str] = set()
    for where, target in plugin_targets():
        if target in seen:  # named twice (an entry point and $SELFPLAY_FAMILIES): once
            continue
        seen.add(target)
        try:
            loaded = _load_plugin(target)
        except (Exception, SystemExit) as exc:  # a third party's module: one line, go on
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            _warn(f"game plugin {target} ({where}) is not loaded: {type(exc).__name__}"
                  f"{': ' + first if first else ''}")
            continue
        for fam in loaded:
            if any(f is fam for f in found):  # the same object through another name
                continue
            clash = _clash(fam, found)
            if clash is not None:
                _warn(f"game plugin family {fam.name!r} ({where}) is not loaded: {clash}")
                continue
            found.append(fam)
    return tuple(found)


def plugin_targets() -> list[tuple[str, str]]:
    """``(where it was named, "module[:ATTRIBUTE]")`` of every plugin, entry points first."""
    targets = [(f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP}", ep.value)
               for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    named = os.environ.get(PLUGINS_VARIABLE, "")
    targets += [(f"${PLUGINS_VARIABLE}", m.strip()) for m in named.split(",") if m.strip()]
    return targets


def _load_plugin(target: str) -> list[Family]:
    """The families of ``module`` (its ``FAMILIES``) or of ``module:ATTRIBUTE``."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute or "FAMILIES", None)
    if value is None:
        raise GameError(f"{module_name} defines no {attribute or 'FAMILIES'}")
    loaded = [value] if isinstance(value, Family) else (
        list(value) if isinstance(value, Sequence) else [value])
    wrong = [f for f in loaded if not isinstance(f, Family)]
    if wrong:
        raise GameError(f"{type(wrong[0]).__name__} is not a games.family.Family")
    for fam in loaded:
        if not fam.name or not fam.factory or ":" not in fam.factory:
            raise GameError(f"family {fam.name!r} needs a name and a factory 'module:function'")
    return loaded


def _clash(fam: Family, found: list[Family]) -> str | None:
    """Why ``fam`` cannot join ``found`` (a name, game, alias or prefix already taken, or a
    family name or prefix not in lower case, which names are compared in)."""
    for what, value in (("name", fam.name), ("prefix", fam.prefix or "")):
        if value != value.lower():
            return f"its {what} {value!r} must be lower case"
    if any(f.name == fam.name for f in found):
        return f"a family {fam.name!r} is already registered"
    taken = {g.lower() for f in found for g in (*f.games, *f.aliases)}
    prefixes = {f.prefix for f in found if f.prefix}
    for game in (*fam.games, *fam.aliases):
        if game.lower() in taken:
            return f"game name {game!r} is already taken"
        if game.partition("/")[1] and game.partition("/")[0].lower() in prefixes:
            return f"game name {game!r} is in the {game.partition('/')[0]!r} family's prefix"
    if fam.prefix:
        if fam.prefix in prefixes:
            return f"prefix {fam.prefix!r} is already taken"
        under = next((g for g in taken if g.startswith(f"{fam.prefix}/")), None)
        if under is not None:
            return f"prefix {fam.prefix!r} would take the registered game {under!r}"
    return None


def _warn(message: str) -> None:
    """Print a plugin's warning once per command: the processes it starts (workers, raters)
    load the registry again and inherit :data:`WARNED_VARIABLE`, which lists those shown."""
    key = hashlib.sha1(message.encode()).hexdigest()[:12]
    shown = [k for k in os.environ.get(WARNED_VARIABLE, "").split(",") if k]
    if key in shown:
        return
    os.environ[WARNED_VARIABLE] = ",".join([*shown, key])
    print(f"warning: {message}", file=sys.stderr)


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


def known_games(expand: bool = True) -> list[str]:
    """Every registered name; a prefix family's games as ``prefix/game`` where its engine
    lists them (``expand``), else as ``prefix/<game>``."""
    names = sorted(game for fam in families() for game in fam.games)
    for fam in sorted((f for f in families() if f.prefix), key=lambda f: str(f.prefix)):
        listed = fam.prefixed_games() if expand else []
        names += [f"{fam.prefix}/{game}" for game in listed] or [f"{fam.prefix}/<game>"]
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
    raise GameError(f"unknown game {name!r}{hint}; known: {', '.join(known_games(False))} (a "
                    f"plugin's game needs its package installed, or its module named in "
                    f"${PLUGINS_VARIABLE})")


def make_game(name: str, num_envs: int = 1, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> VecGame:
    """Build the adapter for ``name`` with ``num_envs`` environments."""
    game, family = _resolve(name)
    return family.make(game, num_envs, seed, options)
