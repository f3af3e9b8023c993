"""Lux AI Season 2 as a :class:`~games.core.VecGame`: ``E`` Jux games x 2 seats, on the device.

One jitted function steps every game: the seats' grid actions become Jux's action queues
(:mod:`games.lux.orders`), the engine steps, and the observations, legal-action masks and
reward components of the new states are computed on JAX's device (:mod:`games.lux.observe`).
Only the arrays of the common interface cross to the host, once per step.

A game starts with rule-based bidding and factory placement (:mod:`games.lux.placement`), so
seats play the main phase. Finished games are replaced from a buffer of ``E`` games started
ahead (one batched start per ``E`` finished games), so a step that ends some games costs one
extra observation pass, not a reset of the batch. Game ``k`` of a run plays seed
``seed * 1_000_003 + k``: a run is reproducible from its seed.

A game ends when a team has no factory left or after ``max_steps`` (1000, the rules'); more
lichen wins, as in the competition (a team without factories scores -1000). Both seats'
rewards are the weighted components of :data:`~games.lux.layout.REWARD_COMPONENTS`.
Games reset together stay at the same step; trainers spread them over a game's phases with
:meth:`LuxVecGame.stagger` (the envs' running games end early, truncated, without a winner).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.batches import EpisodeTracker
from games.core import Batch, EpisodeStats, GameError, GameSpec, MultiDiscrete, Outcome
from games.lux.layout import (
    COMPONENTS,
    DEFAULT_REWARD_WEIGHTS,
    GATES,
    NVEC,
    OBS_PLANES,
    OBS_SCALE,
    REWARD_COMPONENTS,
)
from games.options import MAX_REWARD_WEIGHT

SEED_STRIDE = 1_000_003
_LICHEN = REWARD_COMPONENTS.index("lichen") - 1  # its column among the kernel's components


@dataclass(frozen=True)
class LuxOptions:
    """``game.options`` of Lux (every key optional)."""

    rules: str = "season2"
    """``season2`` (48x48, 2-5 factories per team) or ``neurips`` (64x64, 4-10)"""
    max_steps: int = 1000
    """main-phase steps before the game ends on lichen (the rules: 1000)"""
    reward_weights: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_REWARD_WEIGHTS))
    """weight of each reward component (``win``, ``ice``, ``ore``, ``water``, ``metal``,
    ``lichen``, ``units``, ``factories``, ``lichen_lead``); components left out weigh 0"""
    render: bool = False
    """accepted for uniformity: :meth:`LuxVecGame.render` always works"""
    render_cell: int = 8
    """pixels per cell in rendered frames"""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.reward_weights) - set(REWARD_COMPONENTS))
        if unknown:
            raise ValueError(f"reward_weights: unknown component {unknown[0]!r} (known: "
                             f"{', '.join(REWARD_COMPONENTS)})")
        if not any(self.reward_weights.values()):  # {} included: components left out weigh 0
            raise ValueError(f"reward_weights gives every reward component weight 0 "
                             f"({dict(self.reward_weights)}): nothing would be learned; name "
                             "one, e.g. {win: 1}")
        if self.reward_weights.get("win", 0.0) < 0:  # the shaped components may be penalties
            raise ValueError(f"reward_weights.win must be >= 0, got "
                             f"{self.reward_weights['win']}: a negative weight rewards losing")
        if not 1 <= self.max_steps <= 1000:
            raise ValueError(f"max_steps must be between 1 and 1000, got {self.max_steps}")
        if not all(abs(w) <= MAX_REWARD_WEIGHT for w in self.reward_weights.values()):
            raise ValueError(f"reward_weights must each be within +-{MAX_REWARD_WEIGHT:g} (the "
                             "rewards are float32; larger ones overflow the losses), got "
                             f"{dict(self.reward_weights)}")
        if not 2 <= self.render_cell <= 64:  # 64: a 3,072-pixel frame of the 48x48 board
            raise ValueError(f"render_cell must be in 2..64, got {self.render_cell}")


def lux_spec(name: str, num_envs: int, size: int) -> GameSpec:
    """The spec of ``num_envs`` Lux games on a ``size`` x ``size`` board, two seats."""
    planes = (len(OBS_PLANES), size, size)
    return GameSpec(
        name=name, num_envs=num_envs, num_seats=2, obs_shape=planes,
        obs_dtype=np.dtype(np.uint8), obs_scale=OBS_SCALE,
        action_space=MultiDiscrete(NVEC, grid=(size, size), gates=GATES, names=COMPONENTS),
        state_shape=planes, state_dtype=np.dtype(np.uint8), state_is_obs=True,
        obs_kind="grid", zero_sum=True, render_fps=10, plane_names=OBS_PLANES)


class _Kernels:
    """The jitted functions of one rule set (shared by every game of those rules)."""

    _cache: dict[str, _Kernels] = {}

    @classmethod
    def get(cls, rules_name: str) -> _Kernels:
        if rules_name not in cls._cache:
            cls._cache[rules_name] = cls(rules_name)
        return cls._cache[rules_name]

    def __init__(self, rules_name: str) -> None:
        from games.lux import engine

        engine.load_jux()
        import jax
        import jax.numpy as jnp

        from games.lux.observe import (
            near_planes,
            next_near_planes,
            view,
        )
        from games.lux.orders import lichen_scores, step_components, to_jux
        from games.lux.placement import start_game

        rules = engine.rules_named(rules_name)
        self.rules = rules
        env_cfg = rules.env_config()
        buf_cfg = rules.buffer_config()
        max_units = rules.max_units

        # the game length is an argument, not a constant: games of any length share one
        # compilation
        # the games' near_* planes (games.lux.observe.near_planes) travel beside their states,
        # and so do the goal steps the masks computed (the next step's orders take them)
        near_of = jax.vmap(near_planes)

        def views(states: Any, near: Any, max_steps: Any) -> tuple[Any, Any, Any]:
            return jax.vmap(lambda s, n: view(s, max_units, max_steps, n))(states, near)

        def strong(states: Any) -> Any:
            # Jux keeps its rule constants as weak-typed scalars; states restored from NumPy
            # arrays (set_state) are strongly typed, and a kernel given both compiles twice
            return jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype),
                                          states)

        def step(states: Any, near: Any, goals: Any, grid: Any, max_steps: Any
                 ) -> tuple[Any, ...]:
            actions = jax.vmap(to_jux)(states, grid, goals)
            after = strong(jax.vmap(lambda s, a: s._step_late_game(a))(states, actions))
            comps = jax.vmap(step_components)(states, actions, after)
            scores = jax.vmap(lichen_scores)(after)
            done = (after.n_factories == 0).any(-1) | (after.real_env_steps >= max_steps)
            near = next_near_planes(near, after)
            obs, masks, goals = views(after, near, max_steps)
            return after, near, goals, comps, scores, done, obs, masks

        def refill(states: Any, fresh: Any, take: Any, index: Any) -> Any:
            picked = jax.tree_util.tree_map(lambda f: f[index], fresh)
            return jax.tree_util.tree_map(
                lambda new, old: jnp.where(take.reshape((-1,) + (1,) * (old.ndim - 1)), new,
                                           old), picked, states)

        self.start = jax.jit(lambda seeds: strong(jax.vmap(
            lambda seed: start_game(seed, env_cfg, buf_cfg))(seeds)))
        self.near = jax.jit(near_of)
        self.view = jax.jit(views)
        self.step = jax.jit(step)
        self.refill = jax.jit(refill)
        # one game's state out of the batch: one compilation per batch size (indexing each
        # leaf eagerly compiles a slice per leaf shape, ~50 of them)
        self.take = jax.jit(lambda states, index: jax.tree_util.tree_map(lambda x: x[index],
                                                                          states))
        self.jnp = jnp
        self.jax = jax
        device = jax.devices()[0]

        def put(x: Any) -> Any:
            # every array the kernels take is committed to the device: jit compiles a kernel
            # once per placement, and DLPack's arrays (and every kernel output after one) are
            # committed, so uncommitted NumPy inputs would cost a second compilation
            return jax.device_put(x, device)

        self.put = put


class LuxVecGame:
    """``num_envs`` Lux games, two seats each (seat ``s`` plays team ``s``)."""

    reward_component_names: tuple[str, ...] = REWARD_COMPONENTS

    def __init__(self, options: LuxOptions, num_envs: int, seed: int | None = None,
                 name: str = "lux") -> None:
        if num_envs < 1:
            raise GameError(f"num_envs must be >= 1, got {num_envs}")
        self.options = options
        self._k = _Kernels.get(options.rules)
        self._max_steps = self._k.put(np.int32(options.max_steps))
        size = self._k.rules.map_size
        self.size = size
        self.spec = lux_spec(name, num_envs, size)
        self._weights = np.array([options.reward_weights.get(c, 0.0)
                                  for c in REWARD_COMPONENTS], np.float64)
        self._seed = 0 if seed is None else int(seed)
        self._started = 0  # games started so far (the next game's number)
        self._states: Any = None
        self._near: Any = None  # the games' near_* planes, kept between steps
        self._goals: Any = None  # the games' goal steps, from the masks to the next orders
        self._fresh: Any = None
        self._fresh_near: Any = None
        self._fresh_used = num_envs
        self._tracker = EpisodeTracker(num_envs, 2)
        self._cut_in = np.full(num_envs, -1, np.int64)
        """steps until each env's running game ends, truncated (:meth:`stagger`); -1: none"""
        self._comp_sums = np.zeros((num_envs, 2, len(REWARD_COMPONENTS)), np.float64)
        self._episode_comps = np.zeros((0, len(REWARD_COMPONENTS)), np.float64)
        self._final_states: Any = None
        self.device_arrays = False
        """observations, masks and final observations stay on JAX's device, and actions may
        come as any DLPack array (:class:`~games.core.SupportsDeviceArrays`)"""

    # ------------------------------------------------------------------ VecGame

    def _seeds(self, count: int) -> Any:
        first = self._seed * SEED_STRIDE + self._started
        self._started += count
        return self._k.put(np.arange(first, first + count, dtype=np.int64).astype(np.uint32))

    def reset(self, seed: int | None = None) -> Batch:
        if seed is not None:
            self._seed, self._started = int(seed), 0
        e = self.spec.num_envs
        self._states = self._k.start(self._seeds(e))
        self._near = self._k.near(self._states)
        self._fresh, self._fresh_near, self._fresh_used = None, None, e
        self._tracker = EpisodeTracker(e, 2)
        self._cut_in[:] = -1
        self._comp_sums[:] = 0.0
        self._final_states = self._states
        obs, masks = self._view()
        zeros = np.zeros(e, bool)
        return Batch(obs, masks, obs, np.zeros((e, 2), np.float32), zeros,
                     zeros.copy(), np.ones((e, 2), bool), EpisodeStats.empty())

    def _view(self) -> tuple[Any, Any]:
        """The games' observations and masks as the batch gives them; keeps their goal
        steps."""
        obs, masks, self._goals = self._k.view(self._states, self._near, self._max_steps)
        return self._host((obs, masks))

    def _host(self, arrays: tuple[Any, Any]) -> tuple[Any, Any]:
        """Observations and masks as the batch gives them: NumPy copies (the device's buffers
        are read-only on the host), or the device arrays themselves with ``device_arrays``."""
        if self.device_arrays:
            return arrays
        return np.array(arrays[0]), np.array(arrays[1])

    def _grid(self, actions: Any) -> Any:
        """``actions`` ``[E, 2, cells, 6]`` on JAX's device: a NumPy array is copied there; any
        other array that exports DLPack (a torch tensor) is taken without a copy when it is
        on that device."""
        e, cells = self.spec.num_envs, self.size * self.size
        if isinstance(actions, np.ndarray):
            return self._k.put(actions.reshape(e, 2, cells, len(NVEC)))
        grid = self._k.jax.dlpack.from_dlpack(actions)
        return grid.reshape(e, 2, cells, len(NVEC))

    def step(self, actions: np.ndarray) -> Batch:
        if self._states is None:
            raise GameError("call reset() before step()")
        e = self.spec.num_envs
        before = self._states
        after, near, goals, comps, scores, done, obs, masks = self._k.step(
            before, self._near, self._goals, self._grid(actions), self._max_steps)
        comps = np.asarray(comps, np.float64)  # [E, 2, 7]: ice .. factories
        done = np.asarray(done)
        cut = self._count_down(done)
        scores = np.asarray(scores)
        win = np.where(done[:, None], np.sign(scores - scores[:, ::-1]), 0)  # [E, 2]
        lichen = comps[..., _LICHEN]
        parts = np.concatenate([win[..., None], comps, (lichen - lichen[:, ::-1])[..., None]],
                               -1)  # [E, 2, C]
        reward = (parts @ self._weights).astype(np.float32)
        self._comp_sums += parts
        outcome = np.where(cut[:, None], int(Outcome.NONE), win).astype(np.int8)
        ended = done | cut
        episodes = self._tracker.update(reward, ended, outcome)
        self._episode_comps = self._comp_sums[episodes.env, episodes.seat].copy()
        self._comp_sums[ended] = 0.0
        obs, masks = self._host((obs, masks))
        final_obs = None
        self._final_states = after
        self._states, self._near, self._goals = after, near, goals
        if ended.any():
            final_obs = obs
            self._states, self._near = self._replace_finished(after, near, ended)
            obs, masks = self._view()
        return Batch(obs, masks, obs, reward, done, cut, np.ones((e, 2), bool), episodes,
                     final_obs, final_obs)

    def _count_down(self, done: np.ndarray) -> np.ndarray:
        """``bool [E]``: the games :meth:`stagger` ends on this step (those the rules did not
        end first); counts the others down."""
        counting = self._cut_in > 0
        self._cut_in[counting] -= 1
        cut = (self._cut_in == 0) & ~done
        self._cut_in[(self._cut_in == 0) | done] = -1
        return cut

    def game_progress(self) -> np.ndarray:
        """``float [E]``: each game's main-phase steps over ``max_steps`` (what the
        ``progress`` plane shows; :class:`games.core.SupportsGameProgress`)."""
        if self._states is None:
            raise GameError("call reset() before game_progress()")
        now = np.asarray(self._states.real_env_steps, np.float64)
        return np.clip(now / self.options.max_steps, 0.0, 1.0).astype(np.float32)

    def stagger(self) -> bool:
        """End env ``e``'s running game, truncated, at step ``e * max_steps // E`` of it (the
        next step where it is past that; env 0's runs to its end), so the envs then play at
        phases spread over a game (:class:`games.core.SupportsStaggering`). Games that the
        rules end first (a team without factories) end as usual."""
        if self._states is None:
            raise GameError("call reset() before stagger()")
        e = self.spec.num_envs
        at = np.arange(e, dtype=np.int64) * self.options.max_steps // e
        now = np.asarray(self._states.real_env_steps, np.int64)
        self._cut_in = np.where(at > 0, np.maximum(at - now, 1), -1)
        return True

    def _replace_finished(self, states: Any, near: Any, done: np.ndarray) -> tuple[Any, Any]:
        """``(states, near)`` with the finished games swapped for games started ahead."""
        e = self.spec.num_envs
        count = int(done.sum())
        if self._fresh is None or self._fresh_used + count > e:
            self._fresh, self._fresh_used = self._k.start(self._seeds(e)), 0
            self._fresh_near = None
        if self._fresh_near is None:
            self._fresh_near = self._k.near(self._fresh)
        index = np.zeros(e, np.int32)
        index[done] = self._fresh_used + np.arange(count)
        self._fresh_used += count
        take, index = self._k.put(done), self._k.put(index)
        return (self._k.refill(states, self._fresh, take, index),
                self._k.refill(near, self._fresh_near, take, index))

    def close(self) -> None:
        self._states = self._fresh = self._final_states = None
        self._near = self._fresh_near = self._goals = None

    # ------------------------------------------------------------------ capabilities

    def episode_reward_components(self) -> np.ndarray:
        """``float64 [K, C]``: the summed components (:data:`REWARD_COMPONENTS`) of the last
        batch's seat-episodes."""
        return self._episode_comps

    def scores(self) -> np.ndarray:
        """``int [E, 2]``: each game's current score (lichen; -1000 without factories)."""
        from games.lux.orders import lichen_scores

        return np.asarray(self._k.jax.vmap(lichen_scores)(self._states))

    def host_state(self, env_index: int = 0, final: bool = False) -> Any:
        """One game's Jux state as NumPy arrays (for drawing and replays)."""
        states = self._final_states if final else self._states
        if states is None:
            raise GameError("call reset() before reading a game's state")
        if not 0 <= env_index < self.spec.num_envs:
            raise GameError(f"env_index {env_index} out of range 0..{self.spec.num_envs - 1}")
        one = self._k.take(states, np.int32(env_index))
        return self._k.jax.tree_util.tree_map(np.asarray, self._k.jax.device_get(one))

    def render(self, env_index: int = 0) -> np.ndarray:
        from games.lux.render import draw_state

        return draw_state(self.host_state(env_index), self.options.render_cell)

    def render_final(self, env_index: int = 0) -> np.ndarray:
        from games.lux.render import draw_state

        return draw_state(self.host_state(env_index, final=True), self.options.render_cell)

    def get_state(self) -> dict[str, object]:
        """Every game's state, the games started ahead and the counters, as NumPy arrays."""
        if self._states is None:
            raise GameError("call reset() before get_state()")
        leaves = self._k.jax.tree_util.tree_leaves
        out: dict[str, object] = {f"games.{i}": np.asarray(x)
                                  for i, x in enumerate(leaves(self._states))}
        if self._fresh is not None:
            out.update({f"fresh.{i}": np.asarray(x) for i, x in enumerate(leaves(self._fresh))})
        tracker = self._tracker.state_dict()
        out.update({"seed": np.array(self._seed), "started": np.array(self._started),
                    "fresh_used": np.array(self._fresh_used), "returns": tracker["returns"],
                    "lengths": tracker["lengths"], "components": self._comp_sums.copy(),
                    "cut_in": self._cut_in.copy()})
        return out

    def set_state(self, state: dict[str, object]) -> None:
        """Restore :meth:`get_state`'s arrays (same rules and ``num_envs``)."""
        jax, jnp = self._k.jax, self._k.jnp
        e = self.spec.num_envs
        template = jax.eval_shape(self._k.start, jax.ShapeDtypeStruct((e,), jnp.uint32))
        leaves, tree = jax.tree_util.tree_flatten(template)

        def rebuild(prefix: str) -> Any:
            arrays = []
            for i, ref in enumerate(leaves):
                key = f"{prefix}.{i}"
                if key not in state:
                    raise GameError(f"Lux state is missing {key!r} (saved by another version?)")
                a = np.asarray(state[key])
                if a.shape != ref.shape:
                    raise GameError(f"Lux state {key!r} has shape {a.shape}, expected "
                                    f"{ref.shape} (saved with other rules or num_envs?)")
                arrays.append(self._k.put(a.astype(ref.dtype)))
            return jax.tree_util.tree_unflatten(tree, arrays)

        self._states = rebuild("games")
        self._near = self._k.near(self._states)
        _, _, self._goals = self._k.view(self._states, self._near, self._max_steps)
        self._final_states = self._states
        self._fresh = rebuild("fresh") if "fresh.0" in state else None
        self._fresh_near = None
        self._seed = int(np.asarray(state["seed"]))
        self._started = int(np.asarray(state["started"]))
        self._fresh_used = int(np.asarray(state["fresh_used"]))
        self._tracker.load_state_dict({"returns": np.asarray(state["returns"]),
                                       "lengths": np.asarray(state["lengths"])})
        self._comp_sums[:] = np.asarray(state["components"])
        # (states saved before stagger() existed have no countdown)
        self._cut_in = (np.asarray(state["cut_in"], np.int64).copy() if "cut_in" in state
                        else np.full(e, -1, np.int64))
