"""Maps by name or path (safe XML parsing) and bots by name, against the real engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from games.core import GameError
from games.microrts import bots, maps
from games.microrts.adapter import OBS_PLANES

OBS_WALL = OBS_PLANES.index("wall")


@pytest.mark.parametrize("name", ["basesWorkers8x8", "BASESWORKERS8X8", "8x8/basesWorkers8x8",
                                  "maps/8x8/basesWorkers8x8.xml"])
def test_shipped_map_by_name(name: str, engine_home: Path) -> None:
    info = maps.resolve_map(name)
    assert info.name == "basesWorkers8x8"
    assert info.shape == (8, 8)
    assert info.path == (engine_home / "maps/8x8/basesWorkers8x8.xml").resolve()


def test_map_sizes_and_walls(engine_home: Path) -> None:
    assert maps.resolve_map("NoWhereToRun9x8").shape == (8, 9)  # height, width
    obstacle = maps.resolve_map("basesWorkers8x8Obstacle")
    assert obstacle.walls.dtype == bool and obstacle.walls.sum() == 8
    assert len(maps.shipped_maps()) > 100


def test_unknown_map_suggests(engine_home: Path) -> None:
    with pytest.raises(GameError, match="did you mean basesWorkers8x8") as info:
        maps.resolve_map("baseWorkers8x8")
    assert "basesWorkers16x16" in str(info.value)


def test_missing_map_file(tmp_path: Path) -> None:
    with pytest.raises(GameError, match="does not exist"):
        maps.resolve_map(str(tmp_path / "nope.xml"))


def test_invalid_map_xml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text('<rts.PhysicalGameState width="8" height="8"><terrain>')
    with pytest.raises(GameError, match="invalid XML"):
        maps.resolve_map(str(bad))


@pytest.mark.parametrize("payload", [
    '<!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]><rts.PhysicalGameState/>',
    '<!ENTITY x "y"><rts.PhysicalGameState/>',
])
def test_map_with_entities_is_refused(tmp_path: Path, payload: str) -> None:
    evil = tmp_path / "evil.xml"
    evil.write_text(payload)
    with pytest.raises(GameError, match="DOCTYPE/ENTITY"):
        maps.resolve_map(str(evil))


def test_map_terrain_must_match_size(tmp_path: Path) -> None:
    odd = tmp_path / "odd.xml"
    odd.write_text('<rts.PhysicalGameState width="2" height="2"><terrain>000</terrain>'
                   '</rts.PhysicalGameState>')
    with pytest.raises(GameError, match="4 characters"):
        maps.resolve_map(str(odd))


def test_maps_of_different_sizes_rejected(engine_home: Path, make_game) -> None:
    with pytest.raises(GameError, match="same size"):
        maps.resolve_maps(["basesWorkers8x8", "basesWorkers16x16"])
    with pytest.raises(GameError, match="same size"):
        make_game(2, maps=["basesWorkers8x8", "basesWorkers10x10"])


def test_user_map_path_plays(tmp_path: Path, engine_home: Path, make_game) -> None:
    text = (engine_home / "maps/8x8/basesWorkers8x8Obstacle.xml").read_text()
    user = tmp_path / "mine.xml"
    user.write_text(text)
    game = make_game(2, map=str(user), bots=["WorkerRush"])
    batch = game.reset()
    assert game.map_infos[0].name == "mine"
    assert batch.obs[:, 0, OBS_WALL].sum() == 2 * 8  # the wall plane
    batch = game.step(np.zeros((2, 1, 64, 7), np.int64))
    assert batch.obs.shape == (2, 1, 29, 8, 8)


def test_several_maps_cycle_over_envs(make_game) -> None:
    game = make_game(4, maps=["basesWorkers8x8", "basesWorkers8x8Obstacle"], bots=["Passive"])
    batch = game.reset()
    plain, obstacle = "basesWorkers8x8", "basesWorkers8x8Obstacle"
    # side pairs share a map: each map is played from both sides
    assert [m.name for m in game.env_map] == [plain, plain, obstacle, obstacle]
    assert game.players[:, 0].tolist() == [0, 1, 0, 1]
    assert batch.obs[:, 0, OBS_WALL].sum(axis=(1, 2)).tolist() == [0, 0, 8, 8]
    for _ in range(3):
        batch = game.step(np.zeros((4, 1, 64, 7), np.int64))
    # terrain is the engine's, not only our plane: units never stand on walls
    units = batch.obs[:, 0, 14:21].sum(1)
    assert not (units.astype(bool) & batch.obs[:, 0, OBS_WALL].astype(bool)).any()


@pytest.mark.parametrize("num_sp, num_envs, bot_names", [
    (0, 16, ["WorkerRush", "LightRush", "Passive", "RandomBiased"]),
    (8, 24, ["WorkerRush", "LightRush", "RandomBiased", "CoacAI"]),  # the default layout
    (4, 10, ["WorkerRush", "Passive", "LightRush"]),
])
def test_layout_plays_every_map_from_both_sides(num_sp: int, num_envs: int,
                                                bot_names: list[str]) -> None:
    """No map is tied to a side, in self-play or against each bot (no JVM needed)."""
    from games.microrts.adapter import MicroRTSOptions, env_layout

    opts = MicroRTSOptions(maps=["basesWorkers8x8", "basesWorkers8x8Obstacle"], bots=bot_names,
                           num_selfplay_envs=num_sp)
    layout = env_layout(opts, num_envs)
    seat0 = layout.players[:, 0]
    for group in (range(num_sp), range(num_sp, num_envs)):
        for k in (0, 1) if len(group) else ():
            assert {int(seat0[e]) for e in group if layout.maps[e] == k} == {0, 1}, (group, k)
    bot_envs = range(num_sp, num_envs)
    for name in {layout.bots[e].name for e in bot_envs}:  # type: ignore[union-attr]
        envs = [e for e in bot_envs if layout.bots[e].name == name]  # type: ignore[union-attr]
        for k in {layout.maps[e] for e in envs}:  # each map a bot meets, from both sides
            assert {int(seat0[e]) for e in envs if layout.maps[e] == k} == {0, 1}


# --------------------------------------------------------------------------- bots


def test_bot_names_case_insensitive() -> None:
    assert bots.resolve_bot("workerrush").name == "WorkerRush"
    assert bots.resolve_bot("COACAI").java_class == "ai.coac.CoacAI"
    assert bots.resolve_bot("coac").name == "CoacAI"
    assert bots.resolve_bot("ai.abstraction.LightRush").java_class == "ai.abstraction.LightRush"


def test_unknown_bot_lists_valid_names() -> None:
    with pytest.raises(GameError, match="unknown microRTS bot 'WorkerRsh'") as info:
        bots.resolve_bot("WorkerRsh")
    message = str(info.value)
    assert "did you mean WorkerRush" in message
    for name in ("WorkerRush", "CoacAI", "Mayari", "Droplet", "Izanagi", "Tiamat", "MixedBot",
                 "GRojoA3N", "RandomBiased", "Passive", "NaiveMCTS"):
        assert name in message


def test_unknown_bot_in_options(make_game) -> None:
    with pytest.raises(GameError, match="unknown microRTS bot"):
        make_game(1, bots=["NoSuchBot"])


def test_every_bot_constructs_and_clones(engine_home: Path) -> None:
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    for name in bots.bot_names():
        ai = bots.make_bot(bots.resolve_bot(name), utt)
        clone = ai.clone()  # the engine clones the bot at every reset
        assert clone is not None, name
        clone.reset()


def test_missing_java_class_is_a_game_error(engine_home: Path) -> None:
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    with pytest.raises(GameError, match="not found"):
        bots.make_bot(bots.resolve_bot("ai.NoSuchAI"), utt)


def test_scripted_bots_play_through_resets(make_game) -> None:
    """Every non-search bot plays and survives the engine's clone-at-reset."""
    names = [b.name for b in bots._BOTS if b.kind != "search"]
    game = make_game(len(names), bots=names, alternate_sides=False, max_steps=8)
    assert game.env_bot == names
    game.reset()
    for _ in range(20):
        batch = game.step(np.zeros((len(names), 1, 64, 7), np.int64))
    assert batch.obs.shape[0] == len(names)
