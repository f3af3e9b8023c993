"""Engine bots of bot envs drawn by PFSP per game (``league.bot_env_pfsp``).

In games whose bot envs have an engine bot as the opponent (one seat per env), each bot env's
next bot is drawn at each episode end by PFSP (``league.weighting``) over the learner's decayed
results against each bot, with a generator of its own. The engine has already started the env's
next game when the end is reported, so the bot drawn then (``set_bot``) plays the game after
it; every game is credited to the bot it was played against (the game's
``ended_opponent_names``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from games.core import EpisodeStats, HasOpponentNames, Outcome, SupportsBotSwap, VecGame
from league.matchmaking import Matchmaker
from selfplay.config import ConfigError

LEARNER = -1  # the learner's id in the matchmaker (not a database player)
ENGINE_BOT = -16  # payoff id of the first engine bot; ENGINE_BOT - k of bot k


class BotEnvDraws:
    """The bot of each bot env's game in progress and of its next one (payoff ids)."""

    def __init__(self, game: VecGame, bot_envs: np.ndarray, matchmaker: Matchmaker,
                 seed: int) -> None:
        if (not isinstance(game, SupportsBotSwap) or not isinstance(game, HasOpponentNames)
                or not game.bot_choices()):
            raise ConfigError(f"league.bot_env_pfsp: {game.spec.name} has no engine bots "
                              "playing in envs of their own; set league.bot_env_pfsp=false")
        self.game: Any = game  # SupportsBotSwap and HasOpponentNames
        self.names = game.bot_choices()
        self.envs = bot_envs  # [B]
        self.matchmaker = matchmaker
        self.rng = np.random.default_rng(seed + 23)
        e = game.spec.num_envs
        self.now = np.zeros(e, np.int64)  # [E] the bot of the game in progress (bot envs)
        self.next = np.zeros(e, np.int64)  # [E] the bot of the next game (set_bot's)

    def start(self, state: Mapping[str, Any] | None) -> None:
        """Each bot env's bot in progress (the game's: a resumed game restarted its envs with
        the layout's bots) and its next one: the checkpoint's draw, else a new one."""
        envs = self.envs
        names = list(self.game.opponent_names)
        self.now[envs] = [ENGINE_BOT - self.names.index(names[e]) for e in envs]
        if state is not None and list(state["names"]) == self.names:
            self.rng.bit_generator.state = state["rng"]
            self.next[envs] = np.asarray(state["next"])[envs]
            for env in envs.tolist():
                self._set(env, int(self.next[env]))
        else:
            self._draw(envs)

    def sample(self, n: int) -> np.ndarray:
        """PFSP picks ``int64 [n]`` of engine bots (payoff ids) for bot envs' next games."""
        ids = ENGINE_BOT - np.arange(len(self.names))
        return self.matchmaker.sample_among(ids, n, self.rng, learner=LEARNER)

    def name(self, pid: int) -> str:
        """The engine bot whose payoff id is ``pid``."""
        return self.names[ENGINE_BOT - pid]

    def _set(self, env: int, pid: int) -> None:
        self.game.set_bot(env, self.name(pid))
        self.next[env] = pid

    def _draw(self, envs: np.ndarray) -> None:
        """Draw the bot of the next game of bot envs ``envs`` ``[K]`` and hand it to them."""
        for env, pid in zip(envs.tolist(), self.sample(len(envs)).tolist(), strict=True):
            self._set(env, pid)

    def games_ended(self, stats: EpisodeStats, contested: np.ndarray) -> None:
        """Record the learner's finished games in bot envs against the bots they were played
        against; the next game (begun) is the drawn bot's, and the one after is drawn now."""
        ended = (stats.seat == 0) & ~contested[stats.env]
        envs = stats.env[ended]
        if len(envs) == 0:
            return
        for env, outcome in zip(envs.tolist(), stats.outcome[ended].tolist(), strict=True):
            if outcome != Outcome.NONE:
                self.matchmaker.record(LEARNER, int(self.now[env]), int(outcome))
        self.now[envs] = self.next[envs]
        self._draw(envs)

    def metrics(self) -> dict[str, float]:
        """Which bots the bot envs play now (``league/bot_env_share/<bot>``)."""
        if not len(self.envs):
            return {}
        counts = np.bincount(ENGINE_BOT - self.now[self.envs], minlength=len(self.names))
        return {f"league/bot_env_share/{name}": count / len(self.envs)
                for name, count in zip(self.names, counts.tolist(), strict=True)}

    def state_dict(self) -> dict[str, Any]:
        """The generator and each bot env's next bot (the game in progress is lost with the
        engine's process: a resumed run restarts it against the env layout's bot)."""
        return {"names": list(self.names), "rng": self.rng.bit_generator.state,
                "next": self.next.copy()}
