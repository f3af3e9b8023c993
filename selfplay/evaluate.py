"""Loading a trained policy from a checkpoint and measuring it (``selfplay eval``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from games.contract import EpisodeWatch
from games.core import (
    GameError,
    GameSpec,
    HasMaps,
    SupportsFinalFrame,
    SupportsRender,
    VecGame,
)
from games.family import Family
from games.files import atomic_write_path
from games.options import to_mapping
from games.registry import family_of, make_game
from selfplay.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint
from selfplay.config import ConfigError, NetworkConfig, TrainConfig
from selfplay.config_files import saved_config_from_mapping
from selfplay.networks import ActorCritic
from selfplay.policy import FrozenPolicy


def load_agent(path: str | Path, spec: GameSpec | None = None,
               state: dict[str, Any] | None = None
               ) -> tuple[TrainConfig, ActorCritic, dict[str, Any]]:
    """Config, network and raw checkpoint of ``path`` (or of its already loaded ``state``).

    ``spec`` defaults to the spec of a 1-env instance of the checkpoint's game. Weights that
    do not fit the network built for ``spec`` are a one-line :class:`CheckpointError` (see
    :func:`load_weights`).
    """
    if state is None:
        state = load_checkpoint(path)
    config, weights = trained_config(state, path)
    if spec is None:
        spec = trained_spec(config)
    agent = ActorCritic(spec, config.network, config.normalize)
    load_weights(agent, weights, spec, config, str(path))
    return config, agent.eval(), state


def trained_config(state: Mapping[str, Any], path: str | Path
                   ) -> tuple[TrainConfig, Mapping[str, Any]]:
    """The training config and the network weights of checkpoint ``state`` (read from
    ``path``); a one-line :class:`CheckpointError` if it lacks them, or holds a config this
    selfplay cannot read."""
    try:
        return saved_config_from_mapping(state["config"]), state["agent"]
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{path} lacks the training config or weights") from exc
    except ConfigError as exc:
        raise CheckpointError(f"{path} holds a config this selfplay cannot read: {exc}") \
            from exc


def trained_spec(config: TrainConfig) -> GameSpec:
    """The spec of one env of the game ``config`` trains on (staged as a match between two
    policies where the game has two players: one env of it is a valid game)."""
    name = config.game.name
    family = family_of(name)
    staging = family.match_setup(name, None, 1, config.seed).options if family.two_player \
        else {}
    game = make_game(name, num_envs=1, seed=config.seed,
                     options={**config.game.options, **staging})
    try:
        return game.spec
    finally:
        game.close()


def start_weights(agent: ActorCritic, spec: GameSpec, path: Path,
                  options: Mapping[str, Any],
                  network: NetworkConfig | None = None) -> dict[str, list[int]]:
    """Load the network of checkpoint ``path`` (a training, cloning or snapshot checkpoint)
    into ``agent``, built for ``spec`` and the game ``options``: its weights and
    normalization statistics, bit for bit (``init_from``). A one-line
    :class:`CheckpointError` for a checkpoint of another game, of another network, or
    trained on other observations (a rotated board, fog of war: the family's
    ``observation_settings``); weights that do not fit ``agent`` name the settings of
    ``network`` (the run's) that differ from the checkpoint's. Returns the boards the network
    learned on there (:func:`inherited_boards`)."""
    state = load_checkpoint(path)
    game = state.get("game")
    if game != spec.name:
        raise CheckpointError(f"{path} is for game {game}, this run trains {spec.name}")
    trained, weights = trained_config(state, path)
    differ = family_of(spec.name).observation_difference(trained.game.options, options)
    if differ is not None:
        key, theirs, mine = differ
        raise CheckpointError(
            f"{path} was trained with game.options.{key}={theirs!r}, this run has {mine!r}: "
            f"it would see observations unlike those it learned on; set "
            f"game.options.{key}={theirs!r}")
    if tuple(sorted(set(trained.network.ignore_planes))) != agent.ignore_planes:
        raise CheckpointError(
            f"{path} was trained with network.ignore_planes={sorted(trained.network.ignore_planes)}"
            f", this run has {list(agent.ignore_planes)}: set the same")
    try:
        load_weights(agent, weights, spec, trained, str(path))
    except CheckpointError:
        settings = None if network is None else network_difference(trained.network, network)
        if settings is None:
            raise
        raise CheckpointError(f"{path} holds a network built with {settings}: its weights do "
                              "not fit this run's; set the same") from None
    return inherited_boards(state)


def network_difference(trained: NetworkConfig, mine: NetworkConfig) -> str | None:
    """The ``network.*`` settings of ``trained`` that ``mine`` sets otherwise, as
    ``network.KEY=VALUE (this run: VALUE)``; None when they are the same."""
    theirs, ours = to_mapping(trained), to_mapping(mine)
    keys = [k for k in theirs if theirs.get(k) != ours.get(k)]
    return ", ".join(f"network.{k}={theirs[k]!r} (this run: {ours.get(k)!r})"
                     for k in keys) or None


def inherited_boards(state: Mapping[str, Any]) -> dict[str, list[int]]:
    """The boards a checkpoint's network learned on (``{map: [height, width]}``, ``trained_on``
    in ``play``), those of the runs it started from included; {} where it records none."""
    boards = state.get("boards")
    if not isinstance(boards, Mapping):
        return {}
    return {str(name): [int(v) for v in size] for name, size in boards.items()
            if isinstance(size, list | tuple) and len(size) == 2}


def load_weights(agent: ActorCritic, weights: Mapping[str, Any], spec: GameSpec,
                 trained: TrainConfig | None, source: str) -> None:
    """Load ``weights`` of ``source`` (trained with ``trained``, None if unknown) into
    ``agent`` (built for ``spec``).

    Weights that do not fit are a one-line :class:`CheckpointError`: naming the shapes when
    the game's observations or actions differ from the ones they were trained on (a board of
    another size, say), else the first difference PyTorch finds. The trained shapes are only
    looked up then: from the observation statistics saved with the weights, or from a game
    built with the training config.
    """
    own = agent.state_dict()
    weights = with_pad_plane(weights, own, spec)
    resized = any(isinstance(value, torch.Tensor) and key in own
                  and value.shape != own[key].shape for key, value in weights.items())
    # a dense critic over the feature map fits another board whose feature map has the same
    # size (8x8 and 6x6 boards, say): the board is compared then too
    tied = (spec.obs_kind == "grid" and trained is not None
            and trained.network.grid_critic == "flatten")
    if resized or tied:
        message = shape_mismatch(source, spec, *_trained_shapes(weights, trained, spec))
        if message is not None:
            raise CheckpointError(message)
    normalized = normalization_difference(source, weights, own)
    if normalized is not None:
        raise CheckpointError(normalized)
    try:
        agent.load_state_dict(weights)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{source} does not match the network of game {spec.name}: "
                              f"{_first_difference(exc)}") from exc
    broken = next((key for key, value in agent.state_dict().items()
                   if value.is_floating_point() and not bool(torch.isfinite(value).all())),
                  None)
    if broken is not None:  # training never saves such weights: a damaged or edited file
        raise CheckpointError(f"{source} holds weights that are not numbers ({broken} has "
                              "NaN or infinite values): a damaged file")


_NORMALIZATION = (("obs_rms.", "normalize.obs"), ("value_rms.", "normalize.value"))


def normalization_difference(source: str, weights: Mapping[str, Any],
                             own: Mapping[str, Any]) -> str | None:
    """Why ``weights`` cannot load into a network normalized otherwise (a run's
    ``normalize.obs`` / ``normalize.value`` differ from the checkpoint's: its running
    statistics are there or missing), with the setting that makes them fit; None if alike."""
    for prefix, key in _NORMALIZATION:
        saved = any(k.startswith(prefix) for k in weights)
        here = any(k.startswith(prefix) for k in own)
        if saved != here:
            return (f"{source} was trained with {key} {str(saved).lower()}; this network has "
                    f"it {str(here).lower()}: --set {key}={str(saved).lower()} to match it")
    return None


def with_pad_plane(weights: Mapping[str, Any], own: Mapping[str, Any], spec: GameSpec
                   ) -> Mapping[str, Any]:
    """Weights saved before the game's padding plane (``spec.pad_plane``, appended after the
    planes they read) with a zero input weight for it: exactly the saved network on boards
    without padding, where that plane is all zeros. Other weights are returned as they are."""
    plane = spec.pad_plane
    if plane is None:
        return weights
    upgraded = dict(weights)
    for key, value in weights.items():
        target = own.get(key)
        if (isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor)
                and value.dim() == target.dim() == 4 and value.shape[1] == plane
                and target.shape[1] == plane + 1
                and (value.shape[0], *value.shape[2:]) == (target.shape[0], *target.shape[2:])):
            zero = value.new_zeros((value.shape[0], 1, *value.shape[2:]))
            upgraded[key] = torch.cat([value, zero], 1)  # an input conv's weight [out, in, k, k]
    return upgraded


def _first_difference(exc: BaseException) -> str:
    """The first line of PyTorch's state-dict error that says something (not its header)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Error(s) in loading state_dict"):
        lines = lines[1:]
    return lines[0][:200] if lines else type(exc).__name__


def _trained_shapes(weights: Mapping[str, Any], trained: TrainConfig | None, spec: GameSpec
                    ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Observation and action shapes ``weights`` were trained on (None where unknown)."""
    mean = weights.get("obs_rms.mean")  # the normalization statistics: [*obs_shape]
    obs = tuple(mean.shape) if isinstance(mean, torch.Tensor) else None
    if trained is None or (obs is not None and obs != tuple(spec.obs_shape)):
        return obs, None
    try:
        built = trained_spec(trained)
    except Exception:  # noqa: BLE001 - not buildable here: PyTorch's difference is reported
        return obs, None
    return tuple(built.obs_shape), tuple(built.action_space.action_shape)


def shape_mismatch(source: str, spec: GameSpec, obs: tuple[int, ...] | None,
                   actions: tuple[int, ...] | None) -> str | None:
    """Why a network trained on observations ``obs`` and actions ``actions`` cannot play
    ``spec``'s game; None if those shapes are the game's (or unknown)."""
    if obs is not None and obs != tuple(spec.obs_shape):
        new = tuple(spec.obs_shape)
        if spec.obs_kind in ("grid", "image") and len(obs) == len(new) == 3:
            what = "board" if spec.obs_kind == "grid" else "image"
            if obs[0] != new[0]:
                return (f"{source} was trained on {obs[0]} observation planes; this game gives "
                        f"{new[0]} (the game's observation changed since): retrain it, or "
                        f"play it with the version of selfplay that trained it")
            tied = ("(network.grid_critic: flatten; train with pool for a network that plays "
                    "every size)" if spec.obs_kind == "grid" else "")
            return (f"{source} was trained on observations of shape {obs} ({obs[1]}x{obs[2]} "
                    f"{what}); this game gives {new} ({new[1]}x{new[2]} {what}): its network "
                    f"is tied to the {what} size it was trained on {tied}".rstrip())
        return (f"{source} was trained on observations of shape {obs}; this game gives {new}: "
                f"its network takes only the observations it was trained on")
    if actions is not None and actions != tuple(spec.action_space.action_shape):
        return (f"{source} was trained on actions of shape {actions}; this game takes "
                f"{tuple(spec.action_space.action_shape)}: its network outputs only the "
                f"actions it was trained on")
    return None


def run_episodes(game: VecGame, policy: FrozenPolicy, episodes: int, seed: int,
                 video: Path | None = None, max_steps: int = 10_000_000,
                 progress: Callable[[int, int], None] | None = None) -> list[float]:
    """Returns of ``episodes`` finished episodes of seat 0; the policy plays every seat.

    Each env contributes a fixed share (``episodes`` split evenly over the envs, in env
    order), not whichever episodes end first: those would be the short ones, and biased.
    ``progress(finished, episodes)`` is called as the episodes counted finish.
    """
    spec = game.spec
    e, a = spec.num_envs, spec.num_seats
    watch = EpisodeWatch(spec)
    batch = watch.reset(game.reset(seed=seed))
    quota = np.full(e, episodes // e, np.int64) + (np.arange(e) < episodes % e)  # [E]
    per_env: list[list[float]] = [[] for _ in range(e)]
    frames: list[np.ndarray] = []
    if video is not None and not isinstance(game, SupportsRender):  # before any episode
        raise GameError(f"{spec.name} cannot render frames; drop --video")
    render = game.render if video is not None and isinstance(game, SupportsRender) else None
    recording = render is not None
    steps = 0
    while any(len(r) < q for r, q in zip(per_env, quota, strict=True)) and steps < max_steps:
        if recording and render is not None:
            frames.append(render(0))
        mask = (batch.action_mask.reshape(e * a, *batch.action_mask.shape[2:])
                if batch.action_mask is not None else None)
        state = (batch.state.reshape(e * a, *batch.state.shape[2:])
                 if batch.state is not None else None)
        actions = policy.act(batch.obs.reshape(e * a, *spec.obs_shape), mask, state)
        batch = game.step(actions.reshape(e, a, *spec.action_space.action_shape))
        steps += 1
        watch.step(batch)
        stats = batch.episodes
        seat0 = stats.seat == 0
        for env, ret in zip(stats.env[seat0].tolist(), stats.ret[seat0].tolist(), strict=True):
            if len(per_env[env]) < quota[env]:
                per_env[env].append(ret)
                if progress is not None:
                    progress(sum(map(len, per_env)), episodes)
        if recording and (stats.env[seat0] == 0).any():
            recording = False  # one full episode of env 0 is in the video
            add_final_frame(game, frames)
    if video is not None:
        write_video(video, frames, spec.render_fps)
    return [ret for env_returns in per_env for ret in env_returns]


def add_final_frame(game: VecGame, frames: list[np.ndarray]) -> None:
    """Append the last position of env 0's finished episode, where the game can draw it (the
    frames grabbed before each step stop one move short of the end)."""
    if isinstance(game, SupportsFinalFrame):
        frames.append(game.render_final(0))


def even_frame(frame: np.ndarray) -> np.ndarray:
    """``frame`` padded (edge pixels repeated) to an even height and width: H.264 refuses odd
    sides (ffmpeg then wrote nothing, and an empty file replaced the video)."""
    h, w = frame.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return frame
    pad = [(0, h % 2), (0, w % 2)] + [(0, 0)] * (frame.ndim - 2)
    return np.pad(frame, pad, mode="edge")


def write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    """``frames`` as a video (the format by ``path``'s suffix), atomically: a failed encoder
    leaves an existing file as it was, as a one-line :class:`GameError`."""
    if not frames:
        raise GameError("no frame was rendered, so no video was written")
    import imageio.v2 as imageio

    even = path.suffix.lower() in (".mp4", ".mkv", ".mov", ".avi", ".webm")

    if len({frame.shape for frame in frames}) > 1:  # checked before an encoder starts
        raise GameError(f"writing video {path} failed: its frames differ in size "
                        f"({sorted({frame.shape for frame in frames})[:3]})")

    def write(tmp: Path) -> None:
        shown = [even_frame(f) for f in frames] if even else list(frames)
        try:
            with warnings.catch_warnings():  # ffmpeg is forked and execs at once: JAX's
                # "os.fork() ... will likely lead to a deadlock" does not apply
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                        category=RuntimeWarning)
                imageio.mimwrite(str(tmp), shown, fps=fps,  # type: ignore[arg-type]
                                 macro_block_size=1)
        except (OSError, RuntimeError, ValueError) as exc:
            raise GameError(f"writing video {path} failed: "
                            f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}"
                            ) from exc
        if tmp.stat().st_size == 0:
            raise GameError(f"writing video {path} failed: the encoder wrote nothing")

    atomic_write_path(path, write)


def envs_for_every_map(family: Family, game: str, staged: Callable[[int], dict[str, Any]],
                       envs: int, episodes: int) -> int:
    """``envs``, raised (up to ``episodes``) until the training's maps are all played from
    both sides (:meth:`Family.check_run` of the options ``staged(n)`` gives ``n`` envs): 8
    envs played 4 of a 5-map checkpoint's maps."""
    for n in range(envs, max(envs, episodes) + 1):
        try:
            family.check_run(game, staged(n), n, draws_bots=True)  # its warnings: training's
        except GameError:
            continue
        return n
    return envs


def evaluate(checkpoint: str | Path, episodes: int = 10, video: Path | None = None,
             deterministic: bool = False, seed: int | None = None,
             num_envs: int | None = None, map_name: str | None = None,
             max_steps: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Mean/std return of a checkpoint's policy over ``episodes`` episodes (a run directory,
    or its ``checkpoints/`` folder, means its newest checkpoint), on its training's game or
    on ``map_name`` (games with maps); ``max_steps`` cuts each episode after that many agent
    steps (a :class:`GameError` for a game without a length to set); ``progress(finished,
    episodes)`` is called as episodes finish."""
    checkpoint = resolve_checkpoint(checkpoint)
    state = load_checkpoint(checkpoint)
    config = trained_config(state, checkpoint)[0]
    family = family_of(config.game.name)
    envs = num_envs or (1 if video is not None else min(episodes, 8))
    eval_seed = seed if seed is not None else config.seed + 10_000

    def staged(n: int) -> dict[str, Any]:
        """The game options of ``n`` envs: the policy plays every seat of every env."""
        options = dict(config.game.options)
        if family.two_player:
            options.update(family.match_setup(config.game.name, None, n, eval_seed,
                                              map_name).options)
        elif map_name is not None:
            options.update(family.map_options(config.game.name, map_name))
        if max_steps is not None:
            options = family.with_game_length(config.game.name, options, max_steps)
        return options

    if num_envs is None and video is None:  # every map it trained on, from both sides
        envs = envs_for_every_map(family, config.game.name, staged, envs, episodes)
    options = staged(envs)
    if video is not None:
        options["render"] = True
        # frames are drawn off screen: SDL (pygame's, in gymnasium's classic control) needs
        # no display, and a headless machine's "XDG_RUNTIME_DIR is invalid" line is not ours
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    game = make_game(config.game.name, num_envs=envs, seed=eval_seed, options=options)
    try:
        _, agent, _ = load_agent(checkpoint, game.spec, state)
        policy = FrozenPolicy(agent, deterministic=deterministic,
                              generator=torch.Generator().manual_seed(eval_seed))
        returns = run_episodes(game, policy, episodes, eval_seed, video, progress=progress)
        played = min(episodes, envs)  # the envs that played an episode
        maps = (list(dict.fromkeys(m.name for m in game.env_map[:played]))
                if isinstance(game, HasMaps) else None)
    finally:
        game.close()
    arr = np.asarray(returns, dtype=np.float64)
    return {"checkpoint": str(checkpoint), "game": config.game.name, "episodes": len(returns),
            "against_itself": family.two_player,  # seat 0's returns, the policy on both seats
            "mean_return": float(arr.mean()) if len(arr) else float("nan"),
            "std_return": float(arr.std()) if len(arr) else float("nan"),
            "returns": [float(r) for r in returns],
            "video": str(video) if video is not None else None,
            **({"maps": maps, "trained_on": state.get("boards")} if maps is not None else {})}
