"""Lux AI Season 2 on JAX: the engine layer (Jux behind a compatibility layer).

The game runs in Jux (PyPI ``juxai-s2`` 3.0.0, MIT), a JAX port of the official engine
``luxai_s2`` (PyPI ``luxai-s2`` 3.0.1), on the newest jax the Python version supports. Jux's
metadata pins ``jax[cuda11]==0.4.7`` (no wheel for Python 3.11), so both are installed with
``--no-deps`` and their dependencies come from the ``lux`` extra (``make install-dev`` does it).
This module is everything between a bare ``import jux`` and a usable engine:

- :func:`load_jux` imports Jux behind a compatibility layer (:func:`install_compat`): Jux was
  written for jax 0.4.7, and jax has since removed ``jax.tree_map``, ``jnp.clip``'s ``a_min`` /
  ``a_max`` keywords and ``jax.dlpack.to_dlpack`` (0.4.30 has all three, 0.10.2 none); the
  layer adds what this jax lacks and never replaces a name it has. Newer jax (0.7.2 on) no
  longer takes in ``jax.dlpack.from_dlpack`` the DLPack capsules Jux's torch bridge hands it,
  so ``jux.torch.from_torch`` passes the tensor itself (the ``__dlpack__`` protocol, which
  every supported jax takes).
- It pins ``jax_threefry_partitionable=False`` (the default before jax 0.5): with the newer
  default a seed generates another map than on the jax Jux was written for. The setting is
  process-wide.
- :data:`RULES` names the rule sets: ``season2``, the original competition (48x48, 2-5 factories
  per team), and ``neurips``, the later 64x64 edition (4-10 factories; Jux's and luxai_s2's
  defaults). :func:`make_env` builds a batched Jux env for one, :func:`official_env` the official
  engine under the same rules.
- JAX places arrays on its default device: the CPU with the ``jax`` wheel from PyPI, the
  accelerator when the installed jaxlib sees one (``jax[cuda12]``); ``JAX_PLATFORMS=cpu`` keeps
  a GPU machine's games on the CPU.
- JAX would take 75 % of an accelerator's memory at its first use; :func:`load_jux` turns that
  off (``XLA_PYTHON_CLIENT_PREALLOCATE=false``, unless the variable is set) so the network in
  torch has the rest: on an H100 a 1,024-game training run ran out of GPU memory without it.
- A missing or unusable install is a one-line :class:`~games.core.GameError` naming the
  command that fixes it; :func:`check` reports versions and backend, :func:`setup` also plays
  one reset.

``luxai_s2`` imports the C extension ``vec_noise`` at import time, although only its own map
generator calls it (Jux has a JAX port). ``make install-dev`` builds it from its sdist; where
that failed (no C compiler), :func:`load_jux` puts a stand-in module in its place, so Jux works
and the official engine's map generator says what is missing when called.

Facts the adapter needs: Jux addresses units by slots (``[2, max_units]``) that are compacted
when units die; a factory build beyond ``max_units`` is dropped from the arrays while the count
still grows, so masks must forbid builds at capacity; a malformed action drops the player's
whole turn; rewards are each team's lichen, ``-1000`` for a team without factories. Jux 3.0.0
differs from luxai_s2 3.0.1 in three places (``tests/games/lux/test_lux_parity.py``): rubble of
units destroyed on a factory's tiles in the step the factory dies is lost; a team without
factories gets its remaining lichen - 1000 instead of -1000; a transfer onto an enemy factory's
tile reaches that factory (luxai_s2 loses it), so masks should forbid such transfers.

On top of this module: :mod:`games.lux.adapter` (E games x 2 seats, rule-based bidding and
placement, observations and masks computed on the device), :mod:`games.lux.family` (the ``lux``
game, ``selfplay setup lux`` calling :func:`setup`) and :mod:`games.lux.parity` (the adapter
against the official engine).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import os
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from games.core import GameError

JUX_VERSION = "3.0.0"
LUXAI_S2_VERSION = "3.0.1"
VEC_NOISE_VERSION = "1.1.4"
MIN_JAX = (0, 4, 30)
"""the oldest jax this layer is tested on"""
TESTED_JAX = "0.4.30 and 0.10.2 (the newest for Python 3.11)"
ENGINE_REQUIREMENTS = f"juxai-s2=={JUX_VERSION} luxai-s2=={LUXAI_S2_VERSION}"
INSTALL_HINT = ("in a checkout run `make install-lux`, else "
                f"`pip install 'selfplay[lux]'` and then `pip install --no-deps "
                f"{ENGINE_REQUIREMENTS}`")
VEC_NOISE_HINT = ("vec_noise, a C extension built from its sdist, is not installed: the official "
                  "Lux engine (luxai_s2) cannot generate maps, Jux can; install a C compiler "
                  "(gcc) and run `make install-dev` again")
COMPAT_MARK = "__selfplay_lux_compat__"
"""set on every function the compatibility layer adds or substitutes"""

_DISTRIBUTIONS = {  # top-level module -> what to install
    "jax": "jax", "jaxlib": "jaxlib", "chex": "chex", "jux": "juxai-s2", "luxai_s2": "luxai-s2",
    "scipy": "scipy", "gymnasium": "gymnasium", "pettingzoo": "pettingzoo",
    "termcolor": "termcolor", "numpy": "numpy",
}
_ADDED: list[str] = []  # what install_compat added, in order, over the process's life


@dataclass(frozen=True)
class Rules:
    """A named rule set: the board, the factory counts and Jux's buffer sizes."""

    name: str
    title: str
    map_size: int
    """the board is ``map_size x map_size``"""
    min_factories: int
    """each team places between ``min_factories`` and ``max_factories`` factories (drawn per
    map)"""
    max_factories: int
    max_units: int
    """unit slots per team in Jux's arrays (factory builds beyond them must be masked)"""
    max_global_id: int
    """ids of every factory and unit a game creates stay below this (Jux's id table)"""

    def env_config(self) -> Any:
        """Jux's ``EnvConfig`` for these rules (every other constant the official default)."""
        jux = load_jux()
        return jux.config.EnvConfig(map_size=self.map_size, MIN_FACTORIES=self.min_factories,
                                    MAX_FACTORIES=self.max_factories)

    def buffer_config(self) -> Any:
        """Jux's ``JuxBufferConfig`` matching :meth:`env_config`."""
        jux = load_jux()
        return jux.config.JuxBufferConfig(MAX_N_UNITS=self.max_units,
                                          MAX_GLOBAL_ID=self.max_global_id,
                                          MAX_N_FACTORIES=self.max_factories + 1,
                                          MAP_SIZE=self.map_size)

    def official_kwargs(self) -> dict[str, int]:
        """The keyword arguments of ``luxai_s2.LuxAI_S2`` for these rules."""
        return {"map_size": self.map_size, "MIN_FACTORIES": self.min_factories,
                "MAX_FACTORIES": self.max_factories}


RULES: dict[str, Rules] = {
    "season2": Rules("season2", "Lux AI Season 2 (the original competition)", map_size=48,
                     min_factories=2, max_factories=5, max_units=200, max_global_id=2000),
    "neurips": Rules("neurips", "Lux AI Season 2, NeurIPS 2023 edition", map_size=64,
                     min_factories=4, max_factories=10, max_units=400, max_global_id=4000),
}
DEFAULT_RULES = "season2"


def rules_named(name: str) -> Rules:
    """The rule set called ``name``; a one-line error listing the known ones."""
    try:
        return RULES[name.lower()]
    except KeyError:
        raise GameError(f"unknown Lux rules {name!r}; known: {known_rules()}") from None


def known_rules() -> str:
    """The rule sets, each with its board size and factory counts, for error messages."""
    return ", ".join(f"{r.name} ({r.map_size}x{r.map_size}, {r.min_factories}-"
                     f"{r.max_factories} factories)" for r in RULES.values())


# ------------------------------------------------------------------------------------------
# compatibility layer


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _missing(module: str) -> GameError:
    dist = _DISTRIBUTIONS.get(module, module)
    return GameError(f"Lux needs {dist} ({module!r} is not installed): {INSTALL_HINT}")


PREALLOCATE_ENV = "XLA_PYTHON_CLIENT_PREALLOCATE"
"""JAX's switch for taking most of an accelerator's memory at its first use (default on)"""


def share_the_accelerator() -> None:
    """Let JAX allocate accelerator memory as it needs it instead of 75 % of the card at its
    first use, which leaves torch's network too little; a value the user set is kept. It takes
    effect when jax starts its backend (first array), so it must run before that."""
    os.environ.setdefault(PREALLOCATE_ENV, "false")


def _import_jax() -> types.ModuleType:
    """jax itself, checked against :data:`MIN_JAX` (with :func:`share_the_accelerator`)."""
    share_the_accelerator()
    try:
        jax = importlib.import_module("jax")
        importlib.import_module("jax.numpy")
        importlib.import_module("jax.dlpack")
    except ModuleNotFoundError as exc:
        # jax raises its own for a missing jaxlib, without a module name
        named = exc.name or ("jaxlib" if "jaxlib" in str(exc) else "jax")
        raise _missing(named.split(".")[0]) from None
    except ImportError as exc:  # e.g. a jax / jaxlib version mismatch
        raise GameError(f"jax does not import ({str(exc).splitlines()[0]}): {INSTALL_HINT}"
                        ) from None
    if _version_tuple(jax.__version__) < MIN_JAX:
        raise GameError(f"jax {jax.__version__} is too old for Lux (needs >= "
                        f"{'.'.join(map(str, MIN_JAX))}): {INSTALL_HINT}")
    return jax


def _has(obj: object, name: str) -> bool:
    """``hasattr`` without the deprecation warning jax gives for names on their way out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hasattr(obj, name)


def _takes_keyword(func: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(func, follow_wrapped=False).parameters
    except (TypeError, ValueError):
        return True  # cannot tell: leave it alone
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _clip_with_old_keywords(clip: Callable[..., Any]) -> Callable[..., Any]:
    """``clip`` that also takes NumPy's old ``a_min`` / ``a_max`` keywords (older jax did)."""

    def clip_compat(*args: Any, a_min: Any = None, a_max: Any = None, **kwargs: Any) -> Any:
        for old, new in (("a_min", a_min), ("a_max", a_max)):
            if new is not None:
                key = old[2:]
                if kwargs.get(key) is not None:
                    raise TypeError(f"clip() got both {old} and {key}")
                kwargs[key] = new
        return clip(*args, **kwargs)

    clip_compat.__name__ = clip_compat.__qualname__ = "clip"
    clip_compat.__doc__ = clip.__doc__
    clip_compat.__module__ = getattr(clip, "__module__", __name__)
    setattr(clip_compat, COMPAT_MARK, True)
    return clip_compat


def _to_dlpack(x: Any) -> Any:
    """The DLPack capsule of a jax array (what the removed ``jax.dlpack.to_dlpack`` returned)."""
    return x.__dlpack__()


setattr(_to_dlpack, COMPAT_MARK, True)


def install_compat() -> tuple[str, ...]:
    """Give jax the names Jux 3.0.0 uses that this jax lacks; the names added by this call.

    Idempotent: a name jax has (its own, or one an earlier call added) is never replaced, so a
    second call adds nothing. :func:`compat_names` lists everything added so far."""
    jax = _import_jax()
    jnp = sys.modules["jax.numpy"]
    dlpack = sys.modules["jax.dlpack"]
    needed = {"jax.tree_util.tree_map": _has(jax.tree_util, "tree_map"),
              "jax.numpy.clip(min=, max=)": _takes_keyword(jnp.clip, "min")
              or _takes_keyword(jnp.clip, "a_min"),
              "jax.dlpack.from_dlpack": _has(dlpack, "from_dlpack")}
    lacking = [name for name, there in needed.items() if not there]
    if lacking:
        raise GameError(f"jax {jax.__version__} has no {', '.join(lacking)}, which Jux needs; "
                        f"Lux is tested on jax {TESTED_JAX}: pip install 'jax<=0.10.2'")
    added: list[str] = []
    if not _has(jax, "tree_map"):  # gone from newer jax (jax.tree_util.tree_map stays)
        jax.tree_map = jax.tree_util.tree_map  # type: ignore[attr-defined]
        added.append("jax.tree_map")
    if not _takes_keyword(jnp.clip, "a_min"):  # newer jax: jnp.clip(x, min=, max=) only
        jnp.clip = _clip_with_old_keywords(jnp.clip)  # type: ignore[attr-defined]
        added.append("jax.numpy.clip(a_min=, a_max=)")
    if not _has(dlpack, "to_dlpack"):  # gone from newer jax (arrays have __dlpack__)
        dlpack.to_dlpack = _to_dlpack  # type: ignore[attr-defined]
        added.append("jax.dlpack.to_dlpack")
    _ADDED.extend(added)
    return tuple(added)


def compat_names() -> tuple[str, ...]:
    """Every name the compatibility layer has added to jax in this process."""
    return tuple(_ADDED)


def pin_threefry() -> None:
    """``jax_threefry_partitionable=False``: the maps of jax < 0.5 for every seed."""
    jax = _import_jax()
    try:
        jax.config.update("jax_threefry_partitionable", False)
    except (AttributeError, KeyError, ValueError):
        raise GameError(f"jax {jax.__version__} has no jax_threefry_partitionable setting, "
                        "so Jux's maps would not match a seed's; use jax <= 0.10.2: "
                        f"{INSTALL_HINT}") from None


def _vec_noise_stub() -> types.ModuleType:
    """A stand-in for ``vec_noise`` whose noise function says what is missing."""
    module = types.ModuleType("vec_noise")

    def snoise2(*args: Any, **kwargs: Any) -> Any:
        raise GameError(VEC_NOISE_HINT)

    module.snoise2 = snoise2  # type: ignore[attr-defined]
    setattr(module, COMPAT_MARK, True)
    module.__doc__ = "selfplay's stand-in for the missing vec_noise C extension"
    return module


def vec_noise_available() -> bool:
    """Whether the real ``vec_noise`` is importable (the official engine's maps need it)."""
    module = sys.modules.get("vec_noise")
    if module is not None:
        return not getattr(module, COMPAT_MARK, False)
    try:
        importlib.import_module("vec_noise")
    except ImportError:
        return False
    return True


def _jux_from_torch(x: Any) -> Any:
    """``jux.torch.from_torch`` through the ``__dlpack__`` protocol (newer jax takes no
    capsules)."""
    return sys.modules["jax.dlpack"].from_dlpack(x)


setattr(_jux_from_torch, COMPAT_MARK, True)


def compilation_cache_dir() -> Path | None:
    """Where jax keeps compiled Lux kernels between processes: ``$SELFPLAY_JAX_CACHE``, or
    ``~/.cache/selfplay/jax`` (``$XDG_CACHE_HOME`` honoured); ``SELFPLAY_JAX_CACHE=""`` turns
    the cache off. Compiling the adapter's kernels takes 10-40 s on a CPU; from the cache, a
    second."""
    chosen = os.environ.get("SELFPLAY_JAX_CACHE")
    if chosen is not None:
        return Path(chosen).expanduser() if chosen else None
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "selfplay" / "jax"


def use_compilation_cache() -> None:
    """Point jax's persistent compilation cache at :func:`compilation_cache_dir` (once; keys
    include the jax version, backend and flags, so another install never reads a stale
    entry). A folder that cannot be created leaves the cache off."""
    folder = compilation_cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    if not os.access(folder, os.W_OK | os.X_OK):  # read-only: jax would warn at every entry
        return
    jax = _import_jax()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


@functools.cache
def load_jux() -> types.ModuleType:
    """Jux, imported behind the compatibility layer with the threefry setting pinned and the
    persistent compilation cache on; a one-line :class:`GameError` when jax, Jux or one of their
    dependencies is missing."""
    install_compat()
    pin_threefry()
    use_compilation_cache()
    if not vec_noise_available():
        sys.modules["vec_noise"] = _vec_noise_stub()
    try:
        # luxai_s2 prints a line when pygame is missing (it only renders with it)
        with contextlib.redirect_stdout(io.StringIO()):
            jux = importlib.import_module("jux")
            for sub in ("config", "env", "actions", "state", "torch", "tree_util", "utils"):
                importlib.import_module(f"jux.{sub}")
            luxai_s2 = importlib.import_module("luxai_s2")
    except ModuleNotFoundError as exc:
        raise _missing((exc.name or "jux").split(".")[0]) from None
    except Exception as exc:  # e.g. a jax API the layer does not cover
        jax = sys.modules["jax"]
        platforms = os.environ.get("JAX_PLATFORMS")
        if platforms:  # a backend jax cannot start fails Jux's import (jax.devices())
            try:
                jax.devices()
            except Exception as cause:  # noqa: BLE001 - whatever the backend raises
                raise GameError(f"jax {jax.__version__} cannot start the backend "
                                f"JAX_PLATFORMS={platforms} asks for ({type(cause).__name__}"
                                f"{': ' + str(cause).splitlines()[0] if str(cause) else ''}); "
                                "unset JAX_PLATFORMS, or install jax for it (e.g. "
                                "pip install 'jax[cuda12]')") from None
        first = (str(exc).splitlines() or [""])[0]
        raise GameError(f"Jux does not import on jax {jax.__version__} ({type(exc).__name__}: "
                        f"{first}); Lux is tested on jax {TESTED_JAX}") from None
    for module, dist, wanted in ((jux, "juxai-s2", JUX_VERSION),
                                 (luxai_s2, "luxai-s2", LUXAI_S2_VERSION)):
        found = getattr(module, "__version__", "?")
        if found != wanted:
            raise GameError(f"{dist} {found} is installed; Lux needs {dist}=={wanted}: "
                            f"pip install --no-deps {dist}=={wanted}")
    if not getattr(jux.torch.from_torch, COMPAT_MARK, False):
        jux.torch.from_torch = _jux_from_torch
    return jux


def official_env(rules: Rules | str = DEFAULT_RULES, **kwargs: Any) -> Any:
    """The official engine (``luxai_s2.LuxAI_S2``) under ``rules``; ``kwargs`` go to it
    (``verbose=0`` unless given)."""
    load_jux()
    rules = rules_named(rules) if isinstance(rules, str) else rules
    from luxai_s2 import LuxAI_S2

    kwargs.setdefault("verbose", 0)
    return LuxAI_S2(**rules.official_kwargs(), **kwargs)


def make_env(rules: Rules | str = DEFAULT_RULES) -> Any:
    """A batched Jux env (``jux.env.JuxEnvBatch``) under ``rules``: its ``reset(seeds)`` makes
    one game per seed, jitted, on JAX's default device."""
    jux = load_jux()
    rules = rules_named(rules) if isinstance(rules, str) else rules
    return jux.env.JuxEnvBatch(rules.env_config(), rules.buffer_config())


# ------------------------------------------------------------------------------------------
# set-up report


@dataclass(frozen=True)
class LuxCheck:
    """What :func:`check` found (``selfplay setup lux`` prints it)."""

    jax: str
    jaxlib: str
    jux: str
    luxai_s2: str
    vec_noise: bool
    """whether the official engine can generate maps (Jux never needs it)"""
    backend: str
    """JAX's default backend: ``cpu``, ``gpu`` or ``tpu``"""
    devices: tuple[str, ...]
    compat: tuple[str, ...]
    """names the compatibility layer added to this jax"""
    threefry_partitionable: bool
    rules: tuple[str, ...]
    reset_seconds: float | None = None
    """wall-clock time of :func:`setup`'s first reset (compilation included)"""

    def lines(self) -> list[str]:
        shims = ", ".join(self.compat) or "none needed"
        return [
            f"jax {self.jax} (jaxlib {self.jaxlib}), backend {self.backend}: "
            f"{', '.join(self.devices)}",
            f"Jux {self.jux} on luxai_s2 {self.luxai_s2}; compatibility layer: {shims}",
            "official map generator (vec_noise): "
            + ("ok" if self.vec_noise else "missing (only the official engine needs it)"),
            f"rules: {', '.join(self.rules)}",
        ]


def check() -> LuxCheck:
    """Import Jux behind the compatibility layer and report versions and backend (no game is
    played, nothing is compiled)."""
    jux = load_jux()
    jax = sys.modules["jax"]
    luxai_s2 = sys.modules["luxai_s2"]
    jaxlib = importlib.import_module("jaxlib")
    return LuxCheck(
        jax=jax.__version__, jaxlib=getattr(jaxlib, "__version__", "?"), jux=jux.__version__,
        luxai_s2=luxai_s2.__version__, vec_noise=vec_noise_available(),
        backend=jax.default_backend(), devices=tuple(str(d) for d in jax.devices()),
        compat=compat_names(), threefry_partitionable=bool(
            jax.config.jax_threefry_partitionable),
        rules=tuple(f"{r.name} {r.map_size}x{r.map_size}" for r in RULES.values()))


def setup(quiet: bool = False, rules: str = DEFAULT_RULES) -> LuxCheck:
    """:func:`check`, then one jitted reset of a game under ``rules`` (the engine compiles and
    runs on the default device); prints the report unless ``quiet``."""
    import time

    report = check()
    jax = sys.modules["jax"]
    started = time.perf_counter()
    state = make_env(rules).jux_env.reset(0)
    jax.block_until_ready(state)
    report = dataclasses.replace(report, reset_seconds=time.perf_counter() - started)
    if not quiet:
        for line in report.lines():
            print(line)
        print(f"first reset ({rules}, compilation included): {report.reset_seconds:.1f} s")
    return report
