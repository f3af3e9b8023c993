"""The Lux engine layer: Jux behind the compatibility layer on this jax, reproducible boards,
the named rule sets, the set-up report, and one-line errors when jax, Jux or vec_noise is
missing (hidden from a subprocess's imports; nothing is uninstalled)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from games.core import GameError
from games.lux import engine

REPO = Path(__file__).resolve().parents[3]

# sha256 (first 16 hex digits) of Jux's season2 boards (rubble, ice, ore, spawn mask, factories
# per team), measured with jax 0.4.30, the default threefry of the jax Jux was written for;
# jax 0.10.2 with the pinned setting makes the same, without it others
GOLDEN_BOARDS = {0: "ea36790b6c004df2", 1: "e3d1c191ab16c1f3", 7: "e6efc4cc0fbedb1c"}

# the modules named in ``hide`` fail to import, as if they were not installed
_HIDE = """
import importlib.abc, json, sys
HIDDEN = set(json.loads(sys.argv[1]))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""


def _run(code: str, hide: tuple[str, ...] = (), timeout: int = 120) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (with ``hide`` hidden); the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _HIDE + code, json.dumps(hide)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def jux() -> Any:
    return engine.load_jux()


def _digest(board: Any) -> str:
    h = hashlib.sha256()
    for part in (board.map.rubble, board.map.ice, board.map.ore, board.valid_spawns_mask,
                 board.factories_per_team):
        a = np.asarray(part)
        h.update(a.dtype.str.encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the compatibility layer


def test_importing_the_package_imports_neither_jax_nor_jux() -> None:
    out = _run("import json, sys, games.lux\n"
               "heavy = ('jax', 'jux', 'luxai_s2', 'vec_noise')\n"
               "print(json.dumps({'loaded': [m for m in heavy if m in sys.modules]}))")
    assert out == {"loaded": []}


# observe.py and orders.py make jax arrays at import, which starts jax's backend: the switch
# must be set by then (an H100 training run ran out of memory with JAX holding 75 % of the card)
_PREALLOCATION = """
import json, os, sys
from jax._src import xla_bridge
os.environ.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
if sys.argv[2] != "unset":
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = sys.argv[2]
seen = []
start = xla_bridge.backends
def watched():
    seen.append(os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
    return start()
xla_bridge.backends = watched
import games.lux.observe
print(json.dumps({"at_backend_start": seen[:1]}))
"""


@pytest.mark.parametrize(("users", "expected"), [("unset", "false"), ("true", "true")])
def test_jax_does_not_take_the_accelerators_memory_unless_the_user_says(
        users: str, expected: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _PREALLOCATION, "[]", users], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"at_backend_start": [expected]}

def test_every_shimmed_name_works(jux: Any) -> None:
    import jax
    import jax.numpy as jnp

    assert jax.tree_map(lambda v: v + 1, {"a": 1, "b": (2, 3)}) == {"a": 2, "b": (3, 4)}
    x = jnp.arange(5)
    for clipped in (jnp.clip(x, a_min=1, a_max=3), jnp.clip(x, 1, 3), jnp.clip(x, min=1, max=3),
                    x.clip(1, 3)):
        assert np.asarray(clipped).tolist() == [1, 1, 2, 3, 3]
    assert np.asarray(jnp.clip(x, a_max=2)).tolist() == [0, 1, 2, 2, 2]
    if getattr(jnp.clip, engine.COMPAT_MARK, False):  # ours (jax's own may take both)
        with pytest.raises(TypeError, match="both a_min and min"):
            jnp.clip(x, a_min=1, min=2)


def test_jux_hands_arrays_to_torch_and_back_without_copying(jux: Any) -> None:
    import jax.numpy as jnp
    import torch

    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    t = jux.torch.to_torch(x)  # through jax.dlpack.to_dlpack
    assert t.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert t.data_ptr() == x.unsafe_buffer_pointer()  # the same memory
    back = jux.torch.from_torch(torch.arange(4, dtype=torch.int32))
    assert isinstance(back, type(x)) and np.asarray(back).tolist() == [0, 1, 2, 3]


def test_the_layer_is_idempotent(jux: Any) -> None:
    import jax
    import jax.numpy as jnp

    objects = (jax.tree_map, jnp.clip, jax.dlpack.to_dlpack, jux.torch.from_torch)
    assert engine.install_compat() == ()
    assert engine.load_jux() is jux
    assert (jax.tree_map, jnp.clip, jax.dlpack.to_dlpack, jux.torch.from_torch) == objects
    for added in engine.compat_names():  # each added once
        assert engine.compat_names().count(added) == 1


def test_the_layer_adds_only_what_jax_lacks_and_never_replaces_a_name() -> None:
    """A fresh jax: the layer adds exactly the names missing there. A jax that has them (set
    beforehand, as an older jax has them): it replaces none of them and adds nothing."""
    code = """
import jax, jax.dlpack, jax.numpy as jnp, inspect, warnings
from games.lux import engine
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    missing = [not hasattr(jax, "tree_map"), "a_min" not in inspect.signature(jnp.clip).parameters,
               not hasattr(jax.dlpack, "to_dlpack")]
names = ["jax.tree_map", "jax.numpy.clip(a_min=, a_max=)", "jax.dlpack.to_dlpack"]
first = engine.install_compat()
print(json.dumps({"expected": [n for n, m in zip(names, missing) if m], "added": list(first),
                  "again": list(engine.install_compat())}))
"""
    out = _run("import json\n" + code)
    assert out["added"] == out["expected"] and out["again"] == []
    present = """
import json, jax, jax.dlpack, jax.numpy as jnp
def tree_map(f, *trees): return "theirs"
def clip(a, a_min=None, a_max=None): return "theirs"
def to_dlpack(x): return "theirs"
jax.tree_map, jnp.clip, jax.dlpack.to_dlpack = tree_map, clip, to_dlpack
from games.lux import engine
added = engine.install_compat()
kept = [jax.tree_map is tree_map, jnp.clip is clip, jax.dlpack.to_dlpack is to_dlpack]
print(json.dumps({"added": list(added), "kept": kept}))
"""
    assert _run(present) == {"added": [], "kept": [True, True, True]}


# ---------------------------------------------------------------- boards


def test_boards_are_reproducible_from_a_seed_on_any_jax(jux: Any) -> None:
    import jax

    assert jax.config.jax_threefry_partitionable is False
    env = engine.make_env("season2").jux_env
    boards = {seed: env.reset(seed).board for seed in (0, 1, 7)}
    again = env.reset(0).board
    assert _digest(again) == _digest(boards[0])
    assert len({_digest(b) for b in boards.values()}) == 3  # another seed, another board
    assert {seed: _digest(b) for seed, b in boards.items()} == GOLDEN_BOARDS
    for board in boards.values():
        assert np.asarray(board.map.rubble).shape == (48, 48)
        assert 2 <= int(board.factories_per_team) <= 5


def test_jux_boards_are_boards_of_the_official_engine(jux: Any) -> None:
    """On a map Jux generated, the official engine allows factories exactly where Jux does."""
    from luxai_s2.map.board import Board
    from luxai_s2.map_generator.generator import GameMap

    official = engine.official_env("season2")
    state = engine.make_env("season2").jux_env.reset(7)
    game_map = GameMap(rubble=np.asarray(state.board.map.rubble).astype(int),
                       ice=np.asarray(state.board.map.ice).astype(int),
                       ore=np.asarray(state.board.map.ore).astype(int), symmetry="horizontal")
    board = Board(seed=7, env_cfg=official.env_cfg, existing_map=game_map)
    assert np.array_equal(board.valid_spawns_mask, np.asarray(state.board.valid_spawns_mask))
    assert board.valid_spawns_mask.sum() > 100


# ---------------------------------------------------------------- rules, set-up


def test_the_named_rules(jux: Any) -> None:
    season2, neurips = engine.rules_named("season2"), engine.rules_named("NeurIPS")
    cfg, buf = season2.env_config(), season2.buffer_config()
    assert (cfg.map_size, cfg.MIN_FACTORIES, cfg.MAX_FACTORIES) == (48, 2, 5)
    assert (buf.MAP_SIZE, buf.MAX_N_FACTORIES, buf.MAX_N_UNITS) == (48, 6, 200)
    assert neurips.env_config() == jux.config.EnvConfig()  # the later edition: Jux's defaults
    assert engine.official_env("season2").env_cfg.map_size == 48
    with pytest.raises(GameError, match=r"unknown Lux rules 'season3'; known: season2 "
                                        r"\(48x48, 2-5 factories\), neurips"):
        engine.rules_named("season3")
    from games.lux.kaggle import KaggleError
    from games.lux.kaggle_replay import rules_for

    assert rules_for({"map_size": 48, "MIN_FACTORIES": 2, "MAX_FACTORIES": 5}, "ep.json") is season2
    with pytest.raises(KaggleError, match=r"^ep.json: no selfplay Lux rules for a 32 board with "
                                          r"2-5 factories per team; known: season2 \(48x48"):
        rules_for({"map_size": 32, "MIN_FACTORIES": 2, "MAX_FACTORIES": 5}, "ep.json")


def test_setup_reports_versions_backend_and_a_working_reset(
        jux: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import jax

    report = engine.setup()
    assert (report.jax, report.jux, report.luxai_s2) == (jax.__version__, "3.0.0", "3.0.1")
    assert report.backend == jax.default_backend() and report.devices
    assert report.vec_noise == engine.vec_noise_available()
    assert report.threefry_partitionable is False
    assert report.reset_seconds is not None and report.reset_seconds > 0
    assert set(report.compat) == set(engine.compat_names())
    printed = capsys.readouterr().out
    assert f"jax {jax.__version__}" in printed and "Jux 3.0.0" in printed
    assert "first reset (season2" in printed


# ---------------------------------------------------------------- missing pieces


_CHECK = """
import json
from games.core import GameError
from games.lux import engine
try:
    engine.check()
    print(json.dumps({"ok": True}))
except GameError as exc:
    print(json.dumps({"error": str(exc), "quiet": exc.__suppress_context__}))
"""


@pytest.mark.parametrize(("hidden", "named"), [("jax", "jax"), ("jux", "juxai-s2"),
                                               ("chex", "chex"), ("jaxlib", "jaxlib")])
def test_a_missing_package_is_one_line_naming_the_command(hidden: str, named: str) -> None:
    out = _run(_CHECK, hide=(hidden,))
    message = out["error"]
    assert "\n" not in message and out["quiet"]  # no chained traceback behind it
    assert message.startswith(f"Lux needs {named} ({hidden!r} is not installed)")
    assert "make install-lux" in message  # (make install-dev installs every extra)
    assert "pip install --no-deps juxai-s2==3.0.0 luxai-s2==3.0.1" in message


def test_without_vec_noise_jux_works_and_the_official_map_generator_says_why() -> None:
    code = _CHECK.replace('print(json.dumps({"ok": True}))', """
    jux = engine.load_jux()
    try:
        engine.official_env().reset(seed=0)
        official = "reset"
    except GameError as exc:
        official = str(exc)
    print(json.dumps({"vec_noise": engine.vec_noise_available(),
                      "report": engine.check().lines()[2], "official": official}))""")
    out = _run(code, hide=("vec_noise",))
    assert out["vec_noise"] is False
    assert out["official"] == engine.VEC_NOISE_HINT
    assert "missing" in out["report"]


def test_a_jax_backend_that_cannot_start_is_named() -> None:
    """Guards: ``JAX_PLATFORMS`` naming a backend this jax cannot start blamed Jux and the jax
    version ("Jux does not import on jax ...")."""
    done = subprocess.run([sys.executable, "-m", "selfplay.cli", "setup", "lux"], cwd=REPO,
                          env={**os.environ, "JAX_PLATFORMS": "tpu"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot start the backend JAX_PLATFORMS=tpu asks for" in lines[0]
