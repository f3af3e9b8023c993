"""microRTS's game options and fixed array layout: what a ``game.options`` mapping may set,
the observation planes, the action components, the reward components, and which engine player
and bot each env has (:func:`env_layout`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from games.core import GameError
from games.microrts import bots as bots_mod
from games.options import MAX_REWARD_WEIGHT

REWARD_COMPONENTS = ("win_loss", "resource_gather", "produce_worker", "produce_building",
                     "attack", "produce_combat_unit")
DEFAULT_REWARD_WEIGHTS = (10.0, 1.0, 1.0, 0.2, 1.0, 4.0)  # MicroRTS-Py's
SELFPLAY = "selfplay"  # opponent_names entry of a self-play env

OBS_PLANES = (
    *(f"hp_{i}" for i in range(5)), *(f"resources_{i}" for i in range(5)),
    "owner_none", "owner_own", "owner_enemy",
    "type_none", "type_resource", "type_base", "type_barracks", "type_worker", "type_light",
    "type_heavy", "type_ranged",
    "action_none", "action_move", "action_harvest", "action_return", "action_produce",
    "action_attack",
    "wall", "visible", "off_map",
)
PAD_PLANE = OBS_PLANES.index("off_map")  # 1 outside an env's board in a mixed-size batch
NUM_ENGINE_PLANES = 27  # the planes before "wall" come from the engine
ACTION_NVEC = (6, 4, 4, 4, 4, 7, 49)
ACTION_NAMES = ("type", "move", "harvest", "return", "produce", "unit_type", "attack")
MASK_WIDTH = sum(ACTION_NVEC)  # 78
ACTION_GATES: tuple[tuple[int, ...] | None, ...] = (None, (1,), (2,), (3,), (4,), (4,), (5,))


@dataclass
class MicroRTSOptions:
    """Options of the ``microrts`` game (``game.options`` in a config)."""

    map: str = "basesWorkers16x16"
    """shipped map name (e.g. basesWorkers8x8) or a path to an XML map"""
    maps: list[str] = field(default_factory=list)
    """several maps spread over the envs, each played from both sides (see :func:`env_layout`;
    overrides ``map``); maps of different sizes are padded to the largest
    (:mod:`games.microrts.mixed_sizes`)"""
    map_weights: list[float] = field(default_factory=list)
    """the share of envs on each of ``maps`` (one weight per map; empty: equal shares), e.g.
    [1, 1, 2] puts half of the side pairs on the third map"""
    bots: list[str] = field(default_factory=lambda: ["WorkerRush"])
    """opponents of the bot envs (see games.microrts.bots), cycled over them; in training with
    ``league.bot_env_pfsp`` each bot env's next bot is drawn among them instead (set_bot)"""
    num_selfplay_envs: int = 0
    """how many of the envs are self-play games (2 seats); the others play bots"""
    max_steps: int = 2000
    """episode length limit in game cycles; reaching it truncates the episode"""
    reward_weights: tuple[float, ...] = DEFAULT_REWARD_WEIGHTS
    """weights of win_loss, resource_gather, produce_worker, produce_building, attack,
    produce_combat_unit"""
    partial_obs: bool = False
    """fog of war: seats see what their units see (bots are fogged too; state stays unfogged)"""
    rotate_player1: bool = False
    """rotate the board 180 degrees for seats playing player 1"""
    alternate_sides: bool = True
    """seat 0 plays player 0 in even envs and player 1 in odd ones (see module docs)"""
    timeout_outcome: Literal["draw", "none"] = "draw"
    """outcome of a game stopped by max_steps"""
    render: bool = False
    """accepted for uniformity with other games: render() always works here"""
    render_cell: int = 24
    """pixels per cell in render() frames"""
    workers: int = 1
    """processes the envs are split over (spawned, one JVM each; see games.microrts.workers);
    1 steps every env in this process. More than 1 pays where cores are idle (a GPU machine)"""

    def __post_init__(self) -> None:
        if len(self.reward_weights) != len(REWARD_COMPONENTS):
            raise ValueError(f"reward_weights needs {len(REWARD_COMPONENTS)} numbers "
                             f"({', '.join(REWARD_COMPONENTS)}), got {len(self.reward_weights)}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if not all(abs(w) <= MAX_REWARD_WEIGHT for w in self.reward_weights):
            raise ValueError(f"reward_weights must each be within +-{MAX_REWARD_WEIGHT:g} (the "
                             f"rewards are float32; larger ones overflow the losses), got "
                             f"{list(self.reward_weights)}")
        if self.num_selfplay_envs < 0:
            raise ValueError(f"num_selfplay_envs must be >= 0, got {self.num_selfplay_envs}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.map_weights:
            if len(self.map_weights) != len(self.maps):
                raise ValueError(f"map_weights needs one weight per map of maps ("
                                 f"{len(self.maps)}), got {len(self.map_weights)}")
            if min(self.map_weights) <= 0:  # a map of weight 0 is never played
                raise ValueError(f"map_weights must each be > 0 (drop a map from maps rather "
                                 f"than weigh it 0), got {list(self.map_weights)}")
            if max(self.map_weights) > MAX_REWARD_WEIGHT:
                raise ValueError(f"map_weights must each be in 0..{MAX_REWARD_WEIGHT:g}, got "
                                 f"{list(self.map_weights)}")
        if not 4 <= self.render_cell <= 128:
            raise ValueError(f"render_cell must be in 4..128, got {self.render_cell}")



@dataclass(frozen=True)
class EnvLayout:
    """Who plays each env where: ``players [E, A]`` (engine player of each seat, -1 = no seat),
    ``bots [E]`` (the bot of a bot env, None for a self-play game) and ``maps [E]`` (index into
    the options' maps)."""

    players: np.ndarray
    bots: list[bots_mod.BotSpec | None]
    maps: list[int]


def env_layout(opts: MicroRTSOptions, num_envs: int) -> EnvLayout:
    """Envs ``0..S-1`` self-play, then bot envs cycling over ``opts.bots`` (see module docs).

    With several maps and ``alternate_sides``, both envs of a side pair share a map, so every
    map is played from both sides (cycling maps env by env would tie map ``k`` to side
    ``k % 2``). Side pair ``p`` of the bot envs plays bot ``p % len(bots)`` on map
    ``order[p + p // lcm(len(bots), len(maps))]``: the maps follow the pairs in ``order``,
    shifted by one after each common cycle, so every bot meets every map once there are enough
    envs. ``order`` is :func:`map_order`: ``0, 1, ..., len(maps)-1`` repeated, or with
    ``map_weights`` a smooth weighted round robin (each map's share of any prefix as close to
    its weight's as whole pairs allow). Self-play pair ``i`` plays map ``order[i]``.
    """
    if num_envs < 1:
        raise GameError(f"microrts: num_envs must be >= 1, got {num_envs}")
    if opts.num_selfplay_envs > num_envs:
        raise GameError(f"microrts: num_selfplay_envs={opts.num_selfplay_envs} exceeds "
                        f"num_envs={num_envs}")
    num_sp = opts.num_selfplay_envs
    num_bot = num_envs - num_sp
    bot_specs = [bots_mod.resolve_bot(b) for b in opts.bots]
    if num_bot and not bot_specs:
        raise GameError(f"microrts: {num_bot} bot envs but options.bots is empty; name "
                        f"bots or set num_selfplay_envs={num_envs}")
    players = np.full((num_envs, 2 if num_sp else 1), -1, np.int64)
    bots: list[bots_mod.BotSpec | None] = [None] * num_envs
    num_maps = max(1, len(opts.maps))
    pair = 2 if opts.alternate_sides else 1  # envs that differ only by side
    maps = [0] * num_envs
    order = map_order(list(opts.map_weights) or [1.0] * num_maps, 2 * num_envs + 2)
    for i in range(num_sp):
        side = i % 2 if opts.alternate_sides else 0
        players[i] = (side, 1 - side)
        maps[i] = order[i // pair]
    for j in range(num_bot):
        e = num_sp + j
        side = j % 2 if opts.alternate_sides else 0
        players[e, 0] = side
        bots[e] = bot_specs[(j // pair) % len(bot_specs)]
        step = j // pair
        maps[e] = order[step + step // math.lcm(len(bot_specs), num_maps)]
    return EnvLayout(players, bots, maps)


def map_order(weights: list[float], length: int) -> list[int]:
    """``length`` map indices by smooth weighted round robin: each step every map gains its
    weight and the richest map (the first on ties) is picked and pays the total. Equal weights
    give ``0, 1, ..., n-1`` repeated."""
    total = sum(weights)
    credit = [0.0] * len(weights)
    order = []
    for _ in range(length):
        credit = [c + w for c, w in zip(credit, weights, strict=True)]
        k = max(range(len(credit)), key=lambda i: (credit[i], -i))
        credit[k] -= total
        order.append(k)
    return order

