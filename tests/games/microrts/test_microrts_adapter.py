"""The microRTS VecGame against the real engine: shapes, seats, masks, perspective, episodes."""

from __future__ import annotations

import numpy as np
import pytest

from games.batches import random_actions
from games.core import GameError, Outcome, VecGame
from games.microrts.adapter import (
    OBS_PLANES,
    REWARD_COMPONENTS,
    MicroRTSVecGame,
    random_legal_actions,
)
from games.options import OptionError

DIRS = [(-1, 0), (0, 1), (1, 0), (0, -1)]  # up, right, down, left as (dy, dx)


def noop(game: MicroRTSVecGame) -> np.ndarray:
    return np.zeros((game.num_envs, game.num_seats, game.height * game.width, 7), np.int64)


def test_spec_and_shapes_mixed(make_game) -> None:
    game = make_game(5, num_selfplay_envs=2, bots=["WorkerRush", "LightRush"])
    assert isinstance(game, VecGame)
    spec = game.spec
    assert (spec.num_envs, spec.num_seats, spec.obs_kind) == (5, 2, "grid")
    assert spec.obs_shape == (len(OBS_PLANES), 8, 8) == (30, 8, 8)
    assert spec.state_shape == spec.obs_shape
    assert spec.action_space.nvec == (6, 4, 4, 4, 4, 7, 49)
    assert spec.action_space.gates == (None, (1,), (2,), (3,), (4,), (4,), (5,))
    assert spec.action_space.action_shape == (64, 7)
    assert spec.action_space.mask_shape == (64, 78)
    batch = game.reset()
    assert batch.obs.shape == (5, 2, 30, 8, 8) and batch.obs.dtype == np.uint8
    assert batch.action_mask.shape == (5, 2, 64, 78) and batch.action_mask.dtype == bool
    assert batch.state is batch.obs  # full observability: the state is the observation
    assert batch.reward.shape == (5, 2) and batch.reward.dtype == np.float32
    assert batch.terminated.shape == batch.truncated.shape == (5,)
    # self-play envs 0-1 have two seats; bot envs' second seat is dead
    assert batch.alive.tolist() == [[True, True]] * 2 + [[True, False]] * 3
    assert game.players.tolist() == [[0, 1], [1, 0], [0, -1], [1, -1], [0, -1]]
    assert game.env_bot == [None, None, "WorkerRush", "WorkerRush", "LightRush"]
    dead = ~batch.alive
    assert not batch.obs[dead].any() and not batch.action_mask[dead].any()
    batch = game.step(noop(game))
    assert not batch.obs[dead].any() and (batch.reward[dead] == 0).all()


def test_bot_only_has_one_seat(make_game) -> None:
    game = make_game(3, bots=["Passive"])
    batch = game.reset()
    assert game.num_seats == 1 and batch.obs.shape == (3, 1, 30, 8, 8)
    assert batch.alive.all()


def test_one_hot_planes(make_game) -> None:
    game = make_game(2, num_selfplay_envs=2)
    batch = game.reset()
    for _ in range(2):
        obs = batch.obs[:, :, :27].astype(int)  # [E, A, 27, H, W]
        for start, stop in [(0, 5), (5, 10), (10, 13), (13, 21), (21, 27)]:
            assert (obs[:, :, start:stop].sum(2) == 1).all(), (start, stop)  # one-hot per group
        batch = game.step(noop(game))


def test_masks_only_on_own_idle_units(make_game) -> None:
    game = make_game(4, num_selfplay_envs=2, bots=["WorkerRush"])
    batch = game.reset()
    rng = np.random.default_rng(0)
    for _ in range(60):
        mask, obs = batch.action_mask, batch.obs
        has_mask = mask.any(-1)  # [E, A, HW]
        own = obs[:, :, OBS_PLANES.index("owner_own")].reshape(*has_mask.shape).astype(bool)
        idle = obs[:, :, OBS_PLANES.index("action_none")].reshape(*has_mask.shape).astype(bool)
        assert not (has_mask & ~(own & idle)).any()
        assert mask[has_mask][:, 0].all()  # an idle unit may always do nothing
        batch = game.step(random_actions(game.spec.action_space, mask, rng, (4, 2)))


@pytest.mark.parametrize("rotate", [False, True])
def test_masked_actions_are_never_dropped(make_game, rotate: bool) -> None:
    """A legal action (per the mask) is carried out by the engine: the unit's current-action
    plane shows it on the next step, on both sides, with and without rotation.

    One unit per env acts, and only when no unit is busy: the masks do not account for cells
    and resources reserved by actions already under way, so the engine then drops some
    legal-looking actions (its documented behaviour, not the adapter's)."""
    game = make_game(4, num_selfplay_envs=2, bots=["Passive"], rotate_player1=rotate,
                     max_steps=400)
    batch = game.reset()
    rng = np.random.default_rng(1)
    kept: dict[tuple[int, int], int] = {}
    for _ in range(1200):
        sampled = random_actions(game.spec.action_space, batch.action_mask, rng, (4, 2))
        actions = noop(game)
        issued = []
        for e in range(4):
            if batch.obs[e, :, 22:27].any():
                continue
            seat = int(rng.choice(np.flatnonzero(batch.alive[e])))
            cells = [c for c in np.flatnonzero(batch.action_mask[e, seat].any(-1))
                     if sampled[e, seat, c, 0] != 0]
            if cells:
                cell = int(rng.choice(cells))
                actions[e, seat, cell] = sampled[e, seat, cell]
                issued.append((e, seat, cell, int(sampled[e, seat, cell, 0])))
        batch = game.step(actions)
        for e, seat, cell, kind in issued:
            if batch.terminated[e] or batch.truncated[e]:
                continue
            y, x = divmod(cell, game.width)
            assert batch.obs[e, seat, 21 + kind, y, x] == 1, (e, seat, cell, kind)
            key = (int(game.players[e, seat]), kind)
            kept[key] = kept.get(key, 0) + 1
    for player in (0, 1):  # both sides moved and produced
        for kind in (1, 4):
            assert kept.get((player, kind), 0) > 0, (player, kind, kept)
    assert len({kind for _, kind in kept}) >= 4, kept


def _engine_cell(cell: int, player: int, rotated: bool, cells: int) -> int:
    return cells - 1 - cell if rotated and player == 1 else cell


def _engine_dir(direction: int, player: int, rotated: bool) -> int:
    return (direction + 2) % 4 if rotated and player == 1 else direction


@pytest.mark.parametrize("rotate", [False, True])
def test_random_masked_policy_loses_only_actions_on_reserved_cells(make_game,
                                                                   rotate: bool) -> None:
    """Every unit of both sides takes a uniformly random legal action (per the masks) at every
    step. The engine carries out each one, except exactly those it must refuse: a move or
    production into a cell already reserved (by an action under way, by an earlier unit of
    the same side this cycle in the engine's cell order, or by player 0) or a production the
    side's resources, less those reserved, cannot pay. The masks, like MicroRTS-Py's, are per
    unit and do not see reservations. In a self-play game player 0's orders are issued before
    player 1's are read, so player 0 wins a cell both claim. Predicted here from the engine's
    reservations before the step and the actions as the test decodes them (cells and
    directions into the engine's frame: an independent check of the adapter's encoding);
    observed from each unit's current-action plane after it."""
    import jpype

    game = make_game(4, num_selfplay_envs=4, bots=[], rotate_player1=rotate, max_steps=600)
    utt_types = jpype.JClass("rts.units.UnitTypeTable")().getUnitTypes()
    cost = [int(utt_types.get(k).cost) for k in range(utt_types.size())]
    width, cells = game.width, game.height * game.width
    batch = game.reset()
    rng = np.random.default_rng(3)
    tally = {"kept": 0, "refused": 0}
    kinds_kept: set[int] = set()
    for _ in range(600):
        actions = random_legal_actions(batch.action_mask, rng)
        issued = []  # (env, seat, seat-frame cell, type, predicted carried out)
        for e in range(4):
            gs = game._game_state(e)
            reserved = gs.getResourceUsage()
            used = {int(v) for v in reserved.getPositionsUsed()}
            # player 0's orders are issued before player 1's are read: its cells are taken
            for seat in np.argsort(game.players[e]).tolist():
                player = int(game.players[e, seat])
                spent = int(reserved.getResourcesUsed(player))
                budget = int(gs.getPlayer(player).getResources())
                order = sorted((_engine_cell(c, player, rotate, cells), c) for c in
                               np.flatnonzero(batch.action_mask[e, seat, :, 0]).tolist())
                for engine_cell, cell in order:
                    kind = int(actions[e, seat, cell, 0])
                    if kind == 0:
                        continue
                    target, price = None, 0
                    if kind in (1, 4):  # move, produce: into the neighbouring cell
                        dy, dx = DIRS[_engine_dir(int(actions[e, seat, cell, kind]), player,
                                                  rotate)]
                        y, x = divmod(engine_cell, width)
                        target = (x + dx) + (y + dy) * width
                        price = cost[int(actions[e, seat, cell, 5])] if kind == 4 else 0
                    kept = target not in used and (price == 0 or spent + price <= budget)
                    if kept and target is not None:
                        used.add(target)
                        spent += price
                    issued.append((e, seat, cell, kind, kept))
        batch = game.step(actions)
        for e, seat, cell, kind, predicted in issued:
            if batch.terminated[e] or batch.truncated[e]:
                continue
            y, x = divmod(cell, width)
            if not batch.obs[e, seat, OBS_PLANES.index("owner_own"), y, x]:
                continue  # the unit was killed this cycle
            carried_out = bool(batch.obs[e, seat, 21 + kind, y, x])
            assert carried_out == predicted, (e, seat, cell, kind, predicted)
            tally["kept" if predicted else "refused"] += 1
            if predicted:
                kinds_kept.add(kind)
    assert tally["kept"] > 1000 and tally["refused"] > 100, tally  # 1726 / 367 unrotated
    assert kinds_kept == {1, 2, 3, 4, 5}, kinds_kept


@pytest.mark.parametrize("rotate", [False, True])
def test_moves_go_where_the_seat_points(make_game, rotate: bool) -> None:
    """Directions are in the seat's frame: a worker ordered 'right' appears one cell to the
    right in that seat's next observations (for player 1 too, rotated or not)."""
    game = make_game(2, num_selfplay_envs=2, bots=[], rotate_player1=rotate)
    batch = game.reset()
    rng = np.random.default_rng(2)
    arrivals = 0
    for it in range(40):
        actions = noop(game)
        targets = []
        for e in range(2):
            for seat in (it % 2,):  # one side at a time: player 0 wins contested cells
                mask = batch.action_mask[e, seat]
                movers = [c for c in np.flatnonzero(mask[:, 1]) if mask[c, 6:10].any()]
                if not movers or batch.obs[e, :, 22:27].any():
                    continue
                cell = int(rng.choice(movers))
                d = int(rng.choice(np.flatnonzero(mask[cell, 6:10])))
                actions[e, seat, cell, :2] = (1, d)
                y, x = divmod(cell, game.width)
                targets.append((e, seat, y + DIRS[d][0], x + DIRS[d][1]))
        batch = game.step(actions)
        for _ in range(12):  # a worker moves in 10 cycles
            batch = game.step(noop(game))
        for e, seat, ty, tx in targets:
            assert batch.obs[e, seat, OBS_PLANES.index("owner_own"), ty, tx] == 1
            arrivals += 1
    assert arrivals > 20


def test_player1_sees_the_mirror_image(make_game) -> None:
    """Ownership is relative; without rotation player 1's view is player 0's rotated by 180
    degrees on the point-symmetric basesWorkers8x8; with rotation the two views are equal."""
    plain = make_game(2, num_selfplay_envs=2).reset()
    rotated = make_game(2, num_selfplay_envs=2, rotate_player1=True).reset()
    p0, p1 = plain.obs[0, 0], plain.obs[0, 1]  # env 0: seat 0 is player 0
    assert (p0[11].sum(), p0[12].sum()) == (2, 2)  # two own, two enemy units
    np.testing.assert_array_equal(p1, p0[:, ::-1, ::-1])
    np.testing.assert_array_equal(rotated.obs[0, 1], rotated.obs[0, 0])
    np.testing.assert_array_equal(rotated.obs[1, 0], rotated.obs[1, 1])  # env 1: seat 0 is p1
    np.testing.assert_array_equal(rotated.action_mask[0, 1], rotated.action_mask[0, 0])
    np.testing.assert_array_equal(rotated.obs[0, 0], plain.obs[0, 0])


def test_same_seed_same_game(make_game) -> None:
    """Two games with the same options and actions (deterministic bots) evolve identically."""
    runs = []
    for _ in range(2):
        game = make_game(4, num_selfplay_envs=2, bots=["WorkerRush", "LightRush"],
                         max_steps=150)
        batch = game.reset()
        rng = np.random.default_rng(7)
        trace = []
        for _ in range(300):
            batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng,
                                             (4, 2)))
            trace.append((batch.obs.copy(), batch.reward.copy(), batch.terminated.copy()))
        runs.append(trace)
    for (obs_a, rew_a, term_a), (obs_b, rew_b, term_b) in zip(*runs, strict=True):
        np.testing.assert_array_equal(obs_a, obs_b)
        np.testing.assert_array_equal(rew_a, rew_b)
        np.testing.assert_array_equal(term_a, term_b)


def _random_bot_trace(seed: int | None, envs: tuple[int, int] | None = None) -> list[bytes]:
    """Boards of 3 envs vs RandomBiased (3 games of 40 steps each) while the learner idles."""
    from games.microrts.adapter import MicroRTSOptions
    from games.options import from_mapping

    options = from_mapping(MicroRTSOptions, {"map": "basesWorkers8x8", "bots": ["RandomBiased"],
                                             "num_selfplay_envs": 0, "max_steps": 40}, "")
    game = MicroRTSVecGame(options, 3, seed=seed, envs=envs)
    try:
        batch = game.reset()
        trace = [batch.obs.tobytes()]
        for _ in range(120):
            batch = game.step(noop(game))
            trace.append(batch.obs.tobytes())
        return trace
    finally:
        game.close()


def test_seed_makes_random_bots_replay(engine_home) -> None:
    """With a seed, RandomBiased replays its games (also in a sub-range of envs, as in a worker
    process); another seed or none gives other games."""
    seeded = _random_bot_trace(5)
    assert seeded == _random_bot_trace(5)
    assert seeded != _random_bot_trace(6)
    assert seeded != _random_bot_trace(None)
    assert _random_bot_trace(5, envs=(1, 3)) == _random_bot_trace(5, envs=(1, 3))


def test_truncation_at_max_steps(make_game) -> None:
    """Step ``max_steps`` truncates (not a loss), returns the last board in ``final_obs`` and
    the next game's first board in ``obs``; outcome DRAW by default."""
    game = make_game(2, num_selfplay_envs=2, max_steps=30, rotate_player1=True)
    batch = game.reset()
    first = batch.obs.copy()
    rng = np.random.default_rng(5)
    for _ in range(29):
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng, (2, 2)))
        assert not (batch.truncated.any() or batch.terminated.any())
    last_obs = batch.obs.copy()
    batch = game.step(noop(game))
    assert batch.truncated.all() and not batch.terminated.any()
    assert batch.final_obs is not None
    # the last board moved on from the start and is what step 30 left (idle units only tick)
    assert not np.array_equal(batch.final_obs, first)
    np.testing.assert_array_equal(batch.final_obs[:, :, 14:21], last_obs[:, :, 14:21])
    np.testing.assert_array_equal(batch.obs, first)  # a fresh game
    stats = batch.episodes
    assert len(stats.env) == 4 and (stats.length == 30).all()
    assert (stats.outcome == Outcome.DRAW).all()
    batch = game.step(noop(game))
    assert not batch.truncated.any()


def test_timeout_outcome_none(make_game) -> None:
    game = make_game(1, bots=["Passive"], max_steps=5, timeout_outcome="none")
    game.reset()
    for _ in range(5):
        batch = game.step(noop(game))
    assert batch.truncated.all()
    assert batch.episodes.outcome.tolist() == [Outcome.NONE]


def test_loss_to_worker_rush(make_game) -> None:
    """Idle agents lose to WorkerRush on both sides: terminated, LOSS, win/loss component -1."""
    game = make_game(2, bots=["WorkerRush"], max_steps=1000)
    game.reset()
    finished = []
    for _ in range(600):
        batch = game.step(noop(game))
        if len(batch.episodes.env):
            assert batch.terminated[batch.episodes.env].all()
            finished.append((batch.episodes, game.episode_reward_components()))
            assert batch.final_obs is not None
            for e in batch.episodes.env:  # the last board has no unit of ours
                assert batch.final_obs[e, 0, OBS_PLANES.index("owner_own")].sum() == 0
        if sum(len(s.env) for s, _ in finished) >= 2:
            break
    envs = sorted(int(e) for s, _ in finished for e in s.env)
    assert envs == [0, 1]  # learner as player 0 and as player 1
    for stats, components in finished:
        assert (stats.outcome == Outcome.LOSS).all()
        assert components.shape == (len(stats.env), len(REWARD_COMPONENTS))
        assert (components[:, 0] == -1).all()
        np.testing.assert_allclose(components @ np.array(game.options.reward_weights), stats.ret)


def test_win_against_passive(make_game) -> None:
    game = make_game(1, map="melee4x4light2", bots=["Passive"], max_steps=2000)
    batch = game.reset()
    rng = np.random.default_rng(0)
    for _ in range(1500):
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng, (1, 1)))
        if len(batch.episodes.env):
            break
    assert batch.terminated.all()
    assert batch.episodes.outcome.tolist() == [Outcome.WIN]
    assert game.episode_reward_components()[0, 0] == 1


def test_reward_is_weighted_components(make_game) -> None:
    weights = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    game = make_game(2, num_selfplay_envs=2, reward_weights=list(weights))
    batch = game.reset()
    rng = np.random.default_rng(3)
    total = 0.0
    for _ in range(200):
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng, (2, 2)))
        components = game.last_reward_components  # [E, A, 6]
        np.testing.assert_allclose(batch.reward, components @ np.array(weights), rtol=1e-6)
        total += np.abs(components).sum()
    assert total > 0  # random play gathers resources at least


def test_batches_stay_valid_for_one_more_step(make_game) -> None:
    game = make_game(2, num_selfplay_envs=2)
    rng = np.random.default_rng(4)
    batch = game.reset()
    previous = game.step(random_actions(game.spec.action_space, batch.action_mask, rng, (2, 2)))
    snapshot = previous.obs.copy(), previous.action_mask.copy()
    game.step(random_actions(game.spec.action_space, previous.action_mask, rng, (2, 2)))
    np.testing.assert_array_equal(previous.obs, snapshot[0])
    np.testing.assert_array_equal(previous.action_mask, snapshot[1])


def test_partial_observability_keeps_an_unfogged_state(make_game) -> None:
    game = make_game(2, map="basesWorkers16x16", num_selfplay_envs=2, partial_obs=True)
    batch = game.reset()
    for _ in range(3):
        batch = game.step(noop(game))
    assert batch.state is not batch.obs
    units_seen = batch.obs[:, :, 14:21].sum(axis=(2, 3, 4))
    units_all = batch.state[:, :, 14:21].sum(axis=(2, 3, 4))
    assert (units_seen < units_all).all()  # the enemy base is out of sight at the start
    enemy = OBS_PLANES.index("owner_enemy")
    assert batch.obs[:, :, enemy].sum() == 0 and (batch.state[:, :, enemy].sum((2, 3)) > 0).all()


def test_fog_changes_what_a_seat_sees_not_the_game(make_game) -> None:
    """Under fog, self-play games play exactly as without it (their unfogged state is the fully
    observed game's observation, step for step), while a bot env sharing their engine client
    keeps its fog (its bot plays on what it sees) and its unfogged state holds every unit."""
    fogged = make_game(3, map="basesWorkers16x16", num_selfplay_envs=2, bots=["POLightRush"],
                       partial_obs=True)
    full = make_game(3, map="basesWorkers16x16", num_selfplay_envs=2, bots=["POLightRush"])
    batch, reference = fogged.reset(), full.reset()
    rng = np.random.default_rng(3)
    types = slice(14, 21)  # resource .. ranged: a unit on the cell
    hidden = 0
    for step in range(400):
        np.testing.assert_array_equal(batch.state[:2], reference.obs[:2], err_msg=str(step))
        np.testing.assert_array_equal(batch.action_mask[:2], reference.action_mask[:2])
        np.testing.assert_array_equal(batch.reward[:2], reference.reward[:2])
        units = fogged._engine.game_state(2).getPhysicalGameState().getUnits().size()
        assert batch.state[2, 0, types].sum() == units, step
        hidden += int(units - batch.obs[2, 0, types].sum())
        actions = random_actions(fogged.spec.action_space, batch.action_mask, rng, (3, 2))
        batch = fogged.step(actions)
        reference = full.step(np.concatenate([actions[:2], random_actions(
            full.spec.action_space, reference.action_mask[2:], rng, (1, 2))]))
    assert hidden > 0  # the bot env's observation was fogged


def test_render_frame(make_game) -> None:
    game = make_game(2, bots=["WorkerRush"], render_cell=16)
    game.reset()
    frame = game.render(1)
    assert frame.shape == (8 * 16, 8 * 16, 3) and frame.dtype == np.uint8
    colors = {tuple(c) for c in frame.reshape(-1, 3)}
    assert (70, 130, 255) in colors and (235, 75, 60) in colors  # both players drawn
    with pytest.raises(GameError, match="out of range"):
        game.render(5)


def test_render_final_shows_the_end_of_the_finished_game(make_game) -> None:
    """Idle seats lose to WorkerRush: the last position (what a video used to miss; ``render``
    already shows the next game) holds only the winner's units, in the same orientation with
    ``rotate_player1``."""
    blue, red = (70, 130, 255), (235, 75, 60)
    finals = []
    for rotate in (False, True):
        game = make_game(2, bots=["WorkerRush"], render_cell=8, rotate_player1=rotate)
        batch = game.reset(seed=0)
        start = game.render_final(1)  # nothing finished yet: the current position
        np.testing.assert_array_equal(start, game.render(1))
        actions = np.zeros((2, 1, 64, 7), np.int64)
        ended = np.zeros(2, bool)
        for _ in range(1000):
            batch = game.step(actions)
            assert not batch.truncated.any()
            ended |= batch.terminated
            if ended.all():
                break
        assert ended.all()
        frames = [game.render_final(e) for e in range(2)]
        for e, (lost, won) in enumerate([(blue, red), (red, blue)]):  # seat 0: player e
            colors = {tuple(c) for c in frames[e].reshape(-1, 3)}
            assert won in colors and lost not in colors, e
            assert lost in {tuple(c) for c in game.render(e).reshape(-1, 3)}  # a new game
        finals.append(frames)
    for plain, rotated in zip(*finals, strict=True):
        np.testing.assert_array_equal(plain, rotated)


def test_bad_options(make_game) -> None:
    with pytest.raises(OptionError, match="unknown key"):
        make_game(2, nmu_selfplay_envs=2)
    with pytest.raises(OptionError, match="reward_weights"):
        make_game(2, reward_weights=[1.0, 2.0])
    with pytest.raises(GameError, match="exceeds"):
        make_game(2, num_selfplay_envs=4)
    with pytest.raises(GameError, match="bots is empty"):
        make_game(3, num_selfplay_envs=2, bots=[])
    game = make_game(2, bots=["Passive"])
    game.reset()
    with pytest.raises(GameError, match="shape"):
        game.step(np.zeros((2, 1, 63, 7), np.int64))
    with pytest.raises(GameError, match="integers"):
        game.step(np.zeros((2, 1, 64, 7), np.float32))


def test_closed_game_refuses_to_step(make_game) -> None:
    game = make_game(1, bots=["Passive"])
    game.reset()
    game.close()
    game.close()  # idempotent
    with pytest.raises(GameError, match="closed"):
        game.step(noop(game))


def test_registry_builds_microrts(engine_home) -> None:
    from games.registry import make_game

    game = make_game("microrts", num_envs=2, options={"map": "basesWorkers8x8",
                                                      "num_selfplay_envs": 2})
    try:
        assert game.spec.num_seats == 2
        assert game.reset().obs.shape == (2, 2, 30, 8, 8)
    finally:
        game.close()


def test_fog_planes_follow_sight(make_game) -> None:
    """With fog, a cell is either visible (exactly one plane per one-hot group, the unfogged
    board's unit if any) or hidden (no plane but wall)."""
    game = make_game(2, map="basesWorkers16x16", num_selfplay_envs=2, partial_obs=True,
                     rotate_player1=True)
    batch = game.reset()
    rng = np.random.default_rng(6)
    visible_plane = OBS_PLANES.index("visible")
    for step in range(150):
        if step % 10 == 0:
            obs, state = batch.obs.astype(int), batch.state.astype(int)
            visible = obs[:, :, visible_plane].astype(bool)  # [E, A, H, W]
            assert visible.any(axis=(2, 3)).all()
            groups = [(0, 5), (5, 10), (10, 13), (13, 21), (21, 27)]
            for start, stop in groups:
                counts = obs[:, :, start:stop].sum(2)
                assert (counts[visible] == 1).all() and (counts[~visible] == 0).all()
            seen = visible[:, :, None]
            np.testing.assert_array_equal(obs[:, :, 13:21] * seen, state[:, :, 13:21] * seen)
            assert (state[:, :, visible_plane] == 1).all()
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng, (2, 2)))


def test_opponent_names(make_game) -> None:
    game = make_game(5, num_selfplay_envs=2, bots=["workerrush", "LightRush"])
    assert game.opponent_names == ["selfplay", "selfplay", "WorkerRush", "WorkerRush",
                                   "LightRush"]
    assert game.opponent_names[2:] == game.env_bot[2:]
    bots_only = make_game(3, bots=["Passive"])
    assert bots_only.opponent_names == ["Passive"] * 3


@pytest.mark.parametrize("dtype", [bool, np.int32])
def test_random_legal_actions_respect_the_mask(make_game, dtype: type) -> None:
    game = make_game(3, num_selfplay_envs=2, bots=["WorkerRush"])
    batch = game.reset()
    rng = np.random.default_rng(0)
    offsets = np.cumsum((0, *game.spec.action_space.nvec))
    out = np.full((3, 2, 64, 7), 9, np.int64)
    for _ in range(50):
        mask = batch.action_mask.astype(dtype)
        actions = random_legal_actions(mask, rng, out=out)
        assert actions is out
        units = batch.action_mask[..., 0]
        assert not actions[~units].any()  # cells without a unit that may act: zeros
        for k in range(7):
            part = batch.action_mask[units][:, offsets[k]:offsets[k + 1]]  # [U, n_k]
            chosen = actions[units][:, k]
            legal = part[np.arange(len(part)), chosen]
            assert (legal | ~part.any(1)).all(), k
        batch = game.step(actions)
    fresh = random_legal_actions(batch.action_mask, rng)
    assert fresh.shape == (3, 2, 64, 7) and fresh.dtype == np.int64


def test_engine_masks_are_empty_where_no_unit_may_act(make_game) -> None:
    """The sparse mask conversion relies on it: an engine mask row with column 0 (no-op) unset
    is all zero."""
    game = make_game(4, num_selfplay_envs=2, bots=["WorkerRush"])
    batch = game.reset()
    rng = np.random.default_rng(3)
    for _ in range(300):
        batch = game.step(random_legal_actions(batch.action_mask, rng))
        for g in game.groups:
            rows = g.mask.reshape(-1, g.mask.shape[-1])
            assert not rows[rows[:, 0] == 0].any()


@pytest.mark.parametrize("options", [
    dict(num_selfplay_envs=3),
    dict(num_selfplay_envs=3, alternate_sides=False),
    dict(num_selfplay_envs=2, rotate_player1=True),
    dict(num_selfplay_envs=0),
    dict(num_selfplay_envs=0, rotate_player1=True, alternate_sides=False),
])
def test_every_seat_reads_its_engine_row(make_game, options: dict) -> None:
    """Observations and masks of seat (e, s) are those of engine row ``_seat_row[e, s]`` of its
    group (rotated by 180 degrees for player 1 with ``rotate_player1``), whatever the plans."""
    from games.microrts.options import ACTION_NVEC
    from games.microrts.plans import rotated_mask_index as _rotated_mask_index

    game = make_game(7, bots=["WorkerRush", "Passive"], max_steps=60, **options)
    cells = game.height * game.width
    rot_index = _rotated_mask_index(ACTION_NVEC, cells)
    batch = game.reset()
    rng = np.random.default_rng(5)
    for step in range(90):
        if step % 15 == 0:
            for e, s in np.argwhere(game.alive):
                g = game.groups[game._seat_group[e, s]]
                row = game._seat_row[e, s]
                planes = g.obs[row].reshape(cells, -1)  # [HW, 27] int32
                mask = (g.mask[row] > 0).reshape(-1)  # [HW * 78]
                if game._rotated[e, s]:
                    planes, mask = planes[::-1], mask[rot_index]
                np.testing.assert_array_equal(
                    batch.obs[e, s, :27].reshape(27, cells), planes.T, err_msg=f"{e} {s}")
                np.testing.assert_array_equal(batch.action_mask[e, s].reshape(-1), mask)
        batch = game.step(random_legal_actions(batch.action_mask, rng))


def test_episode_lengths_add_up(make_game) -> None:
    """Per env, episodes follow each other: their lengths add up to the step at which the last
    one ended; truncated ones last exactly max_steps, terminated ones at most that."""
    game = make_game(4, bots=["WorkerRush", "Passive"], max_steps=300, alternate_sides=False)
    game.reset()
    ends: dict[int, list[tuple[int, int, bool]]] = {e: [] for e in range(4)}
    for t in range(1, 1001):
        batch = game.step(noop(game))
        for e, length in zip(batch.episodes.env.tolist(), batch.episodes.length.tolist(),
                             strict=True):
            ends[e].append((t, length, bool(batch.truncated[e])))
    assert any(not cut for e in ends for _, _, cut in ends[e])  # WorkerRush won some games
    assert any(cut for e in ends for _, _, cut in ends[e])  # Passive games were truncated
    for e, episodes in ends.items():
        assert episodes
        assert sum(length for _, length, _ in episodes) == episodes[-1][0], e
        for _, length, cut in episodes:
            assert length == 300 if cut else 0 < length <= 300


def test_restart_and_set_bot_start_a_new_game_in_one_env(make_game) -> None:
    """``restart`` abandons one env's game (fresh board, its episode clock restarts) without
    touching the others; ``set_bot`` swaps that env's engine opponent."""
    game = make_game(2, bots=["Passive"], max_steps=300)
    first = game.reset()
    initial = first.obs.copy()
    noop = np.zeros(game._action_shape, np.int64)
    rng = np.random.default_rng(0)
    batch = first
    for _ in range(40):
        batch = game.step(random_legal_actions(batch.action_mask, rng))
    moved = batch.obs.copy()
    assert not np.array_equal(moved[0], initial[0])  # workers moved
    assert game.set_bot(0, "workerrush") == "WorkerRush"
    assert game.opponent_names == ["Passive", "Passive"]  # from env 0's next game on
    batch = game.restart([0])
    assert game.opponent_names == ["WorkerRush", "Passive"]
    np.testing.assert_array_equal(batch.obs[0], initial[0])
    np.testing.assert_array_equal(batch.obs[1], moved[1])
    assert not batch.episodes.env.size
    # without restart, env 1's game in progress goes on against Passive
    assert game.set_bot(1, "WorkerRush") == "WorkerRush"
    ends: dict[int, tuple[int, int]] = {}
    for _ in range(300):
        batch = game.step(noop)
        for env, length, outcome in zip(batch.episodes.env, batch.episodes.length,
                                        batch.episodes.outcome, strict=True):
            ends.setdefault(int(env), (int(length), int(outcome)))
        if len(ends) == 2:
            break
    assert ends[0][1] == Outcome.LOSS  # WorkerRush beats a player who does nothing
    assert ends[0][0] < 300
    assert ends[1] == (300, Outcome.DRAW)  # Passive: env 1's game ran out its clock
    assert game.opponent_names == ["WorkerRush", "WorkerRush"]  # env 1's next game
    with pytest.raises(GameError, match="self-play"):
        make_game(2, num_selfplay_envs=1, bots=["Passive"]).set_bot(0, "WorkerRush")
