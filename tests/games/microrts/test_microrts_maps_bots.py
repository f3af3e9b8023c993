"""Maps by name or path (safe XML parsing) and bots by name, against the real engine."""

from __future__ import annotations

import re
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


def test_unknown_map_lists_every_shipped_map(engine_home: Path) -> None:
    """The error names all valid maps (grouped by size folder), not a few examples."""
    with pytest.raises(GameError, match="unknown microRTS map 'noSuchMap'") as info:
        maps.resolve_map("noSuchMap")
    message = str(info.value)
    shipped = maps.shipped_maps()
    assert len(shipped) > 100 and f"The {len(shipped)} shipped maps" in message
    listed = {name for group in message.split("by folder: ", 1)[1].split("; ")
              for name in group.split(": ", 1)[1].split(", ")}
    assert listed == set(shipped)
    assert message.index("4x4: ") < message.index("8x8: ") < message.index("16x16: ")
    assert "\n" not in message


def test_missing_map_file(tmp_path: Path) -> None:
    with pytest.raises(GameError, match="does not exist"):
        maps.resolve_map(str(tmp_path / "nope.xml"))


def test_invalid_map_xml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text('<rts.PhysicalGameState width="8" height="8"><terrain>')
    with pytest.raises(GameError, match="invalid XML") as got:
        maps.resolve_map(str(bad))
    assert "selfplay setup" not in str(got.value)  # the user's own map: no engine repair


def test_a_damaged_shipped_map_names_the_repair(tmp_path: Path, monkeypatch) -> None:
    """Guards: an engine map changed in place was "invalid XML" like a user's own file, with
    no word of the command that fetches the engine's files again."""
    import shutil

    from games.microrts import engine

    home = tmp_path / "engine"
    shutil.copytree(engine.ensure_engine(), home)
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    (home / "maps/8x8/basesWorkers8x8.xml").write_text("<rts.PhysicalGameState")
    with pytest.raises(GameError, match=r"invalid XML.*one of the engine's own maps: "
                                        r"`selfplay setup microrts`"):
        maps.parse_map(home / "maps/8x8/basesWorkers8x8.xml")


@pytest.mark.parametrize("payload", [
    '<!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]><rts.PhysicalGameState/>',
    '<!ENTITY x "y"><rts.PhysicalGameState/>',
])
def test_map_with_entities_is_refused(tmp_path: Path, payload: str) -> None:
    evil = tmp_path / "evil.xml"
    evil.write_text(payload)
    with pytest.raises(GameError, match="DOCTYPE/ENTITY"):
        maps.resolve_map(str(evil))


_TINY_MAP = ('<rts.PhysicalGameState width="2" height="2"><terrain>0000</terrain>'
             '</rts.PhysicalGameState>')


@pytest.mark.parametrize("text, encoding", [
    # the audit's bypass: in UTF-16 the bytes never spell "<!DOCTYPE"
    ('<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE m SYSTEM "http://example.invalid/m.dtd">'
     f"\n{_TINY_MAP}", "utf-16"),
    (f'<?xml version="1.0" encoding="UTF-16LE"?><!DOCTYPE m [<!ENTITY x "y">]>{_TINY_MAP}',
     "utf-16-le"),  # no byte-order mark
    (f'<!ENTITY x SYSTEM "file:///etc/passwd">{_TINY_MAP}', "utf-16"),
    (f'<?xml version="1.0" encoding="UTF-16BE"?>\n<!ENTITY x "y">{_TINY_MAP}', "utf-16-be"),
    (f'<?xml version="1.0" encoding="ISO-8859-1"?><!DOCTYPE m SYSTEM "http://x/">{_TINY_MAP}',
     "latin-1"),
], ids=["utf16-doctype-system", "utf16le-internal-entity", "utf16-entity", "utf16be-entity",
        "latin1-doctype"])
def test_map_declarations_refused_in_any_encoding(tmp_path: Path, text: str,
                                                  encoding: str) -> None:
    evil = tmp_path / "evil.xml"
    data = text.encode(encoding)
    evil.write_bytes(data)
    with pytest.raises(GameError, match="declares a DOCTYPE/ENTITY") as info:
        maps.resolve_map(str(evil))
    assert str(evil) in str(info.value)


def test_utf16_map_without_declarations_is_read(tmp_path: Path, engine_home: Path) -> None:
    """The check refuses declarations, not encodings: a clean UTF-16 map parses."""
    text = (engine_home / "maps/8x8/basesWorkers8x8Obstacle.xml").read_text()
    text = text.split("?>", 1)[1] if text.startswith("<?xml") else text
    user = tmp_path / "utf16.xml"
    user.write_bytes(('<?xml version="1.0" encoding="UTF-16"?>' + text).encode("utf-16"))
    info = maps.resolve_map(str(user))
    assert info.shape == (8, 8) and info.walls.sum() == 8


def test_map_terrain_must_match_size(tmp_path: Path) -> None:
    odd = tmp_path / "odd.xml"
    odd.write_text('<rts.PhysicalGameState width="2" height="2"><terrain>000</terrain>'
                   '</rts.PhysicalGameState>')
    with pytest.raises(GameError, match="4 characters"):
        maps.resolve_map(str(odd))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('<rts.Player ID="1" resources="5">\n    </rts.Player>', ""),
     "must hold rts.Player ID=\"0\" and ID=\"1\""),
    (lambda t: t.replace('player="1" x="5" y="6"', 'player="5" x="5" y="6"'),
     "belongs to player 5"),
    (lambda t: t.replace('player="1" x="5" y="6"', 'player="1" x="9" y="6"'),
     r"at \(9, 6\) is outside the 8x8 board"),
    (lambda t: t.replace('ID="7"', 'ID="6"'), "two units have ID '6'"),  # Java NPE mid-game
    (lambda t: t.replace('resources="20"', 'resources="lots"', 1),
     "resources must be an integer, got 'lots'"),
    (lambda t: t.replace('type="Worker"', 'type="Knight"', 1),
     "has type 'Knight'; the engine's types are Resource, Base"),
    # a Java NullPointerException naming nothing in the map, or games decided at their
    # first step (the review played 2 "draws" scored as losses on a map without units)
    (lambda t: t.replace('x="1" y="1"', 'x="2" y="1"'), r"units '6' and '8' are both at \(2, 1\)"),
    (lambda t: t.replace(' ID="9"', ""), "a unit's ID must be a whole number, got None"),
    (lambda t: t.replace('<rts.Player ID="1" resources="5">', '<rts.Player ID="1" '
                         'resources="abc">'), "player 1: resources must be a whole number"),
    (lambda t: t.replace('player="1" x="5"', 'player="-1" x="5"').replace(
        'player="1" x="6"', 'player="-1" x="6"'), "player 1 has no units"),
])
def test_maps_the_engine_fails_on_mid_game_are_refused(engine_home: Path, tmp_path: Path,
                                                       edit, message: str) -> None:
    """Guards: a one-player map, a unit of player 5 and a unit off the board were Java index
    errors during the first step, naming neither the map nor what is wrong."""
    text = (engine_home / "maps/8x8/basesWorkers8x8.xml").read_text()
    changed = edit(text)
    assert changed != text
    bad = tmp_path / "bad.xml"
    bad.write_text(changed)
    with pytest.raises(GameError, match=f"bad.xml'?: .*{message}"):
        maps.resolve_map(str(bad))


def test_maps_of_one_size_asked_for(engine_home: Path) -> None:
    """Where one grid shape is needed (recording, replays) mixed sizes are refused; the game
    itself pads them (test_microrts_mixed_sizes.py)."""
    with pytest.raises(GameError, match="same size"):
        maps.resolve_maps(["basesWorkers8x8", "basesWorkers16x16"])
    assert len(maps.resolve_maps(["basesWorkers8x8", "basesWorkers16x16"], same_size=False)) == 2


def test_user_map_path_plays(tmp_path: Path, engine_home: Path, make_game) -> None:
    text = (engine_home / "maps/8x8/basesWorkers8x8Obstacle.xml").read_text()
    user = tmp_path / "mine.xml"
    user.write_text(text)
    game = make_game(2, map=str(user), bots=["WorkerRush"])
    batch = game.reset()
    assert game.map_infos[0].name == str(user.resolve())  # a user's map: its path
    assert batch.obs[:, 0, OBS_WALL].sum() == 2 * 8  # the wall plane
    batch = game.step(np.zeros((2, 1, 64, 7), np.int64))
    assert batch.obs.shape == (2, 1, 30, 8, 8)


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


def test_unknown_bot_suggests_each_bot_once() -> None:
    """A misspelling close to both a bot's name and its alias suggests the bot once."""
    with pytest.raises(GameError, match=r"\(did you mean CoacAI\?\)"):
        bots.resolve_bot("coacaii")


# the bots named after the audit "every bot in the shipped jars by name" (bots.py docstring)
_ADDED_BOTS = {
    "Portfolio": "ai.portfolio.PortfolioAI", "PortfolioAI": "ai.portfolio.PortfolioAI",
    "IDRTMinimaxRandomized": "ai.minimax.RTMiniMax.IDRTMinimaxRandomized",
    "IDABCD": "ai.minimax.ABCD.IDABCD", "TwoPhaseNaiveMCTS": "ai.mcts.naivemcts.TwoPhaseNaiveMCTS",
    "TwoPhaseNaiveMCTSPerNode": "ai.mcts.naivemcts.TwoPhaseNaiveMCTSPerNode",
    "MLPSMCTS": "ai.mcts.mlps.MLPSMCTS", "BS1_NaiveMCTS": "ai.mcts.believestatemcts.BS1_NaiveMCTS",
    "BS2_NaiveMCTS": "ai.mcts.believestatemcts.BS2_NaiveMCTS",
    "BS3_NaiveMCTS": "ai.mcts.believestatemcts.BS3_NaiveMCTS",
    "UCTUnitActions": "ai.mcts.uct.UCTUnitActions",
    "DownsamplingUCT": "ai.mcts.uct.DownsamplingUCT",
    "UCTFirstPlayUrgency": "ai.mcts.uct.UCTFirstPlayUrgency",
    "PuppetSearchAB": "ai.puppet.PuppetSearchAB", "PuppetNoPlan": "ai.puppet.PuppetNoPlan",
    "BasicConfigurableScript": "ai.puppet.BasicConfigurableScript",
    "UnitActionProbabilityDistributionAI": "ai.stochastic.UnitActionProbabilityDistributionAI",
    "EconomyLightRush": "GNS.EconomyLightRush",
    "HeavyRushPlan": "ai.CMAB.ScriptsAbstractions.HeavyRushPlan",
    "LightRushPlan": "ai.CMAB.ScriptsAbstractions.LightRushPlan",
    "RangedRushPlan": "ai.CMAB.ScriptsAbstractions.RangedRushPlan",
    "PGSLimit": "ai.asymmetric.GAB.PGSLimit",
    "PGSLimitScriptC": "ai.asymmetric.GAB.PGSLimitScriptC",
    "PGSSelection": "ai.asymmetric.PGS.PGSSelection", "PGSmRTS": "ai.asymmetric.PGS.PGSmRTS",
    "SSSmRTS": "ai.asymmetric.SSS.SSSmRTS", "SSSLimit": "ai.asymmetric.SAB.SSSLimit",
    "SSSLimitRandom": "ai.asymmetric.SAB.SSSLimitRandom",
    "SSSLimitScriptChoose": "ai.asymmetric.SAB.SSSLimitScriptChoose",
    "LightSSSLimitScriptChoose": "ai.asymmetric.SAB.LightSSSLimitScriptChoose",
    "ImprovedCapivara": "ai.JZ.competition.capivara.ImprovedCapivara",
    "ImprovedTiamat": "ai.JZ.competition.tiamat.ImprovedTiamat",
}


def test_added_bot_names_resolve_and_construct(engine_home: Path) -> None:
    """Each short name (any case) gives its class, and the engine's jars construct it."""
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    for name, java_class in _ADDED_BOTS.items():
        spec = bots.resolve_bot(name.lower())
        assert spec is bots.resolve_bot(name.upper()) is bots.resolve_bot(name), name
        assert spec.java_class == java_class and spec.summary != "custom class", name
        assert str(bots.make_bot(spec, utt).getClass().getName()) == java_class


@pytest.mark.parametrize("class_name, message", [
    ("ai.scv.SCV", "needs a class missing from the engine jars"),  # Weka is not shipped
    ("ai.ahtn.AHTNAI", "FileNotFoundException"),  # data/ahtn/*.lisp is not shipped
    ("ai.RandomNoAttackAI", "neither a (UnitTypeTable) nor a () constructor"),
])
def test_unnamed_jar_classes_are_one_line_errors(engine_home: Path, class_name: str,
                                                 message: str) -> None:
    """The classes bots.py leaves unnamed fail as a GameError naming the bot, not a Java
    exception."""
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    with pytest.raises(GameError, match=re.escape(message)) as info:
        bots.make_bot(bots.resolve_bot(class_name), utt)
    assert class_name in str(info.value) and "\n" not in str(info.value)


def _actions_issued(name: str, cycles: int = 60) -> int:
    """Cycles in which bot ``name`` (player 0, cloned as the engine does at reset) gave a unit
    an order other than "none" against WorkerRush on basesWorkers8x8 (``rts.GameState`` driven
    from Python)."""
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    utt = jpype.JClass("rts.units.UnitTypeTable")()
    ai = bots.make_bot(bots.resolve_bot(name), utt).clone()
    ai.reset()
    opponent = bots.make_bot(bots.resolve_bot("WorkerRush"), utt)
    path = str(maps.resolve_map("basesWorkers8x8").path)
    state = jpype.JClass("rts.GameState")(jpype.JClass("rts.PhysicalGameState").load(path, utt),
                                          utt)
    none = jpype.JClass("rts.UnitAction").TYPE_NONE
    issued = 0
    for _ in range(cycles):
        if state.gameover():
            break
        mine, theirs = ai.getAction(0, state), opponent.getAction(1, state)
        issued += any(pair.m_b.getType() != none for pair in mine.getActions())
        state.issueSafe(mine)
        state.issueSafe(theirs)
        state.cycle()
    return issued


@pytest.mark.parametrize("name", [
    pytest.param(b.name, marks=[pytest.mark.slow] if b.kind == "search" else [])
    for b in bots._BOTS])
def test_every_named_bot_plays(engine_home: Path, name: str) -> None:
    """Every named bot but Passive gives orders in a real game (search bots, 0.5-7 s each, run
    with ``-m slow``)."""
    assert (_actions_issued(name) > 0) == (name != "Passive")


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


def test_a_missing_map_path_is_never_the_shipped_map_of_that_name(tmp_path: Path) -> None:
    """Guards: ``--map /tmp/nope/basesWorkers8x8.xml`` trained on the shipped map of that
    name (and the run recorded the missing path)."""
    with pytest.raises(GameError, match="nope/basesWorkers8x8.xml' does not exist"):
        maps.resolve_map(str(tmp_path / "nope" / "basesWorkers8x8.xml"))
    assert maps.resolve_map("basesWorkers8x8.xml").name == "basesWorkers8x8"  # a bare name
    other = tmp_path / "cfg.yaml"
    other.write_text("x: 1")
    with pytest.raises(GameError, match="is not an XML map file"):
        maps.resolve_map(str(other))


@pytest.mark.parametrize("option, message", [
    ("reward_weights=[1e39,1,1,1,1,1]", "reward_weights must each be within"),
    ("map_weights=[1e308,1e308]", "map_weights must each be in"),
])
def test_weights_that_overflow_float32_are_refused(option: str, message: str) -> None:
    from games.microrts.options import MicroRTSOptions
    from games.options import OptionError, from_mapping
    from selfplay.config_files import parse_set

    value = parse_set([option])
    if "map_weights" in option:
        value["maps"] = ["basesWorkers8x8A", "basesWorkers8x8B"]
    with pytest.raises((OptionError, ValueError), match=message):
        from_mapping(MicroRTSOptions, value, "game.options.")


def test_a_java_class_name_means_that_class_wherever_it_is_passed() -> None:
    """``play --vs no.such.pkg.WorkerRush`` played the shipped WorkerRush (the class's last
    name was looked up again)."""
    from games.microrts.family import MicroRTSFamily

    custom = bots.resolve_bot(" no.such.pkg.WorkerRush ")
    assert (custom.name, custom.java_class) == ("no.such.pkg.WorkerRush",) * 2
    assert bots.resolve_bot(custom.name) == custom
    setup = MicroRTSFamily().match_setup("microrts", "no.such.pkg.WorkerRush", 2, 0)
    assert setup.options["bots"] == ["no.such.pkg.WorkerRush"]


def test_every_static_generator_named_is_in_the_engine_and_seeded(engine_home: Path) -> None:
    """Guards: a class named wrong in ``_STATIC_GENERATORS`` (or one a new engine build
    drops) was skipped in silence, leaving its generator unseeded and the bots' games
    irreproducible; each named class exists and holds at least one static generator."""
    import jpype

    from games.microrts.engine import start_jvm

    start_jvm()
    for name in bots._STATIC_GENERATORS:
        fields = bots._random_fields(jpype.JClass(name).class_, static=True)
        assert fields, f"{name} holds no static java.util.Random"
    assert bots.seed_engine(7) == sum(
        len(bots._random_fields(jpype.JClass(n).class_, static=True))
        for n in bots._STATIC_GENERATORS)
