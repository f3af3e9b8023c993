"""Any family's game on workers: each worker builds its envs with the family's own
:meth:`~games.family.Family.make`, so games without worker processes of their own (Lux on JAX,
Atari, tic-tac-toe) run on Ray actors too (``distributed.backend: ray``,
``distributed.workers``).

Worker ``w`` holding envs ``start..stop-1`` builds ``stop - start`` envs seeded ``seed +
start``: each worker draws its own games, so a run on workers plays other games than one
process with the same seed (microRTS, whose envs are seeded by their index, has workers of its
own that do play the same games). The reward components of the family, if any, are forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from games.core import HasRewardComponents, VecGame
from games.workers.host import WorkerRecipe
from games.workers.vec import Launcher, WorkerVecGame, split_ranges


def build_part(envs: tuple[int, int], game: str, options: Mapping[str, Any],
               seed: int | None) -> tuple[VecGame, Mapping[str, Callable[..., Any]]]:
    """A worker's envs ``envs`` of ``game``, built by its family; the command
    ``reward_component_names``."""
    from games.registry import make_game

    start, stop = envs
    part = make_game(game, num_envs=stop - start, seed=None if seed is None else seed + start,
                     options=options)
    names = (tuple(part.reward_component_names) if isinstance(part, HasRewardComponents)
             else None)
    return part, {"reward_component_names": lambda *_: names}


class FamilyWorkers(WorkerVecGame):
    """``num_envs`` envs of ``game`` over ``workers`` workers that ``launcher`` starts."""

    def __init__(self, game: str, num_envs: int, seed: int | None, options: Mapping[str, Any],
                 workers: int, launcher: Launcher, family: str) -> None:
        recipes = [WorkerRecipe("games.workers.generic:build_part", envs,
                                {"game": game, "options": dict(options), "seed": seed},
                                family=family)
                   for envs in split_ranges(num_envs, workers)]
        transport = launcher(recipes, num_envs)
        try:
            transport.send(0, "reward_component_names")
            names = transport.receive(0)
        except BaseException:
            transport.close()
            raise
        super().__init__(transport, None, family, len(names) if names else 0)
        if names:  # the capability, where the family's game has it
            self.reward_component_names: tuple[str, ...] = names
