"""Maps of several sizes in one batch (games.microrts.mixed_sizes): every env plays exactly the
game it would play in a batch of its own size, laid out top-left on the largest board, with
the off_map plane set and all-False masks on the padding."""

from __future__ import annotations

import numpy as np
import pytest

from games.core import GameError
from games.microrts import make
from games.microrts.adapter import PAD_PLANE, MicroRTSVecGame, random_legal_actions
from games.microrts.mixed_sizes import MixedSizeGame
from games.microrts.options import MicroRTSOptions

MAPS = ["basesWorkers8x8A", "NoWhereToRun9x8", "basesWorkers10x10"]
OPTIONS = dict(maps=MAPS, num_selfplay_envs=6, bots=["WorkerRush", "LightRush"], max_steps=120)


@pytest.fixture
def mixed(engine_home):
    game = make("microrts", num_envs=12, seed=3, **OPTIONS)
    yield game
    game.close()


def test_padded_layout(mixed) -> None:
    assert isinstance(mixed, MixedSizeGame)
    spec = mixed.spec
    assert spec.obs_shape == (30, 10, 10) and spec.action_space.grid == (10, 10)
    assert spec.pad_plane == PAD_PLANE
    batch = mixed.reset()
    assert batch.obs.shape == (12, 2, 30, 10, 10) and batch.action_mask.shape == (12, 2, 100, 78)
    sizes = {m.shape for m in mixed.env_map}
    assert sizes == {(8, 8), (8, 9), (10, 10)}
    for e, m in enumerate(mixed.env_map):
        on = np.zeros((10, 10), bool)
        on[:m.height, :m.width] = True
        for s in np.flatnonzero(mixed.alive[e]):
            assert (batch.obs[e, s, PAD_PLANE] == ~on).all()
            assert not batch.obs[e, s, :PAD_PLANE][:, ~on].any()  # nothing else on padding
            assert batch.obs[e, s, :PAD_PLANE][:, on].any(0).all()  # every board cell encoded
            assert not batch.action_mask[e, s].reshape(10, 10, 78)[~on].any()


def test_each_env_plays_its_own_game(mixed, engine_home) -> None:
    """Stepping the padded batch (garbage written on padding cells) gives, env by env, what a
    game of the env's own size gives for the same actions: observations, masks, rewards,
    ends and episodes."""
    opts = MicroRTSOptions(**OPTIONS)
    refs = []
    for shape in sorted({m.shape for m in mixed.env_map}):
        rows = np.array([e for e, m in enumerate(mixed.env_map) if m.shape == shape])
        refs.append((rows, MicroRTSVecGame(opts, 12, seed=3, env_ids=rows)))
    rng = np.random.default_rng(0)
    try:
        batch = mixed.reset()
        ref_batches = [g.reset() for _, g in refs]
        ended = 0
        for _ in range(150):
            actions = random_legal_actions(batch.action_mask, rng)
            grid = actions.reshape(12, 2, 10, 10, 7)
            garbage = rng.integers(0, 4, grid.shape)
            for e, m in enumerate(mixed.env_map):  # actions on padding are ignored
                keep = grid[e, :, :m.height, :m.width].copy()
                grid[e] = garbage[e]
                grid[e, :, :m.height, :m.width] = keep
            batch = mixed.step(actions)
            ended += len(batch.episodes.env)
            for (rows, game), _ in zip(refs, ref_batches, strict=True):
                h, w = game.height, game.width
                own = grid[rows, :, :h, :w].reshape(len(rows), 2, h * w, 7)
                ref = game.step(np.ascontiguousarray(own))
                np.testing.assert_array_equal(batch.obs[rows, :, :, :h, :w], ref.obs)
                got_mask = batch.action_mask[rows].reshape(len(rows), 2, 10, 10, 78)
                np.testing.assert_array_equal(got_mask[:, :, :h, :w].reshape(ref.action_mask.shape),
                                              ref.action_mask)
                np.testing.assert_array_equal(batch.reward[rows], ref.reward)
                np.testing.assert_array_equal(batch.terminated[rows], ref.terminated)
                np.testing.assert_array_equal(batch.truncated[rows], ref.truncated)
                mine = np.isin(batch.episodes.env, rows)
                np.testing.assert_array_equal(batch.episodes.env[mine], rows[ref.episodes.env])
                np.testing.assert_array_equal(batch.episodes.outcome[mine], ref.episodes.outcome)
                if ref.final_obs is not None:
                    done = rows[ref.terminated | ref.truncated]
                    assert batch.final_obs is not None
                    np.testing.assert_array_equal(
                        batch.final_obs[done, :, :, :h, :w],
                        ref.final_obs[ref.terminated | ref.truncated])
        assert ended > 0, "no game ended: the episode bookkeeping went untested"
        assert len(mixed.episode_reward_components()) == len(batch.episodes.env)
    finally:
        for _, g in refs:
            g.close()


def test_bad_actions_and_env_indices(mixed, monkeypatch) -> None:
    mixed.reset()
    with pytest.raises(GameError, match="actions must be integers of shape"):
        mixed.step(np.zeros((12, 2, 64, 7), np.int64))
    # out of range in the last env: refused before any size group steps (the groups before
    # it had stepped, a cycle ahead)
    stepped: list[int] = []
    for k, g in enumerate(mixed._groups):
        monkeypatch.setattr(g.game, "step", lambda a, k=k, f=g.game.step: (stepped.append(k),
                                                                             f(a))[1])
    bad = np.zeros((12, 2, 100, 7), np.int64)
    bad[11, 0, 5, 6] = 49
    with pytest.raises(GameError, match="action component attack = 49 \\(env 11, seat 0, cell "
                                        "5\\) is out of range 0..48"):
        mixed.step(bad)
    assert stepped == []  # no size group stepped
    mixed.step(np.zeros_like(bad))
    assert stepped == list(range(len(mixed._groups)))
    with pytest.raises(GameError, match="out of range"):
        mixed.set_bot(12, "WorkerRush")
    assert mixed.set_bot(11, "coacai") == "CoacAI"
    assert mixed.opponent_names[:6] == ["selfplay"] * 6
    frame = mixed.render(0)
    assert frame.ndim == 3 and frame.shape[2] == 3


def test_workers_match_one_process(engine_home) -> None:
    """Two worker processes (each pads its share to the whole batch's grid) give the batches
    of one process."""
    options = dict(OPTIONS, max_steps=40)
    one = make("microrts", num_envs=6, seed=5, **options)
    two = make("microrts", num_envs=6, seed=5, workers=2, **options)
    rng = np.random.default_rng(1)
    try:
        a, b = one.reset(), two.reset()
        for _ in range(50):
            np.testing.assert_array_equal(a.obs, b.obs)
            np.testing.assert_array_equal(a.action_mask, b.action_mask)
            np.testing.assert_array_equal(a.reward, b.reward)
            actions = random_legal_actions(a.action_mask, rng)
            a, b = one.step(actions), two.step(actions)
    finally:
        one.close()
        two.close()


def test_map_weights_share_the_envs(engine_home) -> None:
    """``map_weights`` [1, 1, 2]: half the side pairs on the third map, both sides of each;
    without weights the layout is the equal cycle it always was."""
    from games.microrts.options import env_layout

    opts = MicroRTSOptions(maps=MAPS, map_weights=[1, 1, 2], num_selfplay_envs=16,
                           bots=["WorkerRush"])
    layout = env_layout(opts, 24)
    sp = np.array(layout.maps[:16])
    assert np.bincount(sp, minlength=3).tolist() == [4, 4, 8]
    assert (sp[0::2] == sp[1::2]).all()  # a side pair shares its map
    bot = np.array(layout.maps[16:])
    assert np.bincount(bot, minlength=3).tolist() == [2, 2, 4]
    equal = env_layout(MicroRTSOptions(maps=MAPS, num_selfplay_envs=6, bots=["WorkerRush"]), 12)
    assert equal.maps == [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="map_weights needs one weight per map of maps"):
        MicroRTSOptions(maps=MAPS, map_weights=[1, 2])
    for weights in ([1, -1, 1], [1, 0, 1]):  # a weight of 0 never played its map
        with pytest.raises(ValueError, match=r"map_weights must each be > 0 \(drop a map"):
            MicroRTSOptions(maps=MAPS, map_weights=weights)


def test_cloning_and_recording_refuse_mixed_sizes(engine_home) -> None:
    """Cloning and recording play one grid: mixed sizes are one line naming them."""
    from games.family import Teachers
    from games.microrts.family import MicroRTSFamily

    family = MicroRTSFamily()
    options = {"maps": MAPS}
    with pytest.raises(GameError, match=r"behaviour cloning plays maps of one size; "
                       r"game.options.maps mixes 10x10, 8x8, 8x9"):
        family.teacher_game("microrts", Teachers(bots=("WorkerRush",)), 4, 0, options)
    with pytest.raises(GameError, match=r"recording \(--record\) plays maps of one size"):
        family.recording_game("microrts", options, 2, 0)
