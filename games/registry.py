"""Game registry: ``--game NAME`` resolves to an adapter factory, imported lazily.

Names are case-insensitive. A family (``classic``, ``mujoco``, ``atari``, ``microrts``, ...)
names the hyperparameter file ``hyperparams/<family>.yaml``. Families with a prefix
(``atari/Pong``) accept any game of their engine; the rest are listed one by one.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from games.core import GameError, VecGame


@dataclass(frozen=True)
class GameEntry:
    name: str  # canonical name, e.g. "CartPole-v1" or "atari/Pong"
    family: str  # hyperparams/<family>.yaml
    factory: str  # "module:function" called as factory(name, num_envs=..., seed=..., **options)
    summary: str = ""


_CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
            "MountainCarContinuous-v0"]
_MUJOCO = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5",
           "HumanoidStandup-v5", "Swimmer-v5", "Reacher-v5", "Pusher-v5",
           "InvertedPendulum-v5", "InvertedDoublePendulum-v5"]

_ENTRIES: dict[str, GameEntry] = {}
# prefix -> (family, factory, summary); any "<prefix>/<game>" name goes to that factory
_PREFIXES: dict[str, tuple[str, str, str]] = {}
# prefix -> "module:function" mapping the part after the prefix to its canonical spelling
_CANONICAL: dict[str, str] = {}
# short aliases -> canonical names
_ALIASES: dict[str, str] = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1",
                            "halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5"}


def register(entry: GameEntry) -> None:
    _ENTRIES[entry.name.lower()] = entry


def register_prefix(prefix: str, family: str, factory: str, summary: str = "",
                    canonical: str | None = None) -> None:
    """Send ``<prefix>/<game>`` names to ``factory``; ``canonical`` ("module:function") maps
    ``<game>`` to its canonical spelling (so aliases share hyperparameters and run names)."""
    _PREFIXES[prefix.lower()] = (family, factory, summary)
    if canonical is not None:
        _CANONICAL[prefix.lower()] = canonical


def _canonical_rest(prefix: str, rest: str) -> str:
    """``rest`` as the prefix's family spells it; unchanged when that family is not installed
    (the factory then reports what is missing)."""
    target = _CANONICAL.get(prefix)
    if target is None:
        return rest
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return rest
    return str(getattr(module, attr)(rest))


for _name in _CLASSIC:
    register(GameEntry(_name, "classic", "games.gym.classic:make", "gymnasium classic control"))
for _name in _MUJOCO:
    register(GameEntry(_name, "mujoco", "games.gym.mujoco:make", "MuJoCo continuous control"))
register_prefix("atari", "atari", "games.gym.atari:make",
                "single-agent Atari through ale-py, e.g. atari/Pong, atari/Breakout")
register(GameEntry("microrts", "microrts", "games.microrts:make",
                   "microRTS real-time strategy (Java engine through JPype)"))
register(GameEntry("tictactoe", "boardgames", "games.boardgames:make",
                   "vectorized numpy tic-tac-toe, two seats, zero-sum (fast test game)"))
register_prefix("pettingzoo", "pettingzoo", "games.pettingzoo:make",
                "two-player PettingZoo Atari, e.g. pettingzoo/pong_v3",
                canonical="games.pettingzoo.catalog:canonical_name")


def known_games() -> list[str]:
    """Every registered name, prefixes shown as ``prefix/<game>``."""
    names = sorted(e.name for e in _ENTRIES.values())
    names += [f"{p}/<game>" for p in sorted(_PREFIXES)]
    return names


def resolve(name: str) -> GameEntry:
    """The registry entry for ``name``; :class:`GameError` listing known games otherwise."""
    key = _ALIASES.get(name.lower(), name).lower()
    if key in _ENTRIES:
        return _ENTRIES[key]
    prefix, sep, rest = name.partition("/")
    if sep and rest and prefix.lower() in _PREFIXES:
        family, factory, summary = _PREFIXES[prefix.lower()]
        rest = _canonical_rest(prefix.lower(), rest)
        return GameEntry(f"{prefix.lower()}/{rest}", family, factory, summary)
    candidates = [e.name for e in _ENTRIES.values()] + list(_ALIASES)
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise GameError(f"unknown game {name!r}{hint}; known: {', '.join(known_games())}")


def load_factory(entry: GameEntry) -> Callable[..., VecGame]:
    module_name, _, attr = entry.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in {"games", "selfplay"}:
            raise GameError(f"game family {entry.family!r} is not available in this "
                            f"version of selfplay ({exc.name} missing)") from exc
        raise GameError(f"game {entry.name!r} needs the Python package {exc.name!r}; "
                        f"install it with: pip install 'selfplay[{entry.family}]'") from exc
    return getattr(module, attr)  # type: ignore[no-any-return]


def make_game(name: str, num_envs: int = 1, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> VecGame:
    """Build the adapter for ``name`` with ``num_envs`` environments."""
    entry = resolve(name)
    factory = load_factory(entry)
    return factory(entry.name, num_envs=num_envs, seed=seed, **dict(options or {}))
