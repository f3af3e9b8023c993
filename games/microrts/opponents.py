"""Who each env of :class:`~games.microrts.adapter.MicroRTSVecGame` plays: the opponents' names
for logging, the bot swaps that ``set_bot`` schedules, and the seeds of the bots' games."""

from __future__ import annotations

from typing import Any

import numpy as np

from games.core import GameError
from games.microrts import bots as bots_mod
from games.microrts.engine_groups import EngineGroups
from games.microrts.options import SELFPLAY


class Opponents:
    """The opponents of ``engine``'s envs, whose bots are ``env_bot`` (``None``: self-play).

    ``names`` is each env's current opponent; ``ended`` the opponent of each env's last finished
    game, the one its episode statistics belong to (a swap takes over ``names`` as the next game
    starts, before the step reporting the end returns). ``env_ids``: each env's index in the
    whole layout (a worker's share, a size group), part of the bots' seeds."""

    def __init__(self, engine: EngineGroups, env_bot: list[str | None],
                 env_ids: np.ndarray) -> None:
        self._engine = engine
        self.env_bot = env_bot
        self.names = [b if b is not None else SELFPLAY for b in env_bot]
        self.ended = list(self.names)
        self.env_ids = env_ids
        self.games_started = np.zeros(len(env_bot), np.int64)  # per env, for bot seeds
        self._pending: dict[int, tuple[str, Any]] = {}  # env -> (name, Java bot)

    def choose(self, env: int, bot: str) -> str:
        """Schedule ``bot`` for bot env ``env``'s next game; its canonical name."""
        if not self._engine.is_bot_env(env):
            raise GameError(f"microrts: env {env} is a self-play game; it has no engine bot")
        spec = bots_mod.resolve_bot(bot)
        self._pending[env] = (spec.name, bots_mod.make_bot(spec, self._engine.utt))
        return spec.name

    def install(self, envs: np.ndarray) -> None:
        """Hand ``envs`` about to start a game the bots :meth:`choose` scheduled for them."""
        for e in envs.tolist():
            pending = self._pending.pop(e, None)
            if pending is not None:
                self._engine.set_bot(e, pending[1])
                self.env_bot[e] = pending[0]
                self.names[e] = pending[0]

    def seed(self, envs: np.ndarray, seed: int | None) -> None:
        """Seed the bots of the games just started in ``envs`` (nothing without a seed)."""
        if seed is None:
            return
        for e in envs.tolist():
            if self._engine.is_bot_env(e):
                entropy = (seed, int(self.env_ids[e]), int(self.games_started[e]))
                bot_seed = int(np.random.SeedSequence(entropy).generate_state(1)[0])
                bots_mod.seed_bot(self._engine.bot(e), bot_seed)
        self.games_started[envs] += 1

    def credit_ended(self, envs: np.ndarray) -> None:
        """The games of ``envs`` just ended: their statistics go to their current opponents."""
        for e in envs.tolist():
            self.ended[e] = self.names[e]
