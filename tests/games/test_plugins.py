"""Game families from outside selfplay (plugins): registered by ``$SELFPLAY_FAMILIES`` or a
``selfplay.families`` entry point, trained and played like selfplay's own; a broken or
clashing plugin is one warning, and a game that breaks the batch contract is one line naming
the field (tests/plugins/plugin_nim.py is the plugin)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from games.contract import batch_problem
from games.core import GameError
from games.registry import PLUGINS_VARIABLE, WARNED_VARIABLE, families

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def _env(modules: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != WARNED_VARIABLE}
    return {**env, PLUGINS_VARIABLE: modules,
            "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def with_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry of this process with the plugin modules named (cache cleared around)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv(WARNED_VARIABLE, "")  # none shown yet; unset again afterwards
    families.cache_clear()
    yield
    families.cache_clear()


def test_a_plugin_family_trains_plays_and_rates_like_selfplays_own(tmp_path: Path) -> None:
    """`selfplay games` lists the plugin's game beside a plugin that does not import (one
    warning); training reads the family's own settings file (its league rates snapshots
    against the plugin's bot; the broken plugin's warning once, not again from the rater's
    process) and `play --vs` its bot."""
    env = _env("plugin_nim, no_such_plugin_module")
    listed = subprocess.run([sys.executable, "-m", "selfplay.cli", "games"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "nim" in listed.stdout.split() and "tictactoe" in listed.stdout.split()
    assert listed.stderr.strip() == (
        "warning: game plugin no_such_plugin_module ($SELFPLAY_FAMILIES) is not loaded: "
        "ModuleNotFoundError: No module named 'no_such_plugin_module'")
    run = tmp_path / "nim"
    train = subprocess.run([sys.executable, "-m", "selfplay.cli", "train", "--game", "nim",
                            "--run-dir", str(run), "--no-progress", "--set",
                            "log.tensorboard=false"],
                           env=_env("plugin_nim,no_such_plugin_module"), capture_output=True,
                           text=True, timeout=300)
    assert train.returncode == 0, train.stderr
    assert "trained 8192 steps in 16 updates" in train.stdout  # tests/plugins/plugin_nim.yaml
    assert train.stderr.count("warning: game plugin no_such_plugin_module") == 1, train.stderr
    play = subprocess.run([sys.executable, "-m", "selfplay.cli", "play", "--checkpoint",
                           str(run), "--vs", "take_one", "--games", "8", "--json"],
                          env=_env("plugin_nim"), capture_output=True, text=True, timeout=300)
    assert play.returncode == 0, play.stderr
    assert '"games": 8' in play.stdout and '"opponent": "take_one"' in play.stdout
    board = subprocess.run([sys.executable, "-m", "selfplay.cli", "league", "leaderboard",
                            "--db", str(run)], env=_env("plugin_nim"), capture_output=True,
                           text=True, timeout=120)
    assert "take_one" in board.stdout and "nim@0000016" in board.stdout
    gone = subprocess.run([sys.executable, "-m", "selfplay.cli", "eval", "--checkpoint",
                           str(run)], capture_output=True, text=True, timeout=120)
    assert gone.returncode == 2 and "unknown game 'nim'" in gone.stderr
    assert f"its module named in ${PLUGINS_VARIABLE}" in gone.stderr


def test_a_plugin_that_takes_a_name_already_registered_is_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None, capsys) -> None:
    (tmp_path / "clashing.py").write_text(
        "from games.family import Family\n"
        "class Mine(Family):\n    name = 'boardgames'\n    factory = 'clashing:make'\n"
        "class Other(Family):\n    name = 'other'\n    factory = 'clashing:make'\n"
        "    games = ('TicTacToe',)\n"
        "class Fine(Family):\n    name = 'fine'\n    factory = 'clashing:make'\n"
        "    games = ('fine-game',)\n"
        "FAMILIES = (Mine(), Other(), Fine())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_VARIABLE, "clashing")
    names = [f.name for f in families()]
    assert names.count("boardgames") == 1 and "other" not in names and "fine" in names
    assert capsys.readouterr().err.splitlines() == [
        "warning: game plugin family 'boardgames' ($SELFPLAY_FAMILIES) is not loaded: a "
        "family 'boardgames' is already registered",
        "warning: game plugin family 'other' ($SELFPLAY_FAMILIES) is not loaded: game name "
        "'TicTacToe' is already taken"]


@pytest.mark.parametrize(("flaw", "message"), [
    ("flat_obs", r"nim: reset\(\) broke the VecGame contract: Batch.obs has shape \(4, 24\); "
                 r"the spec says \(4, 2, 12\) \(\[E, A, \.\.\.\] first\)"),
    ("int_mask", r"nim: reset\(\) broke the VecGame contract: Batch.action_mask has dtype "
                 r"int64; the spec says bool"),
    ("float64_obs", r"Batch.obs has dtype float64; the spec says float32"),
])
def test_a_game_that_breaks_the_batch_contract_is_named_before_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None, flaw: str,
        message: str) -> None:
    """Guards (review): a plugin's obs without the seat axis was a reshape traceback deep in
    acting, an int mask trained silently, float64 observations a torch dtype error."""
    from selfplay.config_files import build_config
    from selfplay.train import run_training

    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    config = build_config("nim", overrides=["game.num_envs=4", f"game.options.flaw={flaw}",
                                            "league.enabled=false", "log.progress=false",
                                            "log.tensorboard=false"], total_steps=256)
    with pytest.raises(GameError, match=message):
        run_training(config, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before anything was trained or kept


def test_the_contract_checker_names_each_field(monkeypatch: pytest.MonkeyPatch,
                                               with_plugins: None) -> None:
    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    from plugin_nim import Nim

    game = Nim("nim", 3)
    batch = game.reset()
    assert batch_problem(batch, game.spec) is None
    assert batch_problem(game.step(np.zeros((3, 2), np.int64)), game.spec) is None
    broken = {
        "reward": batch._replace(reward=np.zeros(3, np.float32)),
        "terminated": batch._replace(terminated=np.zeros(3, np.int64)),
        "alive": batch._replace(alive=np.ones((3, 1), bool)),
        "episodes": batch._replace(episodes=batch.episodes._replace(
            env=np.array([5]), seat=np.array([0]), ret=np.array([1.0]),
            length=np.array([3]), outcome=np.array([1], np.int8))),
        "lengths": batch._replace(episodes=batch.episodes._replace(env=np.array([0]))),
    }
    expected = {
        "reward": "Batch.reward has shape (3,); the spec says (3, 2)",
        "terminated": "Batch.terminated has dtype int64; the spec says bool",
        "alive": "Batch.alive has shape (3, 1); the spec says (3, 2)",
        "episodes": "Batch.episodes.env holds 5, outside 0..2",
        "lengths": "Batch.episodes' arrays differ in length",
    }
    for key, flawed in broken.items():
        problem = batch_problem(flawed, game.spec)
        assert problem is not None and problem.startswith(expected[key]), (key, problem)
    assert batch_problem((batch.obs,), game.spec) == "it returned tuple, not a games.core.Batch"


def test_a_game_spec_is_normalized_and_refuses_what_no_network_reads() -> None:
    from games.core import Discrete, GameSpec

    spec = GameSpec(name="g", num_envs=2, num_seats=2, obs_shape=[3, 4],  # type: ignore[arg-type]
                    obs_dtype=np.float32, action_space=Discrete(2))  # type: ignore[arg-type]
    assert spec.obs_shape == (3, 4) and spec.obs_dtype == np.dtype(np.float32)
    with pytest.raises(GameError, match=r"^g: GameSpec.obs_kind 'board' is not one of vector, "
                                        r"image, grid$"):
        GameSpec(name="g", num_envs=2, num_seats=2, obs_shape=(3,),
                 obs_dtype=np.dtype(np.float32), action_space=Discrete(2), obs_kind="board")
    with pytest.raises(GameError, match="action_space is int, not a games.core Discrete"):
        GameSpec(name="g", num_envs=2, num_seats=2, obs_shape=(3,),
                 obs_dtype=np.dtype(np.float32), action_space=3)  # type: ignore[arg-type]


def test_an_alive_seat_without_a_legal_action_is_named(monkeypatch: pytest.MonkeyPatch,
                                                       with_plugins: None) -> None:
    """Guards (review): a seat to move whose mask was all False silently played action 0."""
    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    from plugin_nim import Nim

    game = Nim("nim", 3)
    batch = game.reset()
    mask = batch.action_mask.copy()
    mask[1, 0] = False
    assert batch_problem(batch._replace(action_mask=mask), game.spec) == (
        "env 1's seat 0 is alive with no legal action in Batch.action_mask (a seat that "
        "cannot act this step is not alive)")


def test_a_run_whose_rollouts_hold_no_move_of_the_learner_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None, capsys) -> None:
    """Guards (review): a game whose seats were never alive "trained" to the end on nothing,
    without a word."""
    from selfplay.config_files import build_config
    from selfplay.train import run_training

    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    config = build_config("nim", overrides=["game.num_envs=4", "game.options.flaw=nobody_alive",
                                            "league.enabled=false", "log.progress=false",
                                            "log.tensorboard=false"], total_steps=256)
    run_training(config, run_dir=tmp_path / "run")
    assert capsys.readouterr().err.count("warning: a rollout held no move of the learner to "
                                         "train on") == 1


def test_play_and_eval_of_a_game_that_reports_no_episode_stop_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None) -> None:
    """Guards (review): a game whose finished games never reached Batch.episodes kept `eval`
    and `play` waiting for ever."""
    import games.contract
    from selfplay.config_files import build_config
    from selfplay.evaluate import evaluate
    from selfplay.play import play
    from selfplay.train import run_training

    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    monkeypatch.setattr(games.contract, "STALL_STEPS", 60)
    run = tmp_path / "run"
    run_training(build_config("nim", overrides=[
        "game.num_envs=4", "game.options.flaw=no_episodes", "league.enabled=false",
        "log.progress=false", "log.tensorboard=false"], total_steps=256), run_dir=run)
    message = r"^nim: no episode reported in 60 steps of its \d+ env\(s\): a game reports"
    with pytest.raises(GameError, match=message):
        play(run, "take_one", games=2)
    with pytest.raises(GameError, match=message):
        evaluate(run, episodes=2)


def test_plugin_names_are_lower_case_bots_any_case_and_one_module_named_twice_loads_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None, capsys) -> None:
    """Guards (review): a capitalized prefix was listed but could never be named; a bot
    named with capitals was "unknown ... known: Centre"; a plugin named both by an entry
    point and $SELFPLAY_FAMILIES warned that its family was already registered."""
    (tmp_path / "shouting.py").write_text(
        "from games.family import Family\n"
        "class Loud(Family):\n    name = 'loud'\n    factory = 'shouting:make'\n"
        "    prefix = 'Loud'\n"
        "FAMILIES = (Loud(),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_VARIABLE, "shouting, plugin_nim, plugin_nim")
    names = [f.name for f in families()]
    assert "loud" not in names and names.count("nim") == 1
    assert capsys.readouterr().err.strip() == (
        "warning: game plugin family 'loud' ($SELFPLAY_FAMILIES) is not loaded: its prefix "
        "'Loud' must be lower case")
    import plugin_nim

    monkeypatch.setattr(plugin_nim.NimFamily, "seat_bots",
                        lambda self: {"Take_One": plugin_nim._take_one})
    from games.registry import family_named

    nim = family_named("nim")
    assert nim.bot_names("nim") == ["take_one"]
    assert nim.scripted("nim", "TAKE_ONE", 0).opponent_name == "take_one"


def test_a_plugin_cannot_take_a_game_of_a_prefix_family(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None, capsys) -> None:
    """Guards (review): a plugin listing `atari/Pong` took the game from the Atari family
    without a word (listed names are matched before prefixes)."""
    (tmp_path / "hijack.py").write_text(
        "from games.family import Family\n"
        "class Hijack(Family):\n    name = 'hijack'\n    factory = 'hijack:make'\n"
        "    games = ('atari/Pong',)\n"
        "class Under(Family):\n    name = 'under'\n    factory = 'hijack:make'\n"
        "    prefix = 'nim2'\n"
        "class Over(Family):\n    name = 'over'\n    factory = 'hijack:make'\n"
        "    prefix = 'tictactoe'\n"
        "FAMILIES = (Hijack(), Under(), Over())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_VARIABLE, "hijack")
    from games.registry import resolve

    assert resolve("atari/Pong").family == "atari"
    assert "under" in [f.name for f in families()]
    assert capsys.readouterr().err.splitlines() == [
        "warning: game plugin family 'hijack' ($SELFPLAY_FAMILIES) is not loaded: game name "
        "'atari/Pong' is in the 'atari' family's prefix"]


def test_a_decorated_factory_is_called_through_its_own_signature(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_plugins: None) -> None:
    """Guards (review): the signature check read the wrapped function's signature (one that
    a decorator fills in) and refused a factory that works."""
    (tmp_path / "wrapped.py").write_text(
        "import functools\n"
        "from games.family import Family\n"
        "from plugin_nim import Nim\n"
        "def inject(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def call(name, **kw):\n"
        "        return fn(10, name, **kw)\n"
        "    return call\n"
        "@inject\n"
        "def make(pile, name, num_envs=1, seed=None):\n"
        "    return Nim(name, num_envs, seed, pile)\n"
        "class Wrapped(Family):\n    name = 'wrapped'\n    factory = 'wrapped:make'\n"
        "    games = ('wrapped-nim',)\n"
        "FAMILIES = (Wrapped(),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_VARIABLE, "wrapped")
    from games.registry import make_game

    game = make_game("wrapped-nim", num_envs=2)
    assert game.spec.num_envs == 2


def test_play_checks_the_first_batches_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           with_plugins: None) -> None:
    """Guards (review): only training checked the contract; `play` of a game with flat
    observations was a reshape traceback."""
    from selfplay.config_files import build_config
    from selfplay.play import play
    from selfplay.train import run_training

    monkeypatch.setenv(PLUGINS_VARIABLE, "plugin_nim")
    run = tmp_path / "run"
    run_training(build_config("nim", overrides=["game.num_envs=4", "league.enabled=false",
                                                "log.progress=false", "log.tensorboard=false"],
                              total_steps=256), run_dir=run)
    import plugin_nim

    monkeypatch.setattr(plugin_nim, "make", lambda name, num_envs=1, seed=None, **_: (
        plugin_nim.FlawedNim(name, num_envs, seed, "flat_obs")))
    with pytest.raises(GameError, match=r"^nim: reset\(\) broke the VecGame contract: "
                                        r"Batch.obs has shape"):
        play(run, "take_one", games=2)
