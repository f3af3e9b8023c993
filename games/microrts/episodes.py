"""Episode bookkeeping of :class:`~games.microrts.adapter.MicroRTSVecGame`: rewards, ends,
outcomes and the last observations of finished games.

Rewards are the engine's six components per seat (in Java order, :data:`JAVA_RFS
<games.microrts.engine_groups.JAVA_RFS>`), weighted and summed per episode. An env's episode
started at step ``start[e]`` of the step counter ``t``; truncation is checked only from step
``next_truncation = min(start) + max_steps`` on. The win/loss component is +-1 exactly when a
game is over (-1 for both players of a draw), so the engine's done flags are never read.
"""

from __future__ import annotations

import numpy as np

from games.core import EpisodeStats, Outcome
from games.microrts.conversions import Conversions
from games.microrts.engine_groups import CANON_FROM_JAVA, JAVA_WINLOSS, EngineGroups
from games.microrts.options import REWARD_COMPONENTS, MicroRTSOptions


def no_components() -> np.ndarray:
    """``float64 [0, 6]``: the per-component returns of a step where no episode ended."""
    return np.zeros((0, len(REWARD_COMPONENTS)))


class Episodes:
    """Reward buffers and the episodes in progress of ``engine``'s envs (the step itself reads
    and writes the arrays; this class handles resets and ends)."""

    def __init__(self, engine: EngineGroups, conversions: Conversions,
                 options: MicroRTSOptions) -> None:
        self._engine, self._conversions = engine, conversions
        self.alive = engine.alive
        num_envs, num_seats = engine.players.shape
        self.num_envs, self.num_seats = num_envs, num_seats
        self._options = options
        # reward weights in the engine's component order (rewards are read in that order)
        self.weights = np.zeros(len(REWARD_COMPONENTS))
        self.weights[CANON_FROM_JAVA] = options.reward_weights
        self.reward = [np.zeros((num_envs, num_seats), np.float32) for _ in range(2)]
        self.reward_slots = [r.reshape(num_envs * num_seats) for r in self.reward]  # [E*A]
        self.reward64 = np.zeros(num_envs * num_seats)  # [E*A]
        self.terminated = [np.zeros(num_envs, bool) for _ in range(2)]
        self.truncated = [np.zeros(num_envs, bool) for _ in range(2)]
        self.all_false = np.zeros(num_envs, bool)  # terminated/truncated of most steps
        self.all_false.setflags(write=False)
        self.raw = np.zeros((num_envs * num_seats, len(REWARD_COMPONENTS)))  # [E*A, 6] Java order
        self.raw_winloss = self.raw.reshape(num_envs, num_seats, -1)[:, 0, JAVA_WINLOSS]  # [E]

        self.t = 0
        self.start = np.zeros(num_envs, np.int64)  # [E]
        self.next_truncation = options.max_steps  # min(self.start) + max_steps
        self.component_sums = np.zeros_like(self.raw)  # [E*A, 6] Java order
        self.components = no_components()  # [K, 6] of the last batch's episodes, canonical

        self.final_obs = conversions.blank_boards()
        self.final_state = conversions.blank_boards() if options.partial_obs else None
        self.final_flip = 0
        self.final_flip_of = np.full(num_envs, -1, np.int64)  # [E] final buffer of the last end

    def last_components(self) -> np.ndarray:
        """``float64 [E, A, 6]`` raw components of the last step (a copy; canonical order)."""
        return self.raw[:, CANON_FROM_JAVA].reshape(self.num_envs, self.num_seats, -1)

    def reset(self) -> None:
        """Every env starts a game at step 0."""
        self.t = 0
        self.start[:] = 0
        self.next_truncation = self._options.max_steps
        self.component_sums[:] = 0
        self.raw[:] = 0
        self.final_flip_of[:] = -1  # render_final: no game of these has finished yet

    def restarted(self, envs: np.ndarray) -> None:
        """``envs`` abandoned their games for new ones (no statistics)."""
        rows = (envs[:, None] * self.num_seats + np.arange(self.num_seats)).ravel()
        self.component_sums[rows] = 0.0
        self.start[envs] = self.t
        self.next_truncation = int(self.start.min()) + self._options.max_steps

    def outcomes(self, envs: np.ndarray, terminated: np.ndarray) -> np.ndarray:
        """``int8 [len(envs), A]`` outcomes of finished envs: the engine's winner, or the
        timeout outcome. A +1 win/loss reward names the winner; only when every live seat got
        -1 (a loss to a bot, or a draw) is the engine asked."""
        timeout = Outcome.DRAW if self._options.timeout_outcome == "draw" else Outcome.NONE
        out = np.full((len(envs), self.num_seats), timeout, np.int8)
        win_loss = self.raw.reshape(self.num_envs, self.num_seats, -1)[envs, :, JAVA_WINLOSS]
        players = self._engine.players
        for i, e in enumerate(envs):
            if not terminated[e]:
                continue
            live = self.alive[e]
            if (win_loss[i] > 0).any():
                out[i, live] = np.where(win_loss[i, live] > 0, Outcome.WIN, Outcome.LOSS)
                continue
            winner = int(self._engine.game_state(int(e)).winner())
            for s in np.flatnonzero(live):
                out[i, s] = (Outcome.DRAW if winner < 0 else
                             Outcome.WIN if winner == players[e, s] else Outcome.LOSS)
        return out

    def final_observations(self, envs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last observations of finished envs, read before the engine resets them."""
        self.final_flip ^= 1
        self.final_flip_of[envs] = self.final_flip  # only these rows of that buffer change
        final_obs = self.final_obs[self.final_flip]
        plan = [c for e in envs for c in self._conversions.env_plans[e]]
        self._conversions.convert_obs(plan, final_obs)
        if self.final_state is None:
            return final_obs, final_obs
        final_state = self.final_state[self.final_flip]
        self._conversions.convert_obs(plan, final_state, "state")
        return final_obs, final_state

    def record(self, envs: np.ndarray, outcome: np.ndarray) -> EpisodeStats:
        """Statistics of the episodes of ``envs`` that ended at this step with ``outcome``
        ``[len(envs), A]``; their next episodes start now."""
        num_seats = self.num_seats
        live = self.alive[envs]  # [K, A]
        env_idx = np.repeat(envs, num_seats)[live.ravel()]
        seat_idx = np.tile(np.arange(num_seats), len(envs))[live.ravel()]
        rows = env_idx * num_seats + seat_idx
        sums = self.component_sums[rows]  # [K, 6] Java order
        episodes = EpisodeStats(env_idx, seat_idx, sums @ self.weights,
                                self.t - self.start[env_idx], outcome[live])
        self.components = sums[:, CANON_FROM_JAVA]
        self.component_sums[rows] = 0.0
        self.start[envs] = self.t
        self.next_truncation = int(self.start.min()) + self._options.max_steps
        return episodes

    def final_board(self, e: int) -> np.ndarray | None:
        """``uint8 [H, W, 30]``: the last position of env ``e``'s latest finished game, unfogged
        and unrotated, seen by seat 0 (``None`` if none has finished yet)."""
        flip = int(self.final_flip_of[e])
        if flip < 0:
            return None
        finals = self.final_state if self.final_state is not None else self.final_obs
        planes = finals[flip][e, 0]  # [30, H, W] unfogged, seen by seat 0
        if self._conversions.rotated[e, 0]:
            planes = planes[:, ::-1, ::-1]
        return planes.transpose(1, 2, 0)
