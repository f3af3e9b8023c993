"""Matches of a checkpoint against a bot or another checkpoint (``selfplay play``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from games.contract import EpisodeWatch
from games.core import (
    Box,
    GameError,
    HasMaps,
    HasSides,
    Outcome,
    Policy,
    SupportsRecording,
    SupportsRender,
    VecGame,
)
from games.registry import family_of, make_game
from selfplay.checkpoint import (
    CheckpointError,
    load_checkpoint,
    looks_like_path,
    resolve_checkpoint,
)
from selfplay.evaluate import add_final_frame, load_agent, trained_config, write_video
from selfplay.policy import FrozenPolicy


def wilson_interval(successes: float, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion (``successes`` may count draws as
    halves)."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def play(checkpoint: str | Path, vs: str, games: int = 100, map_name: str | None = None,
         video: Path | None = None, seed: int = 0, num_envs: int | None = None,
         deterministic: bool = False, temperature: float = 1.0,
         progress: Callable[[int, int], None] | None = None,
         record: Path | None = None, shard_games: int = 100,
         options: Mapping[str, Any] | None = None,
         max_steps: int | None = None) -> dict[str, Any]:
    """Play ``games`` games of ``checkpoint`` against ``vs`` (a bot name or a checkpoint path);
    ``progress(finished, games)`` is called as games finish. A run directory (or its
    ``checkpoints/`` folder), as either, means its newest checkpoint. ``options`` replace game
    options of the checkpoint's config and of the match; ``max_steps`` cuts each game after
    that many agent steps, scored as the game scores a game cut short (a :class:`GameError`
    for a game without a length to set).
    ``temperature``: sampled actions from the policy sharpened (< 1) or flattened (> 1), for
    both checkpoints (:class:`~selfplay.policy.FrozenPolicy`).

    Sides alternate between envs: by the game's own convention where it has one (microRTS:
    seat 0 is player 0 in even envs and player 1 in odd ones), otherwise the two players swap
    seats in odd envs (PettingZoo Atari, board games). Each env plays a fixed quota of games,
    so short games are not over-counted. Returns wins / losses / draws of ``checkpoint`` with
    a 95 % interval, the same counts per side (``sides[k]``: the games it played as side
    ``k``, the engine player where the game has players, else the seat) and the maps that
    were played (``maps``; ``map`` when there was one).

    With ``record`` the games counted are also recorded into that replay folder (appending
    shards of ``shard_games``; ``record`` in the result says what was written), staged by the
    family as games that replay exactly (:meth:`~games.family.Family.recording_game`: against
    a bot inside the engine, the bot thinks for its seat); a family that cannot record them
    is a :class:`GameError` before any game.
    """
    if games < 1:
        raise ValueError("games must be >= 1")
    checkpoint = resolve_checkpoint(checkpoint)
    state = load_checkpoint(checkpoint)
    config = trained_config(state, checkpoint)[0]
    family = family_of(config.game.name)
    opponent_path = _opponent_checkpoint(vs, family.bot_names(config.game.name))
    envs = num_envs or min(games, 16)
    setup = family.match_setup(config.game.name, None if opponent_path else vs, envs, seed,
                               map_name)
    options = {**config.game.options, **setup.options, **(options or {})}
    if max_steps is not None:
        options = family.with_game_length(config.game.name, options, max_steps)
    if record is None:
        game = make_game(config.game.name, num_envs=envs, seed=seed, options=options)
    else:  # a bot playing inside the engine thinks for its seat instead
        engine_bot = None if opponent_path or setup.scripted else setup.opponent_name or vs
        game = family.recording_game(config.game.name, options, envs, seed, engine_bot)
    recorded: Mapping[str, Any] | None = None
    try:
        spec = game.spec
        if not spec.decided:
            raise GameError(f"{spec.name}'s games have no winner (cooperative or mixed): "
                            "there are no wins and losses to count")
        _, agent, _ = load_agent(checkpoint, spec, state)
        generator = torch.Generator().manual_seed(seed)
        policies: list[Policy] = [FrozenPolicy(agent, deterministic, generator,
                                                   temperature)]
        opponent_name = setup.opponent_name
        if opponent_path is not None:
            other_state = load_checkpoint(opponent_path)
            other_config = trained_config(other_state, opponent_path)[0]
            other_game = other_config.game.name
            if other_game != config.game.name:
                raise CheckpointError(f"{opponent_path} plays {other_game}, not "
                                      f"{config.game.name}")
            differ = family.observation_difference(config.game.options,
                                                   other_config.game.options)
            if differ is not None:  # the game shows one view to both
                key, mine, theirs = differ
                raise CheckpointError(
                    f"{checkpoint} was trained with game.options.{key}={mine!r} and --vs "
                    f"{opponent_path} with {theirs!r}: one game cannot show both their "
                    "observations; play checkpoints trained alike")
            _, other, _ = load_agent(opponent_path, spec, other_state)
            policies.append(FrozenPolicy(other, deterministic, generator, temperature))
            opponent_name = str(opponent_path)
        elif setup.scripted is not None:
            policies.append(setup.scripted)
        elif spec.num_seats == 2:  # the opponent plays inside the engine: seat 1 never acts
            policies.append(_IdleSeat(spec.action_space.action_shape))
        if len(policies) != spec.num_seats:
            raise RuntimeError(f"{spec.name} has {spec.num_seats} seats for "
                               f"{len(policies)} players")
        names = None
        if record is not None:
            if not isinstance(game, SupportsRecording):
                raise GameError(f"{spec.name} cannot record its games as replays; drop --record")
            names = (player_name(checkpoint),
                     player_name(opponent_path) if opponent_path else opponent_name or vs)
            game.start_recording(record, None, shard_games)
        outcomes, sides, maps, returns = _run(game, policies, games, seed, video, progress,
                                              names)
        if isinstance(game, SupportsRecording) and names is not None:
            recorded = game.finish_recording()
    finally:
        game.close()
    counts = _counts(outcomes)
    low, high = wilson_interval(counts["wins"], len(outcomes))
    return {"checkpoint": str(checkpoint), "opponent": opponent_name or vs,
            "game": config.game.name, "map": maps[0] if len(maps) == 1 else None,
            "maps": maps, "trained_on": state.get("boards"), **counts,
            "win_rate": counts["wins"] / len(outcomes), "ci95": [low, high],
            "return_mean": float(returns.mean()),
            "sides": [{**_counts(outcomes[sides == k]),
                       "return_mean": float(returns[sides == k].mean()) if (sides == k).any()
                       else None} for k in range(int(sides.max()) + 1)],
            "video": str(video) if video is not None else None,
            **({"record": dict(recorded)} if recorded is not None else {})}


def player_name(checkpoint: Path) -> str:
    """A checkpoint's name in recorded games: ``run/update_N`` for a run's checkpoint, else
    the file's stem."""
    if checkpoint.parent.name == "checkpoints":
        return f"{checkpoint.parent.parent.name}/{checkpoint.stem}"
    return checkpoint.stem


def _counts(outcomes: np.ndarray) -> dict[str, int]:
    """Games, wins, losses and draws in ``outcomes`` (``int8 [G]``; anything but a win or a
    loss counts as a draw)."""
    wins = int((outcomes == Outcome.WIN).sum())
    losses = int((outcomes == Outcome.LOSS).sum())
    return {"games": len(outcomes), "wins": wins, "losses": losses,
            "draws": len(outcomes) - wins - losses}


def _opponent_checkpoint(vs: str, bots: list[str]) -> Path | None:
    """``--vs`` as a checkpoint file (a run directory means its newest checkpoint); None for
    a bot name (one of ``bots``, the game's)."""
    if not looks_like_path(vs):
        # a bare name: a run folder of that name when it holds checkpoints, else a bot name
        # (a folder ``CoacAI/`` beside the user's runs must not hide the bot)
        if not Path(vs).exists():
            return None
        is_bot = vs.lower() in {bot.lower() for bot in bots}
        try:
            path = resolve_checkpoint(vs)
            if is_bot:  # a file of the bot's name that is no checkpoint must not hide it
                load_checkpoint(path)
            return path
        except CheckpointError as exc:
            if is_bot:
                return None
            raise CheckpointError(f"--vs: {exc}") from exc
    try:
        return resolve_checkpoint(vs)
    except CheckpointError as exc:
        raise CheckpointError(f"--vs: {exc}") from exc


class _IdleSeat:
    """The policy of a seat that never acts (its opponent is the engine's own player)."""

    def __init__(self, action_shape: tuple[int, ...]) -> None:
        self.action_shape = action_shape

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        return np.zeros((len(obs), *self.action_shape), np.int64)


def _checkpoint_seats(game: VecGame, policies: list[Policy]) -> np.ndarray:
    """``int [E]``: the seat the checkpoint (policy 0) plays in each env. Games that alternate
    sides themselves (microRTS: seat 0 is engine player ``e % 2``) keep seat 0; in the others
    (PettingZoo Atari, board games) the two players swap seats in odd envs."""
    e = game.spec.num_envs
    alternates = isinstance(game, HasSides) and len(np.unique(game.players[:, 0])) > 1
    both_act = len(policies) == 2 and not isinstance(policies[1], _IdleSeat)
    if alternates or not both_act:
        return np.zeros(e, np.int64)
    return np.arange(e) % 2


def _run(game: VecGame, policies: list[Policy], games: int, seed: int, video: Path | None,
         progress: Callable[[int, int], None] | None = None,
         names: tuple[str, str] | None = None
         ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Outcomes of the checkpoint (policy 0) over ``games`` games (``int8 [G]``), a fixed
    quota per env, with sides alternating between envs; the side it played in each (``int
    [G]``: the engine player where the game has ``players``, else the seat); the names of the
    maps of the envs that played (for games with ``env_map``); its episode returns (``float64
    [G]``, as the game's adapter counts them: a score where the reward is one, Pong's points
    for minus against, tic-tac-toe's +-1; the weighted shaped rewards of the game's
    ``reward_weights`` in microRTS and Lux, so comparable only between runs with the same
    weights). With ``names`` (the checkpoint's and its opponent's) a recording game records
    the games counted."""
    spec = game.spec
    e = spec.num_envs
    envs = np.arange(e)
    seat_of = [_checkpoint_seats(game, policies)]  # [policy] -> int [E]
    if len(policies) == 2:
        seat_of.append(1 - seat_of[0])
    side_of = (game.players[envs, seat_of[0]] if isinstance(game, HasSides)
               else seat_of[0])  # [E]
    quota = np.full(e, games // e) + (np.arange(e) < games % e)
    maps = ([] if not isinstance(game, HasMaps) else
            list(dict.fromkeys(m.name for m, q in zip(game.env_map, quota, strict=True) if q)))
    sides: list[int] = []
    played = np.zeros(e, np.int64)
    outcomes: list[int] = []
    returns: list[float] = []
    frames: list[np.ndarray] = []
    if video is not None and not isinstance(game, SupportsRender):
        raise GameError(f"{spec.name} cannot render frames; drop --video")
    recording = video is not None
    watch = EpisodeWatch(spec)
    batch = watch.reset(game.reset(seed=seed))
    recorder = game if names is not None and isinstance(game, SupportsRecording) else None
    if recorder is not None and names is not None:
        for env in range(e):  # the seats' players, in the envs with games to count
            recorder.name_seats(env, None if not quota[env] else
                                names if seat_of[0][env] == 0 else names[::-1])
    dtype = np.float32 if isinstance(spec.action_space, Box) else np.int64
    actions = np.zeros((e, spec.num_seats, *spec.action_space.action_shape), dtype)
    while (played < quota).any():
        if recording and isinstance(game, SupportsRender):
            frames.append(game.render(0))
        for policy, seat in zip(policies, seat_of, strict=True):
            mask = batch.action_mask[envs, seat] if batch.action_mask is not None else None
            state = batch.state[envs, seat] if batch.state is not None else None
            actions[envs, seat] = policy.act(batch.obs[envs, seat], mask, state)
        batch = game.step(actions)
        watch.step(batch)
        ep = batch.episodes
        for env, seat, outcome, ret in zip(ep.env.tolist(), ep.seat.tolist(),
                                           ep.outcome.tolist(), ep.ret.tolist(), strict=True):
            if seat != seat_of[0][env]:
                continue
            if env == 0 and recording:
                recording = False
                add_final_frame(game, frames)
            if played[env] < quota[env]:
                played[env] += 1
                if played[env] == quota[env] and recorder is not None:
                    recorder.name_seats(env, None)  # its next games are not counted
                outcomes.append(outcome)
                returns.append(float(ret))
                sides.append(int(side_of[env]))
                if progress is not None:
                    progress(len(outcomes), games)
    if video is not None:
        write_video(video, frames, spec.render_fps)
    return (np.asarray(outcomes, np.int8), np.asarray(sides, np.int64), maps,
            np.asarray(returns, np.float64))
