"""The scripted Lux opponents: the heuristic's rules on small hand-made boards, its distance
fields against a plain breadth-first search, and real games (Jux): both bots choose only legal
values, the heuristic delivers ice and beats random play.

Measured on the real games below (4 at a time, 150 steps at most): the heuristic won all 11
games against random play (which loses all its factories within 30-150 steps: its robots pick
their water up), delivered about 800 water per game (random play none) and lost no factory;
in self-play every seat delivered 670-1415 water and kept its factories.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

import numpy as np
import pytest

from games.lux.bots import (
    BOTS,
    FAR,
    SeatPlanes,
    Thresholds,
    distance_field,
    goal_fields,
    heuristic,
    heuristic_goals,
    heuristic_hunter,
    heuristic_near,
    heuristic_ore,
    heuristic_ore_goals,
    heuristic_raid,
    heuristic_raider,
    heuristic_raider_goal,
    near_plane_fields,
    neighbour,
    random_legal,
)
from games.lux.fields import box_count
from games.lux.layout import (
    DIRECTIONS,
    FACTORY,
    GOALS,
    NEAR_RANGE,
    NVEC,
    OBS_PLANES,
    OFFSETS,
    PLANE,
    RESOURCE,
    REWARD_COMPONENTS,
    UNIT,
)

Bot = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]

# ---------------------------------------------------------------- legality


def illegal_cells(actions: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``bool [N, cells]``: cells whose chosen values the mask forbids: the unit type and the
    components it uses on unit cells, the factory component on factory centres."""
    a, m = actions.astype(np.int64), mask.astype(bool)
    assert (a >= 0).all() and (a < np.array(NVEC)).all(), "a value out of its range"

    def legal(component: int) -> np.ndarray:
        return np.take_along_axis(m, (OFFSETS[component] + a[..., component])[..., None],
                                  -1)[..., 0]

    kind = a[..., 0]
    unit_ok = legal(0) & np.where(kind == UNIT["move"], legal(1), True) & np.where(
        kind == UNIT["transfer"], legal(2) & legal(3), True) & np.where(
        kind == UNIT["pickup"], legal(4), True)
    unit_cells = m[..., :NVEC[0]].any(-1)
    factory_cells = m[..., OFFSETS[5]:].any(-1)
    out: np.ndarray = (unit_cells & ~unit_ok) | (factory_cells & ~legal(5))
    return out


# ---------------------------------------------------------------- real games


@dataclass
class Record:
    """What the players of :func:`play` did, by player name."""

    illegal: dict[str, int] = field(default_factory=dict)
    unit_types: dict[str, np.ndarray] = field(default_factory=dict)  # counts [7]
    factory_actions: dict[str, np.ndarray] = field(default_factory=dict)  # counts [4]
    moves: dict[str, np.ndarray] = field(default_factory=dict)  # move values chosen [7]
    outcomes: dict[str, list[int]] = field(default_factory=dict)
    components: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def total(self, name: str, component: str) -> float:
        parts = self.components.get(name, [])
        return float(sum(p[REWARD_COMPONENTS.index(component)] for p in parts))


ENVS = 4
MAX_STEPS = 150  # every test game has this length: one compilation for the module


def play(players: tuple[tuple[str, Bot], tuple[str, Bot]], steps: int, seed: int) -> Record:
    """``steps`` steps of :data:`ENVS` games; in game ``e`` player ``i`` plays seat
    ``(e + i) % 2``, so each plays both sides."""
    from games.lux.adapter import LuxOptions, LuxVecGame

    game = LuxVecGame(LuxOptions(max_steps=MAX_STEPS), num_envs=ENVS, seed=seed)
    rng = np.random.default_rng(seed)
    record = Record()
    for name, _ in players:
        record.illegal[name] = 0
        record.unit_types[name] = np.zeros(NVEC[0], np.int64)
        record.factory_actions[name] = np.zeros(NVEC[5], np.int64)
        record.moves[name] = np.zeros(NVEC[1], np.int64)
        record.outcomes[name], record.components[name] = [], []
    envs = np.arange(ENVS)
    batch = game.reset()
    for _ in range(steps):
        masks = batch.action_mask
        assert masks is not None
        actions = np.zeros(masks.shape[:3] + (len(NVEC),), np.int64)
        for i, (name, bot) in enumerate(players):
            seats = (envs + i) % 2
            mask = masks[envs, seats]
            chosen = bot(batch.obs[envs, seats], mask, rng)
            record.illegal[name] += int(illegal_cells(chosen, mask).sum())
            units, factories = mask[..., 0], mask[..., OFFSETS[5]]
            record.unit_types[name] += np.bincount(chosen[units][:, 0], minlength=NVEC[0])
            moving = units & (chosen[..., 0] == UNIT["move"])
            record.moves[name] += np.bincount(chosen[moving][:, 1], minlength=NVEC[1])
            record.factory_actions[name] += np.bincount(chosen[factories][:, 5],
                                                        minlength=NVEC[5])
            actions[envs, seats] = chosen
        batch = game.step(actions)
        episodes = batch.episodes
        parts = game.episode_reward_components()
        for k in range(len(episodes.env)):
            name = players[int(episodes.seat[k] - episodes.env[k]) % 2][0]
            record.outcomes[name].append(int(episodes.outcome[k]))
            record.components[name].append(parts[k])
    game.close()
    return record


@pytest.fixture(scope="module")
def versus() -> Record:
    """The heuristic against random play: one 150-step game in each of 4 games (two on each
    side)."""
    return play((("heuristic", heuristic), ("random", random_legal)), MAX_STEPS, seed=0)


@pytest.fixture(scope="module")
def near_versus() -> Record:
    """The heuristic against itself steering by the planes (``heuristic-near``): one 150-step
    game in each of 4 games."""
    return play((("heuristic", heuristic), ("heuristic_near", heuristic_near)), MAX_STEPS,
                seed=1)


@pytest.fixture(scope="module")
def goals_versus() -> Record:
    """The heuristic against itself going home and to ice by goal moves
    (``heuristic-goals``): one 150-step game in each of 4 games."""
    return play((("heuristic", heuristic), ("heuristic_goals", heuristic_goals)), MAX_STEPS,
                seed=2)


@pytest.fixture(scope="module")
def ore_versus() -> Record:
    """The heuristic against itself with its light robots mining ore (``heuristic-ore``):
    one 150-step game in each of 4 games."""
    return play((("heuristic", heuristic), ("heuristic_ore", heuristic_ore)), MAX_STEPS,
                seed=3)


def test_bots_choose_legal_values(versus: Record, near_versus: Record,
                                  goals_versus: Record, ore_versus: Record) -> None:
    for record in (versus, near_versus, goals_versus, ore_versus):
        assert record.illegal == {name: 0 for name in record.illegal}
    # the steering bots step by directions; heuristic-goals goes home, to ice and to rubble by
    # goals
    for name in ("heuristic", "heuristic_near"):
        assert near_versus.moves[name][len(DIRECTIONS):].sum() == 0
    goal_moves = goals_versus.moves["heuristic_goals"]
    for goal in ("home", "ice", "rubble"):
        assert goal_moves[len(DIRECTIONS) + GOALS.index(goal)] > 20, goal_moves
    assert goal_moves[len(DIRECTIONS) + GOALS.index("ore")] == 0
    # the check saw every kind of choice the heuristic makes
    kinds = versus.unit_types["heuristic"] + near_versus.unit_types["heuristic"]
    for kind in ("keep", "move", "transfer", "pickup", "dig"):
        assert kinds[UNIT[kind]] > 0, kind
    assert kinds[UNIT["self_destruct"]] == 0
    built = versus.factory_actions["heuristic"] + near_versus.factory_actions["heuristic"]
    for action in ("none", "light", "heavy", "water"):
        assert built[FACTORY[action]] > 0, action
    assert (versus.unit_types["random"][1:] > 0).all()  # random play tries every type


def test_heuristic_beats_random(versus: Record) -> None:
    heuristic_outcomes = versus.outcomes["heuristic"]
    assert len(heuristic_outcomes) == ENVS
    assert heuristic_outcomes.count(1) == ENVS
    assert versus.outcomes["random"].count(1) == 0
    # random play loses its factories (it picks their water up, ...), the heuristic keeps them
    assert versus.total("heuristic", "factories") == 0
    assert versus.total("random", "factories") < 0


def test_heuristic_delivers_ice(versus: Record, near_versus: Record,
                                goals_versus: Record) -> None:
    assert versus.total("heuristic", "water") > 100 * len(versus.outcomes["heuristic"])
    assert versus.total("random", "water") < versus.total("heuristic", "water") / 10
    for record, name in ((near_versus, "heuristic"), (near_versus, "heuristic_near"),
                         (goals_versus, "heuristic_goals")):
        episodes = record.components[name]
        assert len(episodes) == ENVS
        water = np.array([p[REWARD_COMPONENTS.index("water")] for p in episodes])
        assert (water > 0).all(), water  # every seat delivers
        assert min(p[REWARD_COMPONENTS.index("factories")] for p in episodes) >= 0


def test_bots_table() -> None:
    assert BOTS == {"random": random_legal, "heuristic": heuristic,
                    "heuristic-near": heuristic_near, "heuristic-goals": heuristic_goals,
                    "heuristic-ore": heuristic_ore, "heuristic-ore-goals": heuristic_ore_goals,
                    "heuristic-raid": heuristic_raid, "heuristic-raider": heuristic_raider,
                    "heuristic-raider-goal": heuristic_raider_goal,
                    "heuristic-hunter": heuristic_hunter}


# ---------------------------------------------------------------- distance fields


def bfs(targets: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """A plain breadth-first search of one ``[S, S]`` board."""
    size = targets.shape[0]
    dist = np.full(targets.shape, FAR, np.int64)
    queue: deque[tuple[int, int]] = deque()
    for y, x in zip(*np.nonzero(targets & ~blocked), strict=True):
        dist[y, x] = 0
        queue.append((int(y), int(x)))
    while queue:
        y, x = queue.popleft()
        for dy, dx in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            ny, nx = y + dy, x + dx
            if (0 <= ny < size and 0 <= nx < size and not blocked[ny, nx]
                    and dist[ny, nx] > dist[y, x] + 1):
                dist[ny, nx] = dist[y, x] + 1
                queue.append((ny, nx))
    return dist


def test_distance_field_is_a_breadth_first_search() -> None:
    rng = np.random.default_rng(0)
    targets = rng.random((6, 11, 11)) < 0.03
    targets[0] = False  # a board without targets
    blocked = rng.random((6, 11, 11)) < 0.3
    got = distance_field(targets, blocked)
    for k in range(len(targets)):
        np.testing.assert_array_equal(got[k], bfs(targets[k], blocked[k]))
    # with needed cells, the distances there (when reachable) are final
    needed = rng.random((6, 11, 11)) < 0.05
    early = distance_field(targets, blocked, needed)
    full = distance_field(targets, blocked)
    np.testing.assert_array_equal(early[needed], full[needed])


def test_grid_helpers() -> None:
    a = np.arange(12).reshape(3, 4)
    assert neighbour(a, 0, -1)[1, 2] == a[0, 2] and (neighbour(a, 0, -1)[0] == -1).all()
    assert neighbour(a, 1, -1)[1, 2] == a[1, 3] and (neighbour(a, 1, -1)[:, 3] == -1).all()
    assert neighbour(a, 2, -1)[1, 2] == a[2, 2] and neighbour(a, 3, -1)[1, 2] == a[1, 1]
    rng = np.random.default_rng(1)
    cells = rng.random((2, 9, 9)) < 0.3
    counts = box_count(cells, 2)
    for y in range(9):
        for x in range(9):
            assert counts[1, y, x] == cells[1, max(y - 2, 0):y + 3, max(x - 2, 0):x + 3].sum()
    import jax.numpy as jnp  # the observations' planes: the same function on JAX arrays

    assert np.array_equal(np.asarray(box_count(jnp.asarray(cells), 2, jnp)), counts)


# ---------------------------------------------------------------- rules on small boards

S = 8


class Board:
    """One seat's hand-made ``S x S`` observation and mask."""

    def __init__(self) -> None:
        self.obs = np.zeros((1, len(OBS_PLANES), S, S), np.float32)
        self.mask = np.zeros((1, S * S, sum(NVEC)), bool)

    def set(self, plane: str, y: int, x: int, value: float = 1.0) -> Board:
        self.obs[0, PLANE[plane], y, x] = value
        return self

    def allow(self, y: int, x: int, component: int, *values: int) -> Board:
        for v in values:
            self.mask[0, y * S + x, OFFSETS[component] + v] = True
        return self

    def robot(self, y: int, x: int, heavy: bool = True, power: float = 0.9, ice: float = 0.0,
              moves: tuple[int, ...] = (0, 1, 2, 3)) -> Board:
        """An own robot that may keep, recharge, dig and make ``moves``."""
        self.set("own_heavy" if heavy else "own_light", y, x)
        self.set("unit_power", y, x, power).set("unit_ice", y, x, ice)
        self.allow(y, x, 0, UNIT["keep"], UNIT["recharge"], UNIT["dig"])
        if moves:
            self.allow(y, x, 0, UNIT["move"]).allow(y, x, 1, *moves)
        return self

    def factory(self, cy: int, cx: int, water: float = 0.3) -> Board:
        """An own factory centred at ``(cy, cx)`` with ``water`` (/ 1000) and nothing legal."""
        for y in range(cy - 1, cy + 2):
            for x in range(cx - 1, cx + 2):
                self.set("own_factory", y, x).set("factory_water", y, x, water)
        self.set("own_factory_centre", cy, cx).allow(cy, cx, 5, FACTORY["none"])
        return self

    def act(self, rules: Thresholds | None = None) -> np.ndarray:
        """``int [S, S, 6]``: the heuristic's choice (with ``rules``' thresholds)."""
        levels = np.round(np.clip(self.obs, 0, 1) * 255).astype(np.uint8)  # as the adapter
        out = heuristic(levels, self.mask, np.random.default_rng(0),
                        rules=rules or Thresholds())
        assert not illegal_cells(out, self.mask).any()
        return out.reshape(S, S, len(NVEC))


def test_digs_on_ice_and_names_a_queued_dig_again() -> None:
    board = Board().set("ice", 3, 3).robot(3, 3)
    assert board.act()[3, 3, 0] == UNIT["dig"]
    # the same choice whatever is queued (the adapter lets the queued dig go on for free)
    assert board.set("queued_dig", 3, 3).act()[3, 3, 0] == UNIT["dig"]


def test_moves_to_ice_around_robots() -> None:
    board = Board().set("ice", 3, 5).robot(3, 1)
    assert tuple(board.act()[3, 1, :2]) == (UNIT["move"], 1)  # right
    board.set("queued_move", 3, 1).set("queued_right", 3, 1)
    assert tuple(board.act()[3, 1, :2]) == (UNIT["move"], 1)  # named again: it goes on
    board.set("enemy_heavy", 3, 2)  # in the way: around it
    row = board.act()[3, 1]
    assert row[0] == UNIT["move"] and row[1] in (0, 2)


def test_steering_by_the_near_planes_reads_their_distances() -> None:
    """``near_plane_fields`` (``heuristic-near``): the robots steer by the observation's
    Manhattan planes, not by where the ice and factories are: with the ``near_ice`` plane
    pointing left and the ice on the right, the plane wins (the breadth-first steering goes
    right); a plane at 0 (nothing within range) is no target; a robot with ice heads home
    by ``near_own_factory``."""
    board = Board().set("ice", 3, 5).robot(3, 3)
    ys, xs = np.mgrid[0:S, 0:S]
    decoy = np.abs(ys - 3) + np.abs(xs - 0)  # the plane says: ice at (3, 0)
    board.obs[0, PLANE["near_ice"]] = 1.0 - decoy / NEAR_RANGE
    levels = np.round(np.clip(board.obs, 0, 1) * 255).astype(np.uint8)
    _, _, ice, _, _ = near_plane_fields(levels, SeatPlanes.read(levels))
    assert (ice[0] == decoy).all()
    rng = np.random.default_rng(0)
    near = heuristic_near(levels, board.mask, rng).reshape(S, S, -1)
    assert tuple(near[3, 3, :2]) == (UNIT["move"], 3)  # left, as the plane says
    assert tuple(board.act()[3, 3, :2]) == (UNIT["move"], 1)  # path-finding: right
    np.testing.assert_array_equal(
        heuristic(levels, board.mask, np.random.default_rng(0), steering=near_plane_fields),
        heuristic_near(levels, board.mask, np.random.default_rng(0)))

    levels[0, PLANE["near_ice"]] = 0  # no ice within range: no steering target
    _, _, ice, _, _ = near_plane_fields(levels, SeatPlanes.read(levels))
    assert (ice == FAR).all()
    assert heuristic_near(levels, board.mask, rng).reshape(S, S, -1)[3, 3, 0] == UNIT["keep"]

    home = Board().factory(1, 6).robot(5, 2, ice=0.9)
    home.obs[0, PLANE["near_own_factory"]] = 1.0 - (np.abs(ys - 5) + np.abs(xs - 0)) / NEAR_RANGE
    home_levels = np.round(np.clip(home.obs, 0, 1) * 255).astype(np.uint8)
    row = heuristic_near(home_levels, home.mask, rng).reshape(S, S, -1)[5, 2]
    assert tuple(row[:2]) == (UNIT["move"], 3)  # home by the plane: left
    assert tuple(home.act()[5, 2, :2]) in ((UNIT["move"], 0), (UNIT["move"], 1))  # up / right


def test_one_robot_per_cell() -> None:
    board = Board().set("ice", 0, 3).robot(0, 2, heavy=False).robot(0, 4, heavy=True)
    out = board.act()
    assert tuple(out[0, 4, :2]) == (UNIT["move"], 3)  # the heavy moves left onto the ice
    assert out[0, 2, 0] == UNIT["keep"]  # the light waits


def test_delivers_ice_then_picks_up_power() -> None:
    board = Board().factory(1, 1).robot(3, 1, ice=0.8)
    board.allow(3, 1, 0, UNIT["transfer"]).allow(3, 1, 2, 1).allow(3, 1, 3, RESOURCE["ice"])
    out = board.act()[3, 1]
    assert (out[0], out[2], out[3]) == (UNIT["transfer"], 1, RESOURCE["ice"])  # up
    home = Board().factory(1, 1).robot(2, 1, power=0.1)
    home.allow(2, 1, 0, UNIT["pickup"]).allow(2, 1, 4, RESOURCE["power"])
    out = home.act()[2, 1]
    assert (out[0], out[4]) == (UNIT["pickup"], RESOURCE["power"])
    low = Board().factory(1, 1).set("ice", 6, 1).robot(5, 1, power=0.1)
    assert tuple(low.act()[5, 1, :2]) == (UNIT["move"], 0)  # home, up, not to the ice


def test_lights_clear_rubble_next_to_factories() -> None:
    board = Board().factory(1, 1).set("ice", 7, 7).set("rubble", 3, 1, 0.5)
    board.robot(5, 1, heavy=False).robot(5, 5, heavy=True)
    out = board.act()
    assert tuple(out[5, 1, :2]) == (UNIT["move"], 0)  # the light goes to the rubble (up)
    assert out[5, 5, 0] == UNIT["move"] and out[5, 5, 1] in (1, 2)  # the heavy to the ice
    on_rubble = Board().factory(1, 1).set("rubble", 3, 1, 0.5).robot(3, 1, heavy=False)
    assert on_rubble.act()[3, 1, 0] == UNIT["dig"]


def test_factory_builds_and_waters() -> None:
    def choice(board: Board) -> int:
        return int(board.act()[2, 2, 5])

    def fresh(water: float = 0.3) -> Board:
        return Board().factory(2, 2, water).allow(2, 2, 5, FACTORY["water"])

    assert choice(fresh().allow(2, 2, 5, FACTORY["light"], FACTORY["heavy"])) == FACTORY["heavy"]
    assert choice(fresh().allow(2, 2, 5, FACTORY["light"])) == FACTORY["light"]
    assert choice(fresh()) == FACTORY["water"]
    assert choice(fresh(water=0.1)) == FACTORY["none"]  # below the reserve
    late = fresh(water=0.1)
    late.obs[0, PLANE["progress"]] = 0.97  # 30 steps left: the reserve is 70
    assert choice(late) == FACTORY["water"]
    crowded = fresh().allow(2, 2, 5, FACTORY["heavy"]).robot(2, 2, moves=())
    assert choice(crowded) == FACTORY["water"]  # no build onto a robot


def test_thresholds_are_a_players_own() -> None:
    """A player's :class:`Thresholds` move its water reserve and its light builds' crowding,
    and nothing else: the defaults are the heuristic's."""

    def choice(board: Board, rules: Thresholds | None = None) -> int:
        return int(board.act(rules)[2, 2, 5])

    thirsty = Board().factory(2, 2, water=0.16).allow(2, 2, 5, FACTORY["water"])
    assert choice(thirsty) == FACTORY["none"]  # 161 water: below the heuristic's 200
    assert choice(thirsty, Thresholds(water_reserve=150)) == FACTORY["water"]
    assert choice(thirsty, Thresholds(water_reserve=170)) == FACTORY["none"]
    near = Board().factory(2, 2).allow(2, 2, 5, FACTORY["water"], FACTORY["light"])
    for y, x in ((5, 5), (6, 6), (7, 7)):  # three robots within 6 cells of the centre
        near.robot(y, x, moves=())
    assert choice(near) == FACTORY["water"]  # crowded for the heuristic (3)
    assert choice(near, Thresholds(lights_near=4)) == FACTORY["light"]
    from games.lux import bots

    assert Thresholds() == Thresholds(water_reserve=bots.WATER_RESERVE,
                                      lights_near=bots.LIGHTS_NEAR,
                                      spare_water=bots.SPARE_WATER, ore_until=bots.ORE_UNTIL)


def test_light_robots_mine_ore_until_their_share_of_the_game() -> None:
    """With ``ore`` a light robot on ore digs it until ``Thresholds.ore_until`` of the game,
    then leaves for the rubble next to its factory."""
    board = Board().factory(1, 1).set("rubble", 3, 1, 0.5).set("ore", 5, 5)
    board.robot(5, 5, heavy=False)
    board.obs[0, PLANE["progress"]] = 0.25
    levels = np.round(board.obs * 255).astype(np.uint8)

    def kind(rules: Thresholds) -> int:
        out = heuristic(levels, board.mask, np.random.default_rng(0), ore=True, rules=rules)
        assert not illegal_cells(out, board.mask).any()
        return int(out.reshape(S, S, len(NVEC))[5, 5, 0])

    assert kind(Thresholds()) == UNIT["dig"]  # a quarter of the game: before 0.3
    assert kind(Thresholds(ore_until=0.2)) == UNIT["move"]
    assert kind(Thresholds(ore_until=0.26)) == UNIT["dig"]


def test_clearing_by_goal_reads_the_choice_off_the_masks() -> None:
    """A light robot with rubble to clear behind a blocked ``to_rubble`` step: by the distance
    field it walks there (up, around); with ``Thresholds.clear_by_goal`` it fetches ice by its
    goal instead, and clears by the goal once the goal is legal."""
    to_ice, to_rubble = (len(DIRECTIONS) + GOALS.index(g) for g in ("ice", "rubble"))

    def move(goal_legal: bool, rules: Thresholds) -> int:
        board = Board().factory(1, 1).set("rubble", 3, 1, 0.5).set("ice", 7, 7)
        board.robot(5, 1, heavy=False, moves=(0, 1, 2, 3, to_ice,
                                              *((to_rubble,) if goal_legal else ())))
        board.obs[0, PLANE["progress"]] = 0.5
        levels = np.round(np.clip(board.obs, 0, 1) * 255).astype(np.uint8)
        out = heuristic(levels, board.mask, np.random.default_rng(0), steering=goal_fields,
                        goals=True, rules=rules).reshape(S, S, len(NVEC))
        assert not illegal_cells(out.reshape(1, S * S, -1), board.mask).any()
        assert out[5, 1, 0] == UNIT["move"]
        return int(out[5, 1, 1])

    assert move(False, Thresholds()) == 0  # up, by the field
    assert move(False, Thresholds(clear_by_goal=True)) == to_ice
    assert move(True, Thresholds()) == move(True, Thresholds(clear_by_goal=True)) == to_rubble


# ---------------------------------------------------------------- live teachers


def test_teacher_game_labels_legal_moves_and_resumes() -> None:
    """``selfplay bc --game lux --teachers heuristic,random``'s game: every seat plays its
    bot, the labels are legal, only the imitated bot's seats are labels, and a saved state
    continues with the same observations and labels."""
    from games.core import SupportsState, SupportsTeachers
    from games.family import Teachers
    from games.registry import family_of

    teachers = Teachers(bots=("heuristic", "random"), imitate=("heuristic",))
    game = family_of("lux").teacher_game("lux", teachers, 4, 3, {"max_steps": 40})
    assert isinstance(game, SupportsTeachers) and isinstance(game, SupportsState)
    try:
        batch = game.reset(seed=3)
        # the pairings with the imitated bot (random against random teaches nothing)
        heuristic_seats = np.array([[True, True], [True, False], [False, True], [True, True]])
        saved, later = None, []
        for step in range(12):
            assert batch.action_mask is not None
            labels = game.teacher_actions
            assert not illegal_cells(labels[batch.alive], batch.action_mask[batch.alive]).any()
            assert np.array_equal(game.imitate, heuristic_seats & batch.alive)
            if step == 6:
                saved = game.get_state()
            if step > 6:
                later.append((batch.obs.copy(), labels.copy()))
            batch = game.step(np.zeros_like(labels))  # the teachers play whatever is given
        assert saved is not None
        game.set_state(saved)
        for obs, labels in later:
            batch = game.step(np.zeros_like(labels))
            assert np.array_equal(batch.obs, obs) and np.array_equal(game.teacher_actions, labels)
    finally:
        game.close()


def test_the_ore_heuristic_turns_ore_into_metal(ore_versus: Record) -> None:
    """Its light robots dig ore and deliver it, so its factories refine metal (the heuristic
    never does), and it still delivers ice. (In these 150-step games they mine ore for the
    first 45 steps, not always long enough to bring a load home.)"""
    ore, plain = ore_versus.components["heuristic_ore"], ore_versus.components["heuristic"]
    assert len(ore) == len(plain) == ENVS
    index = REWARD_COMPONENTS.index
    assert all(p[index("ore")] > 0 and p[index("water")] > 0 for p in ore), ore
    assert ore_versus.total("heuristic_ore", "metal") > 10, ore
    assert all(p[index("ore")] == 0 and p[index("metal")] == 0 for p in plain), plain


RAID_STEP = 0.6  # the raid tests' games raid from step 90 of 150, with time to reach the lichen


@cache
def _raid_pair() -> tuple[Record, Record]:
    """The heuristic against ``heuristic-ore-goals`` and against ``heuristic-raid`` (raiding
    from :data:`RAID_STEP`), the same 4 games of 150 steps: one game each way, identical up
    to the raid (the raid draws no random numbers before it)."""
    base = play((("heuristic", heuristic), ("heuristic_ore_goals", heuristic_ore_goals)),
                MAX_STEPS, seed=4)
    raiding = partial(heuristic_raid, rules=Thresholds(raid_from=RAID_STEP))
    raid = play((("heuristic", heuristic), ("heuristic_raid", raiding)), MAX_STEPS, seed=4)
    return base, raid


def test_the_raid_digs_the_other_teams_lichen() -> None:
    """Light robots go to the heuristic's lichen by ``to_enemy_lichen`` and dig it: the
    heuristic ends the same games with less lichen than against the same teacher without the
    raid."""
    base, raid = _raid_pair()
    assert raid.illegal == {"heuristic": 0, "heuristic_raid": 0}
    goal = len(DIRECTIONS) + GOALS.index("enemy_lichen")
    assert raid.moves["heuristic_raid"][goal] > 20, raid.moves["heuristic_raid"]
    assert base.moves["heuristic_ore_goals"][goal] == 0
    assert raid.unit_types["heuristic_raid"][UNIT["dig"]] > 0
    lichen = {name: record.total("heuristic", "lichen")
              for name, record in (("base", base), ("raid", raid))}
    assert lichen["raid"] < 0.9 * lichen["base"], lichen


def test_heavy_robots_raid_from_their_own_share_of_the_game() -> None:
    """With ``heavy_raid_from`` the heavy robots join the raid (a heavy dig takes a whole
    tile's lichen): more of the teacher's robots head for the heuristic's lichen, which ends
    the same games lower than against the light robots' raid alone."""
    _, raid = _raid_pair()
    heavy = play((("heuristic", heuristic),
                  ("heuristic_raid", partial(heuristic_raid, rules=Thresholds(
                      raid_from=RAID_STEP, heavy_raid_from=RAID_STEP)))), MAX_STEPS, seed=4)
    assert heavy.illegal == {"heuristic": 0, "heuristic_raid": 0}
    goal = len(DIRECTIONS) + GOALS.index("enemy_lichen")
    assert heavy.moves["heuristic_raid"][goal] > raid.moves["heuristic_raid"][goal]
    lichen = {name: record.total("heuristic", "lichen")
              for name, record in (("lights", raid), ("heavies too", heavy))}
    assert lichen["heavies too"] < 0.9 * lichen["lights"], lichen


def test_heavy_robots_can_clear_rubble_by_their_nearest_factorys_water() -> None:
    """``Thresholds.spare_water_nearest``: a heavy robot clears rubble while its nearest own
    factory holds the spare water, whatever the team holds on average."""
    from games.lux.bots import SeatPlanes, nearest_factory_water

    def board() -> Board:  # 600 water in one factory, 100 in the other: 350 on average
        b = Board().factory(2, 2, water=0.6).factory(S - 3, S - 3, water=0.1)
        for y, x in ((2, 4), (S - 3, S - 5)):  # rubble next to each, a heavy robot on it
            b.set("rubble", y, x, 0.5).robot(y, x, moves=())
        return b

    def digs(rules: Thresholds) -> list[bool]:
        b = board()
        levels = np.round(np.clip(b.obs, 0, 1) * 255).astype(np.uint8)
        out = heuristic(levels, b.mask, np.random.default_rng(0), ore=True, rules=rules)
        assert not illegal_cells(out, b.mask).any()
        kind = out.reshape(S, S, len(NVEC))[..., 0]
        return [bool(kind[2, 4] == UNIT["dig"]), bool(kind[S - 3, S - 5] == UNIT["dig"])]

    assert digs(Thresholds()) == [False, False]  # 350 on average: below 400
    assert digs(Thresholds(spare_water_nearest=True)) == [True, False]
    levels = np.round(np.clip(board().obs, 0, 1) * 255).astype(np.uint8)
    seat = SeatPlanes.read(levels)
    water, a, b = nearest_factory_water(seat)[0], seat.water[0, 2, 2], seat.water[0, S - 3, S - 3]
    assert (a, b) == (600, 102)  # (100 / 1000 of 255 levels rounds up)
    # Manhattan steps to the factories' tiles: (1, 4) is 1 from the first and 3 from the
    # second; (7, 2) 4 and 3; (2, 6) 3 and 2
    assert [water[0, 0], water[1, 4], water[7, 2], water[2, 6], water[7, 7]] == [a, a, b, b, b]


def _raider(board: Board, rules: Thresholds) -> np.ndarray:
    """``int [S, S, 6]``: the raiding heuristic's choice on ``board`` (``rules``)."""
    levels = np.round(np.clip(board.obs, 0, 1) * 255).astype(np.uint8)
    out = heuristic(levels, board.mask, np.random.default_rng(0), ore=True, raid=True,
                    rules=rules)
    assert not illegal_cells(out, board.mask).any()
    return out.reshape(S, S, len(NVEC))


def _charging_board(progress: float) -> Board:
    """Two light robots at 0.6 of their batteries, one on an own factory tile that may pick up
    power, one 4 cells below the factory; the other team's lichen at (7, 7)."""
    b = Board().factory(2, 2).robot(3, 3, heavy=False, power=0.6, moves=())
    b.allow(3, 3, 0, UNIT["pickup"]).allow(3, 3, 4, RESOURCE["power"])
    b.robot(7, 2, heavy=False, power=0.6)
    b.set("enemy_lichen", 7, 7)
    b.obs[0, PLANE["progress"]] = progress
    return b


def _crowded_factory_board(progress: float) -> Board:
    """A factory that may water or build a light robot, three own robots near its centre."""
    b = Board().factory(2, 2).allow(2, 2, 5, FACTORY["water"], FACTORY["light"])
    for y, x in ((5, 5), (6, 6), (7, 7)):
        b.robot(y, x, moves=())
    b.obs[0, PLANE["progress"]] = progress
    return b


def test_light_robots_fill_their_batteries_before_the_raid() -> None:
    """``Thresholds.raid_charge``: in that share of the game before the raid a light robot
    below :data:`~games.lux.bots.RAID_CHARGED` of its battery picks up power on an own
    factory tile, or goes home; before that window, and once raiding, it does not."""
    from games.lux.bots import RAID_CHARGED

    board = _charging_board
    charge = Thresholds(raid_from=0.85, raid_charge=0.03)
    out = _raider(board(0.83), charge)
    assert out[3, 3, 0] == UNIT["pickup"] and out[3, 3, 4] == RESOURCE["power"]
    assert tuple(out[7, 2, :2]) == (UNIT["move"], 0)  # home: up
    for progress, rules in ((0.83, Thresholds(raid_from=0.85)), (0.80, charge)):
        out = _raider(board(progress), rules)
        assert out[3, 3, 0] != UNIT["pickup"]  # 0.6 of the battery is enough elsewhere
        assert tuple(out[7, 2, :2]) != (UNIT["move"], 0)
    out = _raider(board(0.86), charge)  # raiding: to the other team's lichen
    assert out[3, 3, 0] != UNIT["pickup"]
    assert out[7, 2, 0] == UNIT["move"] and out[7, 2, 1] == 1  # right, towards (7, 7)
    full = board(0.83).set("unit_power", 3, 3, RAID_CHARGED + 0.02)
    assert _raider(full, charge)[3, 3, 0] != UNIT["pickup"]


def test_factories_build_raiders_late_in_the_game() -> None:
    """``Thresholds.raid_lights_from``: from that share of the game a raiding player's
    factories build light robots however many robots stand near; the heuristic's never do."""
    board = _crowded_factory_board
    rules = Thresholds(raid_lights_from=0.8)
    assert _raider(board(0.82), rules)[2, 2, 5] == FACTORY["light"]
    assert _raider(board(0.78), rules)[2, 2, 5] == FACTORY["water"]
    assert _raider(board(0.82), Thresholds())[2, 2, 5] == FACTORY["water"]
    assert board(0.82).act(rules)[2, 2, 5] == FACTORY["water"]  # no raid, no raiders


def test_the_raiders_switches_lie_on_the_edges_of_a_clones_progress_bins() -> None:
    """``heuristic-raider`` changes its choices with the game's progress where the 40 bins of
    a clone's cell decoder (``network.grid_cell_bins=40``) cut the ``progress`` plane, so the
    clone sees each switch as a bin of its own: raiders built from 80 %, batteries filled
    from 87.5 %, the raid from 90 %."""
    import torch

    from games.lux.bots import RAIDER_RULES
    from games.lux.layout import OBS_SCALE
    from selfplay.cell_decoder import bin_index

    levels = np.arange(150, 256)  # the progress plane's values over the last 40 % of a game
    bins = bin_index(torch.from_numpy(levels).float()[:, None] * OBS_SCALE, 40)[:, 0].numpy()
    choices = {"builds a raider": [_raider(_crowded_factory_board(v / 255), RAIDER_RULES)
                                   [2, 2, 5] == FACTORY["light"] for v in levels],
               "fills its battery": [_raider(_charging_board(v / 255), RAIDER_RULES)
                                     [3, 3, 0] == UNIT["pickup"] for v in levels],
               "raids": [tuple(_raider(_charging_board(v / 255), RAIDER_RULES)[7, 2, :2])
                         == (UNIT["move"], 1) for v in levels]}
    switches = {name: levels[1:][np.diff(np.array(chosen, int)) != 0]
                for name, chosen in choices.items()}
    # 204 / 255 is 80 %; 224 the first level of 87.5 %, 230 of 90 %
    assert {k: v.tolist() for k, v in switches.items()} == {
        "builds a raider": [204], "fills its battery": [224, 230], "raids": [230]}
    for name, at in switches.items():
        for level in at:
            k = int(level) - int(levels[0])
            assert bins[k] == bins[k - 1] + 1, (name, level)  # a bin starts at the switch


def test_heavy_robots_hunt_enemy_robots_digging_next_to_them() -> None:
    """``Thresholds.hunt``: a heavy robot that mines steps onto an enemy robot next to it on
    ice or ore (the engine destroys the robot that stays); not onto one on a bare cell, not
    while it carries its cargo home, and light robots never do."""
    hunt = Thresholds(hunt=True)

    def board(enemy: str = "enemy_heavy", under: str | None = "ice", heavy: bool = True,
              ice: float = 0.0) -> Board:
        # free ice three cells to the left, the enemy robot to the right
        b = Board().factory(1, 1).set("ice", 3, 1).set(enemy, 3, 5)
        if under is not None:
            b.set(under, 3, 5)
        return b.robot(3, 4, heavy=heavy, ice=ice)

    assert tuple(board().act(hunt)[3, 4, :2]) == (UNIT["move"], 1)  # onto the enemy
    assert tuple(board().act()[3, 4, :2]) == (UNIT["move"], 3)  # without: to the free ice
    assert tuple(board("enemy_light", "ore").act(hunt)[3, 4, :2]) == (UNIT["move"], 1)
    assert tuple(board(under=None).act(hunt)[3, 4, :2]) == (UNIT["move"], 3)
    assert tuple(board(heavy=False).act(hunt)[3, 4, :2]) == (UNIT["move"], 3)
    home = board(ice=0.8).act(hunt)[3, 4]
    assert home[0] == UNIT["move"] and home[1] != 1  # bound home, it leaves the enemy be


def test_the_hunters_heavy_robots_destroy_the_robots_they_step_onto() -> None:
    """``heuristic-hunter`` against the heuristic in real games (4 games of 150 steps, each
    bot on both seats): every step of its heavy robots onto a cell holding one of the
    heuristic's robots is legal, the engine carries it out, and the next observation shows the
    hunter's heavy robot there and the heuristic's robot gone (seed 6: 14 such steps)."""
    from games.lux.adapter import LuxOptions, LuxVecGame

    game = LuxVecGame(LuxOptions(max_steps=MAX_STEPS), num_envs=ENVS, seed=6)
    rng = np.random.default_rng(6)
    envs, hunter_seat = np.arange(ENVS), np.arange(ENVS) % 2
    batch, attacks = game.reset(), 0
    try:
        for _ in range(MAX_STEPS - 1):
            masks = batch.action_mask
            assert masks is not None
            actions = np.zeros(masks.shape[:3] + (len(NVEC),), np.int64)
            targets = []
            for bot, seats in ((heuristic_hunter, hunter_seat), (heuristic, 1 - hunter_seat)):
                obs = batch.obs[envs, seats]
                chosen = bot(obs, masks[envs, seats], rng)
                assert not illegal_cells(chosen, masks[envs, seats]).any()
                actions[envs, seats] = chosen
                if bot is heuristic_hunter:
                    size = obs.shape[-1]
                    grid = chosen.reshape(ENVS, size, size, len(NVEC))
                    enemy = ((obs[:, PLANE["enemy_heavy"]] > 0)
                             | (obs[:, PLANE["enemy_light"]] > 0))
                    for d, (dy, dx) in enumerate(((-1, 0), (0, 1), (1, 0), (0, -1))):
                        k, y, x = np.nonzero((obs[:, PLANE["own_heavy"]] > 0)
                                             & (grid[..., 0] == UNIT["move"])
                                             & (grid[..., 1] == d))
                        on = enemy[k, y + dy, x + dx]
                        targets += list(zip(k[on], y[on] + dy, x[on] + dx, strict=True))
            batch = game.step(actions)
            for k, y, x in targets:
                after = batch.obs[k, hunter_seat[k]]
                assert after[PLANE["own_heavy"], y, x] > 0
                assert after[PLANE["enemy_heavy"], y, x] == 0
                assert after[PLANE["enemy_light"], y, x] == 0
            attacks += len(targets)
    finally:
        game.close()
    assert attacks >= 10  # 14 in these games
