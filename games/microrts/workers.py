"""microRTS envs split over worker processes, one JVM each (``game.options.workers``).

One JVM steps its games on one thread (the engine's own ``threads`` option corrupts results),
so with more cores than one, envs are split into contiguous ranges, each stepped by a
:class:`~games.microrts.adapter.MicroRTSVecGame` in a worker (:mod:`games.workers`: a spawned
process on this machine, or a Ray actor with ``distributed.backend: ray``). Every worker builds
its range of the same layout (:func:`~games.microrts.adapter.env_layout`), so env ``e`` has the
same opponent, side and map whatever the number of workers.

A worker's engine error comes back as :class:`GameError` with the Java message; a worker that
dies is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.core import VecGame
from games.microrts import bots as bots_mod
from games.microrts.adapter import (
    REWARD_COMPONENTS,
    SELFPLAY,
    MicroRTSOptions,
    check_action_ranges,
    env_layout,
)
from games.microrts.engine import find_java
from games.microrts.maps import resolve_maps
from games.microrts.mixed_sizes import vec_game
from games.options import from_mapping, to_mapping
from games.workers.host import WorkerRecipe
from games.workers.vec import Launcher, Transport, WorkerVecGame, split_ranges

__all__ = ["MicroRTSWorkers", "build_part", "recipes", "split_ranges"]

def build_part(envs: tuple[int, int], options: dict[str, Any], num_envs: int,
               seed: int | None, name: str) -> tuple[VecGame, Mapping[str, Callable[..., Any]]]:
    """A worker's envs ``envs`` of the layout of ``options`` (the recipe's builder), with the
    ``set_bot`` command."""
    opts = from_mapping(MicroRTSOptions, {**options, "workers": 1}, "game.options.")
    game = vec_game(opts, num_envs, seed=seed, name=name, envs=envs)
    return game, {"set_bot": game.set_bot}


def recipes(options: MicroRTSOptions, num_envs: int, seed: int | None,
            name: str) -> list[WorkerRecipe]:
    """One recipe per worker of ``options.workers``."""
    mapping = to_mapping(options)
    return [WorkerRecipe("games.microrts.workers:build_part", envs,
                         {"options": mapping, "num_envs": num_envs, "seed": seed, "name": name},
                         family="microrts")
            for envs in split_ranges(num_envs, options.workers)]


def local_workers(recipes: list[WorkerRecipe], num_envs: int) -> Transport:
    from games.workers.local import LocalWorkers

    return LocalWorkers(recipes, num_envs)


class MicroRTSWorkers(WorkerVecGame):
    """``num_envs`` microRTS envs stepped by ``options.workers`` workers; the same interface
    and the same env layout as :class:`~games.microrts.adapter.MicroRTSVecGame` (``set_bot``
    is forwarded to the worker owning the env; ``opponent_names`` and ``ended_opponent_names``
    follow it here as each worker's games end)."""

    reward_component_names: tuple[str, ...] = REWARD_COMPONENTS

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts", launcher: Launcher = local_workers) -> None:
        layout = env_layout(options, num_envs)  # bad layouts fail here, before any start
        self.options = options
        self.players = layout.players
        self.opponent_names = [b.name if b is not None else SELFPLAY for b in layout.bots]
        map_infos = resolve_maps(options.maps or [options.map], same_size=False)
        self.env_map = [map_infos[k] for k in layout.maps]  # as the adapter's
        self.ended_opponent_names = list(self.opponent_names)  # as the adapter's
        self._pending_names: dict[int, str] = {}  # env -> bot set_bot gave its next game
        if launcher is local_workers:  # this machine's Java, found here: a JAVA_HOME passed
            find_java()  # over is named once, not by every worker (they inherit the flag)
        super().__init__(launcher(recipes(options, num_envs, seed, name), num_envs),
                         self.players >= 0, "microrts", len(REWARD_COMPONENTS))

    def _check_actions(self, actions: np.ndarray, start: int, stop: int) -> None:
        """Shapes, then every cell's ranges, before any worker steps (a worker refusing them
        left the others a cycle ahead)."""
        super()._check_actions(actions, start, stop)
        check_action_ranges(actions, np.arange(start, stop))

    def games_ended(self, envs: np.ndarray) -> None:
        """Envs whose game ended: their names move on, as the adapter's do (see
        ``ended_opponent_names``)."""
        for e in np.unique(envs).tolist():
            self.ended_opponent_names[e] = self.opponent_names[e]
            pending = self._pending_names.pop(e, None)
            if pending is not None:
                self.opponent_names[e] = pending

    def began(self) -> None:
        for e, name in self._pending_names.items():  # every env began a game
            self.opponent_names[e] = name
        self._pending_names.clear()

    def bot_choices(self) -> list[str]:
        """As :meth:`MicroRTSVecGame.bot_choices`."""
        return bots_mod.canonical_pool(list(self.options.bots))

    def set_bot(self, env: int, bot: str) -> str:
        """As :meth:`MicroRTSVecGame.set_bot` (from env ``env``'s next game on), in the worker
        owning the env, which must not be stepping unattended; the bot's canonical name."""
        name = str(self.call(env, "set_bot", (env - self._start(env), bot)))
        self._pending_names[env] = name
        return name

    def __enter__(self) -> MicroRTSWorkers:
        return self


