"""The engine side of :class:`~games.microrts.adapter.MicroRTSVecGame`: its Java clients.

One ``tests.JNIGridnetSharedMemVecClient`` per *side group*: the self-play games and the bot
envs whose seat 0 plays one engine player (``learner``; a client plays one player in all its bot
games). Observation, mask and action arrays are direct int32 buffers shared with Java: one array
of each kind for all groups (each client gets its rows), so that a step's conversion scans each
once. This module builds the groups, starts the clients and reaches each env's Java game (its
``rts.GameState``, its reset, its bot); :mod:`games.microrts.conversions` turns the buffers into
batches.

With fog (``partial_obs``) the observation rows hold the unfogged board all the same: the
conversions apply each seat's sight in numpy (the engine's own fogged encoding is one cycle
stale). Self-play games write it themselves, their clients told to encode the full state (their
fog only chose which state the agent's orders are read against; the masks, and so every legal
order, come from the full state either way); bot games keep their fog, which is what their bot
sees, and have the agent's row rewritten by :meth:`EngineGroups.read_unfogged`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.core import GameError
from games.microrts import bots as bots_mod
from games.microrts import engine, jvm_signals
from games.microrts.maps import MapInfo
from games.microrts.options import ACTION_NVEC, MASK_WIDTH, NUM_ENGINE_PLANES
from games.microrts.plans import byte_view

# Java order puts ProduceWorker (never "done") first: the vector client resets a game by itself
# when component 0 says done, and we want to read the last observation before resetting.
JAVA_RFS = ("ProduceWorker", "WinLoss", "ResourceGather", "ProduceBuilding", "Attack",
            "ProduceCombatUnit")
CANON_FROM_JAVA = np.array([1, 2, 0, 3, 4, 5])  # canonical k = java[CANON_FROM_JAVA[k]]
JAVA_WINLOSS = 1

_BIG_STEPS = 2**31 - 1  # the engine's own step limit, never reached: we truncate in Python
_EMPTY_CELL_PLANES = [0, 5, 10, 13, 21]  # what the engine writes for a cell without a unit


@dataclass
class EngineGroup:
    """One Java vector client: self-play games and bot envs whose seat 0 is ``learner``."""

    learner: int  # engine player of the agent in this group's bot envs
    sp_envs: list[int]  # global env index of each self-play game
    bot_envs: list[int]  # global env index of each bot env
    bot_specs: list[bots_mod.BotSpec]
    client: Any = None
    obs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, H, W, 27]
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, HW, 78]
    act: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, HW, 7]
    obs_nd: Any = None  # Java NDBuffer over ``obs``
    planes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # [N, HW, 27] view
    row_slot: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # -> e*A+s
    players_j: Any = None  # Java int[] of the agent's player per row
    keep: list[Any] = field(default_factory=list)  # Java buffers that must stay alive

    @property
    def rows(self) -> int:
        return 2 * len(self.sp_envs) + len(self.bot_envs)


class EngineGroups:
    """The side groups of ``E`` envs with seats ``players`` ``[E, A]`` (``-1``: dead seat) and
    bots ``bot_specs`` (``None``: self-play), and where each seat's engine row is.

    :meth:`start` starts the JVM and the clients; until then no Java is touched."""

    def __init__(self, players: np.ndarray, bot_specs: list[bots_mod.BotSpec | None],
                 env_map: list[MapInfo], partial_obs: bool) -> None:
        num_envs, num_seats = players.shape
        self.players, self.env_map, self.partial_obs = players, env_map, partial_obs
        self.alive = players >= 0  # [E, A]
        groups = [EngineGroup(0, [], [], []), EngineGroup(1, [], [], [])]
        for e, spec in enumerate(bot_specs):
            if spec is None:
                groups[0].sp_envs.append(e)
            else:
                side = int(players[e, 0])
                groups[side].bot_envs.append(e)
                groups[side].bot_specs.append(spec)
        self.groups = [g for g in groups if g.rows]

        # per seat: group and engine row; per env: (group, kind, index in the client's games)
        self.env_group = np.zeros(num_envs, np.int64)
        self.env_slot: list[tuple[int, str, int]] = [(0, "", 0)] * num_envs
        self.seat_group = np.zeros((num_envs, num_seats), np.int64)
        self.seat_row = np.zeros((num_envs, num_seats), np.int64)
        self.bot_env = np.zeros(num_envs, bool)
        for gi, g in enumerate(self.groups):
            for i, e in enumerate(g.sp_envs):
                self.env_group[e] = gi
                self.env_slot[e] = (gi, "selfplay", i)
                self.seat_group[e] = gi
                self.seat_row[e] = 2 * i + players[e]
            for j, e in enumerate(g.bot_envs):
                row = 2 * len(g.sp_envs) + j
                self.env_group[e] = gi
                self.env_slot[e] = (gi, "bot", j)
                self.bot_env[e] = True
                self.seat_group[e, 0], self.seat_row[e, 0] = gi, row

        self.java_exception: type[BaseException] = Exception
        self.utt: Any = None
        self.sight = np.zeros(7, np.int64)  # sight radius per unit type id, from the engine
        self.obs = np.zeros((0, 0, 0, NUM_ENGINE_PLANES), np.int32)  # [R, H, W, 27], all rows
        self.masks = np.zeros((0, 0, MASK_WIDTH), np.int32)  # [R, HW, 78]
        self.act = np.zeros((0, 0, len(ACTION_NVEC)), np.int32)  # [R, HW, 7]
        self._sp_gs_field: Any = None

    def start(self, height: int, width: int, several_maps: bool) -> None:
        """Start the JVM and one client per group on the shared buffers (``several_maps``:
        point each game at its env's map, the client taking one map for all)."""
        engine.start_jvm()
        import jpype
        from jpype.nio import convertToDirectBuffer

        self.java_exception = jpype.JException
        byte_order = jpype.JClass("java.nio.ByteOrder").nativeOrder()
        nd_buffer = jpype.JClass("util.NDBuffer")
        utt = jpype.JClass("rts.units.UnitTypeTable")()
        nvec = (6, 4, 4, 4, 4, int(utt.getUnitTypes().size()),
                (2 * int(utt.getMaxAttackRange()) + 1) ** 2)
        if nvec != ACTION_NVEC:
            raise GameError(f"unexpected microRTS unit-type table: action sizes {nvec}")
        self.utt = utt
        for unit_type in utt.getUnitTypes():
            self.sight[int(unit_type.ID)] = int(unit_type.sightRadius)
        rf_cls = "ai.rewardfunction.{}RewardFunction"
        rf_base = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
        rfs = jpype.JArray(rf_base)([jpype.JClass(rf_cls.format(n))() for n in JAVA_RFS])
        ai_array = jpype.JArray(jpype.JClass("ai.core.AI"))
        client_cls = jpype.JClass("tests.JNIGridnetSharedMemVecClient")
        cells = height * width

        def shared(arr: np.ndarray) -> tuple[np.ndarray, Any]:
            return arr, convertToDirectBuffer(arr).order(byte_order).asIntBuffer()

        total = sum(g.rows for g in self.groups)
        self.obs = np.zeros((total, height, width, NUM_ENGINE_PLANES), np.int32)
        self.masks = np.zeros((total, cells, MASK_WIDTH), np.int32)
        self.act = np.zeros((total, cells, len(ACTION_NVEC)), np.int32)
        first_row = 0
        for g in self.groups:
            rows = slice(first_row, first_row + g.rows)
            first_row += g.rows
            g.obs, obs_j = shared(self.obs[rows])
            g.mask, mask_j = shared(self.masks[rows])
            g.act, act_j = shared(self.act[rows])
            g.keep = [obs_j, mask_j, act_j]
            bots = ai_array([bots_mod.make_bot(spec, utt) for spec in g.bot_specs])
            first_map = str(self.env_map[(g.sp_envs + g.bot_envs)[0]].path)
            try:
                g.client = client_cls(2 * len(g.sp_envs), len(g.bot_envs), _BIG_STEPS, rfs, "",
                                      first_map, bots, utt, self.partial_obs, obs_j,
                                      mask_j, act_j, 0)
            except jpype.JException as exc:
                raise GameError(f"microRTS engine failed to start on {first_map}: "
                                f"{engine.java_error_message(exc)}") from exc
            g.players_j = jpype.JArray(jpype.JInt)([0, 1] * len(g.sp_envs)
                                                   + [g.learner] * len(g.bot_envs))
            g.obs_nd = nd_buffer(obs_j, jpype.JArray(jpype.JInt)(
                [g.rows, height, width, NUM_ENGINE_PLANES]))
            g.planes = byte_view(g.obs)
        if self.partial_obs:
            self._unfog_selfplay_clients()
        if several_maps:
            self._set_client_maps()

    def _unfog_selfplay_clients(self) -> None:
        """Have the self-play clients encode the full state into their observation rows (at
        their next step or reset), as :meth:`read_unfogged` does for the bot games."""
        import jpype

        f = jpype.JClass("tests.JNIGridnetSharedMemClientSelfPlay").class_.getDeclaredField(
            "partialObs")
        f.setAccessible(True)
        for g in self.groups:
            for k in range(len(g.sp_envs)):
                f.setBoolean(g.client.selfPlayClients[k], False)

    def _set_client_maps(self) -> None:
        """Point each game at its own map (the Java client takes one map for all)."""
        import jpype

        fields = {}
        for kind, cls in (("selfplay", "tests.JNIGridnetSharedMemClientSelfPlay"),
                          ("bot", "tests.JNIGridnetSharedMemClient")):
            f = jpype.JClass(cls).class_.getDeclaredField("mapPath")
            f.setAccessible(True)
            fields[kind] = f
        for e in range(len(self.env_slot)):
            gi, kind, k = self.env_slot[e]
            fields[kind].set(self._java_game(gi, kind, k),
                             jpype.JString(str(self.env_map[e].path)))

    def _java_game(self, gi: int, kind: str, k: int) -> Any:
        client = self.groups[gi].client
        return client.selfPlayClients[k] if kind == "selfplay" else client.clients[k]

    def game_state(self, e: int) -> Any:
        """The engine's full ``rts.GameState`` of env ``e``."""
        gi, kind, k = self.env_slot[e]
        game = self._java_game(gi, kind, k)
        if kind == "bot":
            return game.gs
        if self._sp_gs_field is None:
            import jpype

            f = jpype.JClass("tests.JNIGridnetSharedMemClientSelfPlay").class_.getDeclaredField(
                "gs")
            f.setAccessible(True)
            self._sp_gs_field = f
        return self._sp_gs_field.get(game)

    def reset_env(self, e: int) -> None:
        """A new game in env ``e`` (Java; the engine leaves finished games alone)."""
        gi, kind, k = self.env_slot[e]
        if kind == "selfplay":
            self.groups[gi].client.selfPlayClients[k].reset()
        else:
            self.groups[gi].client.clients[k].reset(self.groups[gi].learner)

    def board(self, e: int) -> np.ndarray:
        """``int32 [H, W, 27]``: env ``e``'s board as the engine encodes it for seat 0 (unfogged,
        never rotated)."""
        g = self.groups[self.env_group[e]]
        return g.obs[self.seat_row[e, 0]]

    def is_bot_env(self, e: int) -> bool:
        return bool(self.bot_env[e])

    def bot(self, e: int) -> Any:
        """The Java ``ai.core.AI`` playing bot env ``e``."""
        gi, _, k = self.env_slot[e]
        return self.groups[gi].client.clients[k].ai2

    def set_bot(self, e: int, ai: Any) -> None:
        """Make the Java ``ai`` the opponent of bot env ``e`` (for its next game)."""
        gi, _, k = self.env_slot[e]
        self.groups[gi].client.clients[k].ai2 = ai

    def read_unfogged(self, envs: np.ndarray) -> None:
        """The agent's unfogged board into the observation rows of the bot games among
        ``envs`` (``partial_obs`` only: their clients wrote the fogged one; self-play clients
        write the unfogged board themselves). One engine call per bot game: the engine has
        no batched call that encodes a state other than the one its bot plays on."""
        for e in envs[self.bot_env[envs]].tolist():
            gi, _, k = self.env_slot[e]
            g = self.groups[gi]
            g.client.clients[k].gs.getBufferObservation(
                int(self.players[e, 0]), int(self.seat_row[e, 0]), g.obs_nd)

    def fix_reset_obs(self, envs: np.ndarray) -> None:
        """After a reset the engine leaves empty cells all-zero; mark them empty as in play."""
        for gi, g in enumerate(self.groups):
            mine = envs[self.env_group[envs] == gi]
            if not len(mine):
                continue
            rows = self.seat_row[mine][self.alive[mine]]  # engine rows of their live seats
            view = g.obs[rows]  # [k, H, W, 27]
            empty = ~view.any(axis=-1)
            view[..., _EMPTY_CELL_PLANES] |= empty[..., None]
            g.obs[rows] = view

    def close(self) -> None:
        """Release the clients' games (the JVM itself lives until the process exits)."""
        jvm_signals.restore()
        for g in self.groups:
            if g.client is not None:
                try:
                    g.client.close()
                except self.java_exception:
                    pass  # closing after an engine failure: nothing more to release
                g.client = None
