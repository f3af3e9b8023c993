"""The start of a Lux game, played by rules on the device: bidding and factory placement.

Policies play the main phase only. Every new game is generated from its seed (Jux's map
generator), then:

- **bidding**: both teams bid 0 (so player 0 places first, the official tie rule) and play the
  first faction; the bid's water and metal stay with the factories;
- **placement**: the teams alternate as the rules say; each places its factory on the valid
  spawn cell nearest to ice, then ore (score ``-(d_ice + d_ore / 2)``, Manhattan distances from
  the factory's centre, ties broken by a small seeded jitter), with an equal share of its
  water and metal (150 each under the Season 2 rules).

After :func:`start_game` a game is at its first real step (``real_env_steps == 0``). The same
seed gives the same map and placement on every machine (``jax_threefry_partitionable`` is
pinned by :mod:`games.lux.engine`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

BIG = 10_000.0


def distance_to(targets: jnp.ndarray, steps: int) -> jnp.ndarray:
    """``float [S, S]``: Manhattan distance from each cell to the nearest ``True`` cell of
    ``targets`` (``BIG`` beyond ``steps``)."""
    def relax(_: int, d: jnp.ndarray) -> jnp.ndarray:
        pad = jnp.pad(d, 1, constant_values=BIG)
        near = jnp.minimum(jnp.minimum(pad[:-2, 1:-1], pad[2:, 1:-1]),
                           jnp.minimum(pad[1:-1, :-2], pad[1:-1, 2:]))
        return jnp.minimum(d, near + 1.0)

    start = jnp.where(targets, 0.0, BIG)
    return jax.lax.fori_loop(0, steps, relax, start)


def spawn_scores(state: Any, seed: jnp.ndarray) -> jnp.ndarray:
    """``float [S, S]`` ([x, y]): how good a factory centre each cell is (higher is better)."""
    size = state.board.lichen.shape[0]
    d_ice = distance_to(state.board.ice, size)
    d_ore = distance_to(state.board.ore, size)
    jitter = jax.random.uniform(jax.random.fold_in(jax.random.PRNGKey(0), seed), (size, size))
    return -(d_ice + 0.5 * d_ore) + 0.1 * jitter


def start_game(seed: jnp.ndarray, env_cfg: Any, buf_cfg: Any) -> Any:
    """A new game from ``seed``, bid and placed, at its first real step (one game; vmap it)."""
    from jux.state import State

    state = State.new(seed, env_cfg, buf_cfg)
    zeros = jnp.zeros(2, jnp.int32)
    state = state._step_bid(zeros, zeros)
    scores = spawn_scores(state, seed)
    size = scores.shape[0]

    def turn(_: int, st: Any) -> Any:
        player = st.next_player.astype(jnp.int32)
        left = st.teams.factories_to_place[player].astype(jnp.int32)
        best = jnp.argmax(jnp.where(st.board.valid_spawns_mask, scores, -BIG)).astype(jnp.int32)
        spawn = jnp.broadcast_to(jnp.stack([best // size, best % size]), (2, 2))
        share_w = st.teams.init_water[player].astype(jnp.int32) // jnp.maximum(left, 1)
        share_m = st.teams.init_metal[player].astype(jnp.int32) // jnp.maximum(left, 1)
        placed = st._step_factory_placement(spawn, jnp.full(2, share_w), jnp.full(2, share_m))
        return jax.tree_util.tree_map(lambda new, old: jnp.where(left > 0, new, old), placed, st)

    placed = jax.lax.fori_loop(0, 2 * env_cfg.MAX_FACTORIES, turn, state)
    # Jux's maps hold rubble as int8 and its step returns it as int32: a game starts with the
    # type every later step has, so the step kernel compiles once, not once more for step 1
    board = placed.board
    return placed._replace(board=board._replace(
        map=board.map._replace(rubble=board.map.rubble.astype(jnp.int32))))
