"""PettingZoo Atari names, errors for bad names, and ROMs from ale-py (never AutoROM)."""

from __future__ import annotations

import sys
from pathlib import Path

import ale_py
import multi_agent_ale_py
import pytest

from games.core import GameError
from games.options import OptionError
from games.pettingzoo import PettingZooAtari, make, two_player_games
from games.pettingzoo.catalog import resolve, rom_directory
from games.registry import make_game


def test_two_player_games_listed_from_pettingzoo() -> None:
    games = two_player_games()
    for name in ("pong_v3", "boxing_v2", "tennis_v3", "surround_v2", "space_invaders_v2",
                 "combat_tank_v2", "ice_hockey_v2", "basketball_pong_v3"):
        assert name in games
    assert "quadrapong_v4" not in games and "warlords_v3" not in games
    assert len(games) == 22


@pytest.mark.parametrize("name", ["pettingzoo/pong_v3", "pong_v3", "pong-v3", "atari/pong_v3",
                                  "pong", "Pettingzoo/Pong_V3"])
def test_name_variants_resolve(name: str) -> None:
    info = resolve(name)
    assert info.name == "pong_v3" and info.registry_name == "pettingzoo/pong_v3"
    assert info.kind == "competitive"


def test_unknown_game_lists_the_known_ones() -> None:
    with pytest.raises(GameError, match=r"unknown PettingZoo Atari game 'pettingzoo/pongg' "
                                        r"\(did you mean pettingzoo/pong_v3.*two-player games: "
                                        r".*pettingzoo/boxing_v2"):
        resolve("pettingzoo/pongg")
    with pytest.raises(GameError, match="pettingzoo/tennis_v3"):
        make_game("pettingzoo/nope", num_envs=1)


def test_one_player_four_player_and_wrong_version_are_explained() -> None:
    with pytest.raises(GameError, match=r"breakout is a one-player Atari game.*atari/Breakout"):
        resolve("pettingzoo/breakout")
    with pytest.raises(GameError, match=r"one-player.*atari/MontezumaRevenge"):
        resolve("montezuma_revenge")
    with pytest.raises(GameError, match="combat as pettingzoo/combat_plane_v2 or "
                                        "pettingzoo/combat_tank_v2"):
        resolve("pettingzoo/combat")
    with pytest.raises(GameError, match="quadrapong_v4 is a four-player game"):
        resolve("pettingzoo/quadrapong_v4")
    with pytest.raises(GameError, match="has pong_v3, not pong_v2"):
        resolve("pettingzoo/pong_v2")


def test_roms_come_from_ale_py_without_autorom() -> None:
    roms = rom_directory()
    assert roms == Path(ale_py.__file__).resolve().parent / "roms"
    game = make_game("pettingzoo/pong_v3", num_envs=1, seed=0)
    assert isinstance(game, PettingZooAtari)
    assert game.rom_path == roms / "pong.bin"  # not PettingZoo's AutoROM folders
    assert not game.rom_path.is_relative_to(Path(multi_agent_ale_py.__file__).parent)
    assert not any(name.lower().startswith("autorom") for name in sys.modules)
    game.close()


def test_missing_roms_name_the_package(tmp_path: Path) -> None:
    with pytest.raises(GameError, match=r"ROM not found.*ship with the ale-py package") as got:
        make("pettingzoo/pong_v3", num_envs=1, rom_dir=str(tmp_path))
    assert "Please install roms" not in str(got.value)  # PettingZoo's AutoROM advice, dropped
    # a folder that is not there, or a file: named, not "install ale-py" (the ROMs are there)
    for wrong, what in ((tmp_path / "missing", "does not exist"),
                        (tmp_path / "pong.txt", "is not a folder")):
        if what == "is not a folder":
            wrong.write_text("x")
        with pytest.raises(GameError, match=rf"game.options.rom_dir: .*{wrong.name} {what}"):
            make("pettingzoo/pong_v3", num_envs=1, rom_dir=str(wrong))


def test_game_kwargs_of_lists_are_named(tmp_path: Path) -> None:
    """Guards: ``game_kwargs={game_version: [1]}`` was "unhashable type: 'list'"."""
    with pytest.raises(GameError, match=r"game_kwargs \['game_version'\] must be single values"):
        make("pettingzoo/pong_v3", num_envs=1, game_kwargs={"game_version": [1]})


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 8], ids=["empty", "garbage"])
def test_a_rom_that_is_not_the_game_is_refused_before_the_emulator_loads_it(
        tmp_path: Path, content: bytes) -> None:
    """Guards: a garbage pong.bin hung the emulator for ever inside loadROM (deaf to Ctrl-C
    and SIGTERM); an empty one exited the process with ALE's own message."""
    (tmp_path / "pong.bin").write_bytes(content)
    with pytest.raises(GameError, match=r"pettingzoo/pong_v3: game.options.rom_dir: .*pong.bin "
                                        r"is not the pong ROM ale-py supports \(MD5 "):
        make("pettingzoo/pong_v3", num_envs=1, rom_dir=str(tmp_path))
    (tmp_path / "pong.bin").write_bytes((rom_directory() / "pong.bin").read_bytes())
    make("pettingzoo/pong_v3", num_envs=1, rom_dir=str(tmp_path)).close()  # the real one plays


def test_bad_options_and_game_kwargs() -> None:
    with pytest.raises(OptionError, match="frame_skipp"):
        make("pettingzoo/pong_v3", frame_skipp=4)
    with pytest.raises(OptionError, match="frame_stack must be >= 1"):
        make("pettingzoo/pong_v3", frame_stack=0)
    with pytest.raises(OptionError, match="screen_size must be <= 512"):  # was 32 GB asked
        make("pettingzoo/pong_v3", screen_size=4000)
    with pytest.raises(GameError, match=r"unknown game_kwargs \['colour'\]; allowed: "
                                        r"game_version"):
        make("pettingzoo/pong_v3", game_kwargs={"colour": 1})
    with pytest.raises(GameError, match="bad game_kwargs"):
        make("pettingzoo/pong_v3", game_kwargs={"game_version": "nope"})
    with pytest.raises(GameError, match="num_envs must be >= 1"):
        make("pettingzoo/pong_v3", num_envs=0)


@pytest.mark.parametrize("name", ["pettingzoo/pong", "pettingzoo/Pong-v3", "pettingzoo/pong_v3"])
def test_aliases_share_the_canonical_name_and_its_hyperparameters(name: str) -> None:
    from selfplay.config_files import build_config

    config = build_config(name)
    assert config.game.name == "pettingzoo/pong_v3"
    assert config.game.options["builtin_opponent_share"] == 0.25  # games.pettingzoo/pong_v3


def test_an_unknown_opponent_names_the_consoles_own_player() -> None:
    """Guards: ``play --vs random`` on pong said only "play another checkpoint", hiding
    ``--vs builtin``."""
    from games.pettingzoo.family import PettingZooFamily

    with pytest.raises(GameError, match=r"'random'.*console's own player \(builtin\)"):
        PettingZooFamily().scripted("pettingzoo/pong_v3", "random", 0)
