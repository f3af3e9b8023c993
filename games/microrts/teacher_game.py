"""microRTS games whose seats teachers play: scripted bots thinking live, or recorded games
replayed through the engine (:class:`~games.core.SupportsTeachers`, for behaviour cloning).

A :class:`TeacherGame` is a :class:`~games.microrts.recording.RecordingGame` (self-play envs,
recordable) whose seats a :class:`TeacherSource` plays: every seat, or those of the sides the
source says it plays (a scripted opponent thinking for one side while the caller's policy
plays the other, so that the game replays exactly). After ``reset`` and each ``step`` the
source's orders for the state just reached are converted into the seats' action layout
(rotated where a seat sees the board rotated), and every order the seat's mask refuses becomes
a no-op, as the engine would make it: ``teacher_actions`` ``[E, A, HW, 7]`` are legal labels
at the observations returned, ``imitate`` ``bool [E, A]`` the seats whose labels count,
``teacher_seats`` ``bool [E, A]`` the seats the source plays. ``step`` then plays those
actions on the teachers' seats and the caller's on the others, so labels and games are the
same orders, with no extra engine step.

Both seats of a game are asked about the same position before either order is issued (the
engine then issues player 0's orders first, as in every self-play game of the adapter). A
label is what the teacher ordered and the mask allowed, which the engine may still cancel in a
same-cycle clash (player 1 moving onto a cell player 0 just claimed); a replay repeats the
same clash, so recordings stay exact.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from games.core import Batch, GameError
from games.microrts import bots as bots_mod
from games.microrts.adapter import random_legal_actions
from games.microrts.options import ACTION_NVEC, MicroRTSOptions
from games.microrts.orders import legal_rows, orders_to_rows
from games.microrts.recording import RecordingGame


class TeacherSource(Protocol):
    """Who plays a :class:`TeacherGame`'s seats."""

    def begin(self, game: TeacherGame, envs: np.ndarray) -> None:
        """Games just started in ``envs`` (all of them at ``reset``)."""
        ...

    def ended(self, game: TeacherGame, batch: Batch, envs: np.ndarray) -> None:
        """The games of ``envs`` ended on the step that returned ``batch`` (before
        :meth:`begin` hands those envs their next games)."""
        ...

    def orders(self, e: int, player: int, t: int) -> np.ndarray:
        """``int [K, 8]`` engine-frame orders ``[cell, *action]`` of ``player`` in env ``e``
        at step ``t`` of its game."""
        ...

    def plays(self, e: int, player: int) -> bool:
        """Whether the source plays ``player`` in env ``e``'s current game (otherwise the
        caller of ``step`` does)."""
        ...

    def imitated(self, e: int, player: int) -> bool:
        """Whether ``player``'s actions in env ``e``'s current game are labels to learn."""
        ...


def rotate_rows(cells: np.ndarray, actions: np.ndarray, num_cells: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Orders at ``cells`` ``[K]`` with ``actions`` ``[K, 7]`` seen rotated 180 degrees: cell
    ``i`` -> ``HW-1-i``, the used direction ``d`` -> ``(d+2) % 4``, attack ``k`` -> ``48-k``."""
    out = actions.copy()
    kind = out[:, 0]
    k = np.arange(len(out))
    moving = (kind >= 1) & (kind <= 4)
    out[k[moving], kind[moving]] = (out[k[moving], kind[moving]] + 2) % 4
    attack = kind == 5
    out[attack, 6] = ACTION_NVEC[6] - 1 - out[attack, 6]
    return num_cells - 1 - cells, out


class TeacherGame(RecordingGame):
    """The seats ``source`` plays played by it; labels exposed as ``teacher_actions`` and
    ``imitate`` (see the module docstring). In one process: ``workers`` must be 1."""

    def __init__(self, options: MicroRTSOptions, num_envs: int, source: TeacherSource,
                 seed: int | None = None, name: str = "microrts", opening: int = 0) -> None:
        """``opening``: each game starts with a random number of cycles, up to ``opening``,
        where the teachers' seats play uniformly random legal actions (never labels), so
        deterministic bots play different games from there on."""
        if opening < 0:
            raise GameError(f"microrts: opening must be >= 0, got {opening}")
        if options.workers != 1:
            raise GameError("microrts: teacher games run in one process; drop workers or "
                            "set it to 1")
        super().__init__(options, num_envs, seed=seed, name=name)
        self._source = source
        shape = (self.num_envs, self.num_seats, self.height * self.width, len(ACTION_NVEC))
        self._labels = [np.zeros(shape, np.int64) for _ in range(2)]
        self._imitate = [np.zeros((self.num_envs, self.num_seats), bool) for _ in range(2)]
        self._label_flip = 0
        self.teacher_actions: np.ndarray = self._labels[0]
        self.imitate: np.ndarray = self._imitate[0]
        self.teacher_seats = np.zeros((self.num_envs, self.num_seats), bool)
        """``bool [E, A]`` the seats the source plays in the current games"""
        self.student_seats = np.zeros((self.num_envs, self.num_seats), bool)
        """``bool [E, A]`` teacher seats the caller plays where imitated
        (:meth:`let_students_play`)"""
        self._begun: list[np.ndarray] = []
        self.opening = opening
        self.opening_steps = np.zeros(self.num_envs, np.int64)
        """``[E]`` random cycles at the start of each env's current game"""
        self._opening_rng = np.random.default_rng((0 if seed is None else seed, 104729))

    @property
    def engine(self) -> Any:
        """The Java side: ``game_state(e)``, ``utt`` (for sources)."""
        return self._engine

    def reset(self, seed: int | None = None) -> Batch:
        batch = super().reset(seed)
        self._begun.clear()
        if seed is not None:
            self._opening_rng = np.random.default_rng((seed, 104729))
        self._draw_openings(np.arange(self.num_envs))
        self._source.begin(self, np.arange(self.num_envs))
        self._choose(batch)
        return batch

    def _draw_openings(self, envs: np.ndarray) -> None:
        if self.opening:
            self.opening_steps[envs] = self._opening_rng.integers(0, self.opening + 1,
                                                                  len(envs))

    def _game_meta(self, e: int) -> dict[str, Any]:
        return {"opening": int(self.opening_steps[e])} if self.opening else {}

    def restart(self, envs: np.ndarray | list[int]) -> Batch:
        batch = super().restart(envs)
        self._start_begun()
        self._choose(batch)
        return batch

    def let_students_play(self, seats: np.ndarray) -> None:
        """The caller plays the imitated seats of ``seats`` ``bool [E, A]`` while the
        teachers go on labelling them (see :class:`games.core.SupportsStudents`)."""
        self.student_seats[:] = np.asarray(seats, bool).reshape(self.student_seats.shape)

    def step(self, actions: np.ndarray) -> Batch:
        """One cycle with the teachers' actions on their seats and ``actions`` ``[E, A, HW,
        7]`` on the others and on the student seats whose labels are imitated (read, never
        written; ignored where every seat is a teacher's)."""
        played = self.teacher_actions
        callers = ~self.teacher_seats | (self.student_seats & self.imitate)
        if callers.any():
            played = np.where(callers[:, :, None, None], actions, played)
        batch = super().step(played)
        if self._begun:
            ended = np.concatenate(self._begun)
            self._source.ended(self, batch, ended)
        self._start_begun()
        self._choose(batch)
        return batch

    def _new_games(self, envs: np.ndarray) -> None:
        super()._new_games(envs)
        self._begun.append(np.asarray(envs, np.int64))

    def _start_begun(self) -> None:
        if not self._begun:
            return
        envs = np.unique(np.concatenate(self._begun))
        self._begun.clear()
        self.game_step[envs] = 0
        self._draw_openings(envs)
        self._source.begin(self, envs)

    def _choose(self, batch: Batch) -> None:
        """The teachers' legal actions at ``batch``'s observations, into the other buffer."""
        self._label_flip ^= 1
        labels = self._labels[self._label_flip]
        imitate = self._imitate[self._label_flip]
        labels.fill(0)
        imitate.fill(False)
        self.teacher_seats.fill(False)
        mask = batch.action_mask  # bool [E, A, HW, 78], seat frame
        assert mask is not None
        num_cells = labels.shape[2]
        for e in range(self.num_envs):
            t = int(self.game_step[e])
            for s in np.flatnonzero(self.alive[e]):
                player = int(self.players[e, s])
                if not self._source.plays(e, player):
                    continue
                self.teacher_seats[e, s] = True
                if t < self.opening_steps[e]:  # the random opening: played, never learned
                    random_legal_actions(mask[e, s], self._opening_rng, out=labels[e, s])
                    continue
                imitate[e, s] = self._source.imitated(e, player)
                rows = self._source.orders(e, player, t)
                if not len(rows):
                    continue
                cells, acts = rows[:, 0], rows[:, 1:]
                if self._rotated[e, s]:
                    cells, acts = rotate_rows(cells, acts, num_cells)
                keep = legal_rows(cells, acts, mask[e, s])
                labels[e, s, cells[keep]] = acts[keep]
        self.teacher_actions, self.imitate = labels, imitate


def pair_schedule(names: list[str], imitate: list[str] | None = None
                  ) -> list[tuple[str, str]]:
    """Every pair of ``names`` (mirror games included) on both sides: ``(a, b)`` then
    ``(b, a)``, so that neighbouring envs play one pairing from both sides. With ``imitate``
    (a subset of ``names``), only the pairs with an imitated side: every env then plays a
    game whose labels count, and each imitated name meets every name (itself included)."""
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i:]
             if not imitate or a in imitate or b in imitate]
    return [side for a, b in pairs for side in ((a, b), (b, a))]


class LiveBots:
    """Scripted engine bots as teachers, thinking on every cycle.

    Env ``e`` plays the pair ``schedule(e, game)``: the names of the bots playing engine
    players 0 and 1 of that env's ``game``-th game (by default :func:`pair_schedule` cycled
    over the envs and on over their next games: with ``imitate``, only the pairings with an
    imitated side). Each (env,
    player) keeps one Java bot per name, ``reset()`` and reseeded
    from ``(seed, env, game, player)`` at each game start. A side named ``""`` is not theirs:
    the caller of ``step`` plays it (:meth:`plays`). ``imitate`` (canonical names; empty: all)
    picks whose actions are labels. With fog of war the bots see what their side sees, unless
    ``full_view`` (as the engine's own bots do, in its bot envs).
    """

    def __init__(self, names: list[str], imitate: list[str] | None = None,
                 seed: int | None = None, schedule: Any = None,
                 full_view: bool = False) -> None:
        if not names:
            raise GameError("microrts: name at least one teacher bot")
        self.names = [bots_mod.resolve_bot(n).name for n in names]
        self.imitate = {bots_mod.resolve_bot(n).name for n in imitate or []}
        missing = self.imitate - set(self.names)
        if missing:
            raise GameError(f"microrts: --imitate {', '.join(sorted(missing))} is not among "
                            f"the teachers ({', '.join(self.names)})")
        self.seed = seed
        self.full_view = full_view
        self.pairs = pair_schedule(self.names, sorted(self.imitate, key=self.names.index))
        self.schedule = schedule or self._rotation
        self.env_players: list[tuple[str, str]] = []
        """``[E]`` the names of the bots playing engine players 0 and 1 of each env's game"""
        self._bots: dict[tuple[int, int, str], Any] = {}
        self._games: np.ndarray = np.zeros(0, np.int64)
        self._game: TeacherGame | None = None

    def _rotation(self, e: int, game: int) -> tuple[str, str]:
        """The default schedule: the envs' first games take the pairs in order, each next
        game the pairs after the last env's, so every pairing is played however few envs
        there are (env ``e`` playing pair ``e`` for ever left pairs beyond the envs out)."""
        num_envs = self._game.num_envs if self._game is not None else 1
        return self.pairs[(e + game * num_envs) % len(self.pairs)]

    def begin(self, game: TeacherGame, envs: np.ndarray) -> None:
        fresh = self._game is not game
        if fresh:
            self._game = game
            self.env_players = [("", "")] * game.num_envs
        if fresh or len(envs) == game.num_envs:
            # a reset starts the game numbering again: the same seed, the same games
            self._games = np.zeros(game.num_envs, np.int64)
        for e in envs.tolist():
            pair = self.schedule(e, int(self._games[e]))
            self.env_players[e] = pair
            for player, name in enumerate(pair):
                if not name:
                    continue
                bot = self._bot(e, player, name)
                bot.reset()
                if self.seed is not None:
                    entropy = (self.seed, e, int(self._games[e]), player)
                    bots_mod.seed_bot(bot, int(np.random.SeedSequence(entropy)
                                               .generate_state(1)[0]))
            self._games[e] += 1

    def _bot(self, e: int, player: int, name: str) -> Any:
        key = (e, player, name)
        if key not in self._bots:
            assert self._game is not None
            self._bots[key] = bots_mod.make_bot(bots_mod.resolve_bot(name), self._game.engine.utt)
        return self._bots[key]

    def ended(self, game: TeacherGame, batch: Batch, envs: np.ndarray) -> None:
        return None

    def orders(self, e: int, player: int, t: int) -> np.ndarray:
        game = self._game
        assert game is not None
        state = game.engine.game_state(e)
        if game.options.partial_obs and not self.full_view:
            import jpype

            state = jpype.JClass("rts.PartiallyObservableGameState")(state, player)
        bot = self._bot(e, player, self.env_players[e][player])
        return orders_to_rows(bot.getAction(player, state), game.width)

    def plays(self, e: int, player: int) -> bool:
        return bool(self.env_players[e][player])

    def imitated(self, e: int, player: int) -> bool:
        return not self.imitate or self.env_players[e][player] in self.imitate


def seat_pair(players: np.ndarray, e: int, bot: str | None, seat: int = 1) -> tuple[str, str]:
    """:class:`LiveBots` names (by engine player) for env ``e`` when ``bot`` plays its seat
    ``seat`` (``players`` ``[E, A]``) and the caller the other: ``""`` on the caller's side,
    on both without a bot."""
    pair = ["", ""]
    if bot:
        pair[int(players[e, seat])] = bot
    return pair[0], pair[1]
