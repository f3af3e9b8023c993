"""DAgger's student seats: which imitated seats of a live teacher game the network plays itself.

Behaviour cloning learns only the positions its teachers reach; a clone's own mistakes take it
where no label was given. With ``bc.student_share`` the network being trained plays a share of
the imitated seats (sampled moves) while the teachers go on labelling every position it reaches
(Ross, Gordon and Bagnell 2011). The seats are drawn per game: when an env's game ends, each of
its seats becomes a student's for the whole next game with probability of the current share
(``bc.student_share``, reached linearly over the first ``bc.student_ramp`` of the run), so the
games a student plays are its own from start to end, and their outcomes say how the clone plays
(``students/win_rate``: against the teachers on the other seats; in games whose seats name
their players, :class:`~games.core.HasSeatPlayers`, also ``students/win_rate/<opponent>``
against each teacher, and ``students/win_rate/students`` where both seats were the network's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from games.core import Batch, HasSeatPlayers, SupportsStudents, VecGame
from selfplay.bc_config import BCConfig
from selfplay.networks import ActorCritic
from selfplay.run_metrics import EpisodeLog

STUDENTS = "students"
"""the opponent's name in ``students/win_rate/<opponent>`` where both seats were the network's"""


class Students:
    """The student seats of ``game``'s current games, their draws and their games' outcomes."""

    def __init__(self, bc: BCConfig, game: VecGame, seed: int, window: int) -> None:
        assert isinstance(game, SupportsStudents)
        self.game = game
        self.share_max, self.ramp = bc.student_share, bc.student_ramp
        self.gen = torch.Generator().manual_seed(seed)
        shape = (game.spec.num_envs, game.spec.num_seats)
        self.seats = np.zeros(shape, bool)
        """``bool [E, A]`` the seats the network plays in the current games where imitated"""
        self.played = np.zeros(shape, bool)
        """``bool [E, A]`` seats on which the network has played a move of the current game"""
        self.steps = 0
        """seat-steps the network has played so far"""
        self.episodes = EpisodeLog(window)
        # the students' games by opponent: the teacher on the other seat, or "students"
        self.opponents = (game.seat_players[:, ::-1] if isinstance(game, HasSeatPlayers)
                          and game.spec.num_seats == 2 else None)  # [E, A]
        self.by_opponent = {name: EpisodeLog(window) for name in (
            [*sorted(set(self.opponents.ravel())), STUDENTS] if self.opponents is not None
            else [])}

    def share(self, progress: float) -> float:
        """The share of seats drawn as students at ``progress`` (0 to 1) of the run."""
        if self.ramp <= 0:
            return self.share_max
        return self.share_max * min(1.0, progress / self.ramp)

    def draw(self, envs: np.ndarray, progress: float) -> None:
        """New games in ``envs``: draw their student seats and hand them to the game."""
        if not len(envs):
            return
        seats = torch.rand((len(envs), self.seats.shape[1]), generator=self.gen)
        self.seats[envs] = (seats < self.share(progress)).numpy()
        self.played[envs] = False
        self.game.let_students_play(self.seats)

    def moving(self, imitated: np.ndarray) -> np.ndarray:
        """``bool [E, A]`` the seats whose move at this step is the network's."""
        rows = self.seats & imitated
        self.played |= rows
        self.steps += int(rows.sum())
        return rows

    def stepped(self, batch: Batch, progress: float) -> None:
        """After a step: the students' finished games counted, the ended envs' next games'
        seats drawn."""
        if len(batch.episodes.env):
            self.episodes.add(batch.episodes, self.played)
            if self.opponents is not None:
                selfplay = self.played & self.played[:, ::-1]  # both seats the network's
                for name, log in self.by_opponent.items():
                    against = selfplay if name == STUDENTS else (
                        (self.opponents == name) & ~selfplay)
                    log.add(batch.episodes, self.played & against)
        self.draw(np.flatnonzero(batch.terminated | batch.truncated), progress)

    def metrics(self, progress: float) -> dict[str, float]:
        """``bc/student_share``, ``bc/student_seat_steps`` and the students' recent games."""
        out = {"bc/student_share": self.share(progress),
               "bc/student_seat_steps": float(self.steps)}
        summary = self.episodes.summary()
        out["students/games"] = summary.pop("episodes")
        out.update({f"students/{key.removeprefix('episode/')}": value
                    for key, value in summary.items()})
        for name, log in self.by_opponent.items():
            games = log.summary()
            out[f"students/games/{name}"] = games["episodes"]
            if "episode/win_rate" in games:
                out[f"students/win_rate/{name}"] = games["episode/win_rate"]
        return out

    def sample(self, agent: ActorCritic, obs: np.ndarray, mask: np.ndarray | None,
               device: torch.device) -> np.ndarray:
        """Moves the network ``agent`` samples for rows ``obs`` (``mask``)."""
        with torch.no_grad():
            obs_t = agent.normalize_obs(torch.from_numpy(obs).to(device))
            mask_t = torch.from_numpy(mask).to(device) if mask is not None else None
            return agent.dist(obs_t, mask_t).sample(self.gen).cpu().numpy()

    def state_dict(self) -> dict[str, Any]:
        return {"seats": self.seats.copy(), "played": self.played.copy(), "steps": self.steps,
                "gen": self.gen.get_state(), "episodes": self.episodes.state_dict(),
                "by_opponent": {name: log.state_dict()
                                for name, log in self.by_opponent.items()}}

    def load_state_dict(self, state: dict[str, Any], games_restored: bool,
                        progress: float) -> None:
        """Restore the draws and counts; the seats too where the games were restored, else
        the new games' seats are drawn."""
        self.gen.set_state(state["gen"])
        self.steps = int(state["steps"])
        self.episodes.load_state_dict(state["episodes"])
        for name, saved in state.get("by_opponent", {}).items():  # (none in older checkpoints)
            if name in self.by_opponent:
                self.by_opponent[name].load_state_dict(saved)
        if games_restored:
            self.seats[:] = np.asarray(state["seats"], bool)
            self.played[:] = np.asarray(state["played"], bool)
            self.game.let_students_play(self.seats)
        else:
            self.draw(np.arange(len(self.seats)), progress)
