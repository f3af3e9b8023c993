"""A worker's side: the envs it builds from its recipe and the commands it answers.

The recipe is plain values (it crosses a process or a network): the dotted name of a builder
function, its keyword arguments and the worker's env range. The builder returns the worker's
:class:`~games.core.VecGame` and the extra commands the family's parent side may send (for
microRTS, ``set_bot``); the host answers ``reset``, ``step``, ``render``, ``render_final`` and
those. Both transports (:mod:`games.workers.local`, :mod:`games.workers.ray_workers`) drive
the same host.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from games.core import (
    Batch,
    GameError,
    HasRewardComponents,
    SupportsFinalFrame,
    SupportsRender,
    VecGame,
)

Builder = Callable[..., tuple[VecGame, Mapping[str, Callable[..., Any]]]]
"""``builder(envs=(start, stop), **kwargs) -> (game, extra commands)``"""


@dataclass(frozen=True)
class WorkerRecipe:
    """How one worker builds its envs: ``builder`` (``"module:function"``) called with
    ``envs`` and ``kwargs``."""

    builder: str
    envs: tuple[int, int]
    kwargs: dict[str, Any] = field(default_factory=dict)
    family: str = "game"
    """the name errors begin with (``microrts: ...``)"""


class Part(NamedTuple):
    """A worker's answer to ``reset`` or ``step``: its envs' batch (envs numbered from 0
    within the worker) and the reward components of the episodes that ended."""

    batch: Batch
    components: np.ndarray | None
    token: object = None
    """what the transport needs to join parts (the shared buffer set for local workers)"""


def describe(exc: BaseException) -> str:
    """An exception as the one line a parent reports: a :class:`GameError`'s message, else
    its type and message."""
    return str(exc) if isinstance(exc, GameError) else f"{type(exc).__name__}: {exc}"


def prefixed(family: str, message: str) -> str:
    """``message`` beginning with the family's name (once)."""
    return message if message.lower().startswith(family.lower()) else f"{family}: {message}"


class GameHost:
    """The envs of one recipe, answering commands."""

    def __init__(self, recipe: WorkerRecipe) -> None:
        module_name, _, attr = recipe.builder.partition(":")
        builder: Builder = getattr(importlib.import_module(module_name), attr)
        self.recipe = recipe
        self.game, self.extra = builder(envs=recipe.envs, **recipe.kwargs)

    @property
    def spec(self) -> Any:
        return self.game.spec

    def reset(self, seed: int | None) -> Part:
        return Part(self.game.reset(seed), None)

    def step(self, actions: np.ndarray) -> Part:
        batch = self.game.step(actions)
        game = self.game
        components = (game.episode_reward_components()
                      if isinstance(game, HasRewardComponents) else None)
        return Part(batch, components)

    def render(self, final: bool, env: int) -> np.ndarray:
        game = self.game
        if final and isinstance(game, SupportsFinalFrame):
            return np.asarray(game.render_final(env))
        if not final and isinstance(game, SupportsRender):
            return np.asarray(game.render(env))
        raise GameError(f"{self.recipe.family}: this game does not draw "
                        f"{'final frames' if final else 'frames'}")

    def call(self, command: str, arg: Any) -> Any:
        """One of the builder's extra commands, with ``arg`` unpacked when a tuple."""
        if command not in self.extra:
            raise GameError(f"unknown worker command {command!r}")
        args = arg if isinstance(arg, tuple) else (arg,)
        return self.extra[command](*args)

    def close(self) -> None:
        self.game.close()
