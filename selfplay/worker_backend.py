"""The game a run trains on, its workers where ``distributed.backend`` says: this machine's
processes (the family's own choice, as ``make_game`` builds it) or Ray actors."""

from __future__ import annotations

import sys

from games.core import VecGame
from games.registry import family_of, make_game
from games.workers.host import WorkerRecipe
from games.workers.vec import Transport
from selfplay.config import TrainConfig
from selfplay.data_parallel import world_from_environment


def build_game(config: TrainConfig, num_envs: int | None = None,
               seed: int | None = None, warnings: list[str] | None = None) -> VecGame:
    """``config``'s game with ``num_envs`` envs (default ``game.num_envs``) from ``seed``
    (default the run's): workers on Ray for ``distributed.backend: ray``. The family's
    warnings about the run's settings go into ``warnings`` (printed by the caller once the
    run starts), or are printed once the game is made."""
    game = config.game
    envs = game.num_envs if num_envs is None else num_envs
    seed = config.seed if seed is None else seed
    found = family_of(game.name).check_run(game.name, game.options, envs,  # this rank's envs
                                           config.league.enabled
                                           and config.league.bot_env_pfsp)
    made = _made(config, envs, seed)
    if warnings is None:
        print_warnings(found)
    else:
        warnings.extend(found)
    return made


def print_warnings(warnings: list[str]) -> None:
    """Each of ``warnings`` as a ``warning:`` line on stderr."""
    for text in warnings:
        print(f"warning: {text}", file=sys.stderr)


def _made(config: TrainConfig, envs: int, seed: int) -> VecGame:
    game, dist = config.game, config.distributed
    if dist.backend == "local":
        return make_game(game.name, num_envs=envs, seed=seed, options=game.options)
    from games.workers.generic import FamilyWorkers
    from games.workers.ray_cluster import connect
    from games.workers.ray_workers import RayWorkers

    session = connect(dist.address, dist.num_cpus, dist.object_store_mb, dist.connect_timeout_s)

    def launch(recipes: list[WorkerRecipe], total: int) -> Transport:
        return RayWorkers(recipes, total, session, max_restarts=dist.max_restarts,
                          cpus_per_worker=dist.worker_cpus,
                          sharing_runs=world_from_environment()[1])

    try:
        family = family_of(game.name)
        made = family.make_on_workers(game.name, envs, seed, game.options, launch)
        if made is not None:
            return made
        return FamilyWorkers(game.name, envs, seed, game.options, dist.workers, launch,
                             family.name)
    except BaseException:
        session.close()
        raise
