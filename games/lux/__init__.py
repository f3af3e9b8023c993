"""Lux AI Season 2 on a JAX engine (Jux): so far the engine layer, :mod:`games.lux.engine`.

Importing this package imports neither jax nor Jux; :func:`~games.lux.engine.load_jux` does, behind
the compatibility layer. No ``lux`` game is registered yet (the adapter comes next, issue 22).
"""

from __future__ import annotations

from games.lux.engine import (
    DEFAULT_RULES,
    RULES,
    LuxCheck,
    Rules,
    check,
    install_compat,
    load_jux,
    make_env,
    official_env,
    rules_named,
    setup,
)

__all__ = ["DEFAULT_RULES", "RULES", "LuxCheck", "Rules", "check", "install_compat", "load_jux",
           "make_env", "official_env", "rules_named", "setup"]
