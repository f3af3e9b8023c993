"""Lux AI Season 2 on a JAX engine (Jux): ``selfplay train --game lux``.

- :mod:`games.lux.engine`: Jux behind a compatibility layer on the newest jax, the rule sets;
- :mod:`games.lux.layout`: the observation planes and per-cell action components;
- :mod:`games.lux.adapter`: :class:`~games.lux.adapter.LuxVecGame`, E games x 2 seats on the
  device (:mod:`games.lux.placement`, :mod:`games.lux.observe`, :mod:`games.lux.orders`);
- :mod:`games.lux.bots`: scripted opponents acting through seats; :mod:`games.lux.family`.

Importing this package imports neither jax nor Jux; :func:`~games.lux.engine.load_jux` does.
It does turn off JAX's taking most of an accelerator's memory at its first use
(:func:`~games.lux.engine.share_the_accelerator`), before any module of it starts jax.
"""

from __future__ import annotations

from typing import Any

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
    share_the_accelerator,
)

share_the_accelerator()


def make(name: str = "lux", num_envs: int = 1, seed: int | None = None, **options: Any) -> Any:
    """The registry factory: ``num_envs`` Lux games configured by ``options`` (keys of
    :class:`~games.lux.adapter.LuxOptions`; an unknown key is an error naming it)."""
    from games.lux.adapter import LuxOptions, LuxVecGame
    from games.options import from_mapping

    return LuxVecGame(from_mapping(LuxOptions, options, "game.options."), num_envs, seed, name)


__all__ = ["DEFAULT_RULES", "RULES", "LuxCheck", "Rules", "check", "install_compat", "load_jux",
           "make", "make_env", "official_env", "rules_named", "setup"]
