"""Kaggle episode replays of Lux AI Season 2 converted into selfplay replay folders, and read
back as our layout's training steps.

**Representation.** A converted game is what rebuilds it exactly in the official engine
(``luxai_s2``, the one Kaggle ran): per game, in the shard's ``meta`` (:mod:`games.replays`),
the seed and the file's full ``env_cfg``, the team names, episode id, length, rewards, statuses,
winner and outcome, the source file's name and sha256, the label counts
(:data:`~games.lux.kaggle_labels.COUNTS`) and a hash of the engine's final observation; in the
arrays, ``actions`` (``uint8``: per game the UTF-8 JSON of its steps' ``[player_0's action,
player_1's]``, bid and placements included) and ``offsets`` (``int64 [games + 1]``, each game's
byte range). Observations, masks and labels are computed while reading, by replaying the
actions. Measured (heuristic bots, 300 main-phase steps, one game): the Kaggle file 2.5 MB, the
shard 6 kB (actions 80 kB as JSON, 4.4 kB deflated; metadata 1 kB); the planes alone would be
~83 kB per seat and step (50 MB per such game before compression). Reading replays ~130 steps/s
on one loaded CPU core (the engine's step, Jux's copy of the game stepped along, planes and
masks; :class:`~games.lux.kaggle_labels.StepEncoder`), after ~10 s of compilation per process.

**Conversion** (:func:`convert_kaggle`) replays every file through the engine and refuses one
that does not replay: the seed and ``env_cfg`` must rebuild the file's step-0 board (maps of a
seed differ between engine versions), every step's rewards must be the file's, the game must end
at the file's last step, and the final state must equal the file's (step 0's board with every
change observation applied, the last units, factories and teams: :mod:`games.lux.parity`'s
views). Each problem is one line naming the file (:class:`~games.lux.kaggle.KaggleError`).
Reading (:func:`iter_lux_replay_steps`) checks that each game ends in its recorded state.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from games.files import outermost_new_folder
from games.lux import engine
from games.lux.kaggle import BOARD_KEYS, PLAYERS, KaggleEpisode, KaggleError, read_kaggle_episode
from games.lux.kaggle_labels import COUNTS, StepEncoder
from games.lux.kaggle_play import quiet_step, to_json
from games.replays import (
    WRITER_LOCK,
    ReplayError,
    Shard,
    ShardAppender,
    encode_shard,
    iter_shards,
    read_manifest,
    shard_files,
)

GAME = "lux"
SOURCE = "kaggle"
ENGINE = {"luxai_s2": engine.LUXAI_S2_VERSION, "juxai_s2": engine.JUX_VERSION,
          "source": SOURCE}


class LuxStep(NamedTuple):
    """One main-phase step of a replayed game, both seats."""

    obs: np.ndarray
    """``uint8 [2, C, S, S]``"""
    mask: np.ndarray
    """``bool [2, S * S, 33]``"""
    labels: np.ndarray
    """``int16 [2, S * S, 6]``"""
    outcome: np.ndarray
    """``float32 [2]``: the game's +1 / -1 / 0 per seat"""


# ------------------------------------------------------------------------------ the engine


def rules_for(env_cfg: dict[str, Any], source: str) -> engine.Rules:
    """Our rule set of the board size and factory counts of ``env_cfg``."""
    for rules in engine.RULES.values():
        if (env_cfg.get("map_size"), env_cfg.get("MIN_FACTORIES"), env_cfg.get("MAX_FACTORIES")
                ) == (rules.map_size, rules.min_factories, rules.max_factories):
            return rules
    raise KaggleError(f"{source}: no selfplay Lux rules for a {env_cfg.get('map_size')} board "
                      f"with {env_cfg.get('MIN_FACTORIES')}-{env_cfg.get('MAX_FACTORIES')} "
                      f"factories per team; known: {engine.known_rules()}")


def official_env(env_cfg: dict[str, Any], source: str) -> Any:
    """The official engine configured by the file's ``env_cfg`` (as Kaggle's interpreter
    makes it, quiet)."""
    engine.load_jux()
    from luxai_s2 import LuxAI_S2
    from luxai_s2.config import UnitConfig

    kwargs = copy.deepcopy(env_cfg)
    kwargs["verbose"] = 0
    kwargs["validate_action_space"] = True
    try:
        kwargs["ROBOTS"] = {k: UnitConfig(**v) for k, v in kwargs["ROBOTS"].items()}
        return LuxAI_S2(**kwargs)
    except TypeError as exc:
        raise KaggleError(f"{source}: env_cfg does not fit luxai_s2 "
                          f"{engine.LUXAI_S2_VERSION} ({exc})") from None


def check_initial_board(env: Any, initial: dict[str, Any], seed: int, source: str) -> None:
    """The freshly reset ``env`` has the file's step-0 board (else another engine made it)."""
    board = env.state.get_obs()["board"]
    differ = [k for k in BOARD_KEYS
              if not np.array_equal(np.asarray(board[k]), np.asarray(initial["board"][k]))]
    if differ:
        raise KaggleError(f"{source}: seed {seed} makes another board in luxai_s2 "
                          f"{engine.LUXAI_S2_VERSION} than the replay's ({', '.join(differ)} "
                          "differ): played on another engine version?")


def state_hash(env: Any) -> str:
    """A hash of the engine's full observation (a replayed game must end on it)."""
    text = json.dumps(to_json(env.state.get_obs()), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass
class Replay:
    """A game replayed in the official engine from its seed, ``env_cfg`` and actions."""

    env_cfg: dict[str, Any]
    seed: int
    source: str
    env: Any = None
    rewards: list[list[float]] = field(default_factory=list)
    """each step's rewards"""
    done_at: int | None = None
    """the step after which the engine ended the game"""

    def __post_init__(self) -> None:
        self.env = official_env(self.env_cfg, self.source)
        self.env.reset(seed=self.seed)

    def steps(self, actions: list[list[Any]]) -> Iterator[tuple[int, list[Any]]]:
        """Yield ``(t, [action_0, action_1])`` before playing each step ``t`` (1-based);
        stops when the engine ends the game."""
        for t, pair in enumerate(actions, start=1):
            yield t, pair
            _, rewards, terminated, truncated, _ = quiet_step(self.env, pair)
            self.rewards.append([float(rewards[p]) for p in PLAYERS])
            if all(terminated[p] or truncated[p] for p in PLAYERS):
                self.done_at = t
                return

    @property
    def main_phase(self) -> bool:
        return bool(self.env.state.real_env_steps >= 0)


# ------------------------------------------------------------------------------ conversion


@dataclass
class ConvertedGame:
    """One game ready for a shard: its metadata and its actions as JSON bytes."""

    meta: dict[str, Any]
    actions: bytes


SHARD_ARRAYS = ("actions", "offsets")
"""the arrays of a converted Lux shard (see :func:`encode_games`)"""


def encode_games(games: list[ConvertedGame]) -> bytes:
    """The bytes of a shard holding ``games`` (see the module docstring)."""
    blobs = [g.actions for g in games]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)
    actions = np.frombuffer(b"".join(blobs), np.uint8)
    return encode_shard(GAME, ENGINE, [g.meta for g in games],
                        {"actions": actions, "offsets": offsets})


def verify_replay(episode: KaggleEpisode, replay: Replay) -> None:
    """The replay followed the file: same rewards each step, the end at its last step, the
    same final state (else a one-line :class:`KaggleError`)."""
    from games.lux.parity import differences, official_view

    source = episode.path
    for t, (ours, theirs) in enumerate(zip(replay.rewards, episode.step_rewards, strict=False),
                                       start=1):
        if any(r is not None and float(r) != o for o, r in zip(ours, theirs, strict=True)):
            raise KaggleError(f"{source}: the replay diverges at step {t} (rewards {ours} in "
                              f"the engine, {theirs} in the file)")
    if replay.done_at != episode.steps:
        where = "does not end" if replay.done_at is None else f"ends at step {replay.done_at}"
        raise KaggleError(f"{source}: the game {where} in the engine; the file has "
                          f"{episode.steps} steps")
    placing = not replay.main_phase
    diff = differences(official_view(episode.final_obs(), placing),
                       official_view(replay.env.state.get_obs(), placing))
    if diff:
        raise KaggleError(f"{source}: the replayed final state differs from the file's "
                          f"({', '.join(diff)})")


def convert_episode(episode: KaggleEpisode, check_labels: bool = True) -> ConvertedGame:
    """Replay ``episode`` through the engine (see the module docstring) and make its shard
    entry; with ``check_labels`` every main-phase step is also encoded to count its labels."""
    rules = rules_for(episode.env_cfg, episode.path)
    replay = Replay(episode.env_cfg, episode.seed, episode.path)
    check_initial_board(replay.env, episode.initial_obs(), episode.seed, episode.path)
    encoder = StepEncoder(rules, episode.path)
    for _, pair in replay.steps(episode.actions):
        if check_labels and replay.main_phase:
            encoder.encode(replay.env, pair)
    verify_replay(episode, replay)
    meta = {
        "format": SOURCE, "game": GAME, "rules": rules.name, "seed": episode.seed,
        "env_cfg": episode.env_cfg, "team_names": list(episode.team_names),
        "episode_id": episode.episode_id, "kaggle_steps": episode.steps,
        "length": int(replay.env.state.real_env_steps), "rewards": list(episode.rewards),
        "statuses": list(episode.statuses), "winner": episode.winner,
        "outcome": list(episode.outcome), "source": episode.source, "sha256": episode.sha256,
        "final_hash": state_hash(replay.env),
        "labels": encoder.totals() if check_labels else None,
    }
    return ConvertedGame(meta, json.dumps(episode.actions, separators=(",", ":")).encode())


class KaggleReplayWriter(ShardAppender[ConvertedGame]):
    """Converted games appended to ``folder`` in shards of ``shard_games``; a folder holding
    another game's replays is refused, games already in it (by sha256 or episode id) are
    skipped."""

    def __init__(self, folder: Path, shard_games: int = 100) -> None:
        self.known: set[str] = set()
        """the sha256 of every episode the folder holds"""
        self.known_ids: set[str] = set()
        """their Kaggle episode ids (the same episode saved again, reformatted or wrapped,
        has another sha256)"""
        super().__init__(folder, shard_games, encode_games)

    def check_folder(self, shards: list[Shard]) -> None:
        """The folder's shards must hold converted Kaggle episodes (whose hashes are kept)."""
        for shard in shards:
            engine = shard.meta.get("engine")
            if (shard.meta.get("game") != GAME or not isinstance(engine, dict)
                    or engine.get("source") != SOURCE):
                raise ReplayError(f"{shard.path.parent} holds replays of another kind "
                                  f"({shard.path.name}); convert into another folder")
            games = [g for g in shard.games if isinstance(g, dict)]
            self.known.update(str(g.get("sha256")) for g in games)
            self.known_ids.update(str(g["episode_id"]) for g in games if g.get("episode_id"))

    def holds(self, episode: KaggleEpisode) -> bool:
        """Whether the folder holds ``episode`` already (its file's hash or its episode id)."""
        return episode.sha256 in self.known or (bool(episode.episode_id)
                                                and episode.episode_id in self.known_ids)

    def remember(self, episode: KaggleEpisode) -> None:
        self.known.add(episode.sha256)
        if episode.episode_id:
            self.known_ids.add(episode.episode_id)


def _remove_if_empty(made: Path | None, out_dir: Path) -> None:
    """Remove the folders an import made (``made``, the outermost) when ``out_dir`` holds
    nothing but the writer's lock."""
    if made is not None and not any(p.name != WRITER_LOCK for p in out_dir.iterdir()):
        shutil.rmtree(made, ignore_errors=True)


def convert_kaggle(paths: Iterable[Path | str], out_dir: Path | str, shard_games: int = 100,
                   check_labels: bool = True, skip_bad: bool = False) -> dict[str, Any]:
    """Convert Kaggle replays into the replay folder ``out_dir``; a summary: ``folder``,
    ``games``, ``shards``, ``steps`` (main phase), ``labels`` (the counters summed per seat),
    ``duplicates``, ``skipped`` (one line per bad file; with ``skip_bad`` only, else the first
    bad file raises) and ``seconds``."""
    started = time.perf_counter()
    made = outermost_new_folder(Path(out_dir))  # removed again if the import writes nothing
    writer = KaggleReplayWriter(Path(out_dir), shard_games)
    totals = {name: [0, 0] for name in COUNTS}
    skipped: list[str] = []
    duplicates = 0
    try:
        for path in paths:
            try:
                episode = read_kaggle_episode(path)
                if writer.holds(episode):
                    duplicates += 1
                    continue
                game = convert_episode(episode, check_labels)
            except (KaggleError, ValueError, OverflowError, TypeError) as exc:  # engine: too
                if isinstance(exc, KaggleError):
                    error = exc
                else:
                    error = KaggleError(f"{path}: the official engine refused it: "
                                        f"{str(exc).strip() or type(exc).__name__}")
                if not skip_bad:
                    raise error from exc
                skipped.append(str(error))
                print(f"warning: {error}; skipped", file=sys.stderr)
                continue
            if game.meta["length"] <= 0:
                print(f"warning: {path}: the game ended before its main phase (bidding or "
                      "factory placement): no step to learn from", file=sys.stderr)
            writer.remember(episode)
            writer.add(game)
            for name, value in (game.meta["labels"] or {}).items():
                totals[name] = [a + b for a, b in zip(totals[name], value, strict=True)]
    except BaseException:  # a bad file, a signal, a crash: the games converted are written
        writer.close()
        _remove_if_empty(made, Path(out_dir))
        raise
    summary = writer.close()
    _remove_if_empty(made, Path(out_dir))  # every file skipped: no folder left behind
    summary.update(steps=totals["steps"][0], labels=totals, duplicates=duplicates,
                   skipped=skipped, seconds=round(time.perf_counter() - started, 2))
    return summary


# ------------------------------------------------------------------------------ reading


def game_actions(arrays: dict[str, np.ndarray], index: int) -> list[list[Any]]:
    """Game ``index``'s actions from a shard's arrays."""
    start, end = (int(v) for v in arrays["offsets"][index:index + 2])
    actions: list[list[Any]] = json.loads(arrays["actions"][start:end].tobytes())
    return actions


def replay_game(meta: dict[str, Any], actions: list[list[Any]], label: str
                ) -> Iterator[LuxStep]:
    """The main-phase steps of one converted game; after the last, the engine's final state
    must be the recorded one (else :class:`~games.replays.ReplayError`)."""
    rules = engine.rules_named(str(meta["rules"]))
    replay = Replay(meta["env_cfg"], int(meta["seed"]), label)
    encoder = StepEncoder(rules, label)
    outcome = np.asarray(meta["outcome"], np.float32)
    for _, pair in replay.steps(actions):
        if replay.main_phase:
            yield LuxStep(*encoder.encode(replay.env, pair), outcome)
    if state_hash(replay.env) != meta["final_hash"]:
        raise ReplayError(f"{label}: the replay ends in another state than recorded (another "
                          f"luxai_s2 than {engine.LUXAI_S2_VERSION}?)")


def iter_lux_replay_steps(folder: Path | str) -> Iterator[LuxStep]:
    """Every main-phase step of every game in the replay folder, replayed (see the module
    docstring); corrupt shards are skipped with a warning."""
    folder = Path(folder)
    for shard in iter_shards(shard_files(folder), read_manifest(folder)):
        if shard.meta.get("game") != GAME or shard.meta.get("engine", {}).get(
                "source") != SOURCE:
            raise ReplayError(f"{shard.path} holds no converted Lux replays")
        for index, meta in enumerate(shard.games):
            label = f"{shard.path.name} game {index} ({meta.get('source')})"
            yield from replay_game(meta, game_actions(shard.arrays, index), label)
