"""Kaggle episode replays of Lux AI Season 2: the JSON ``kaggle-environments`` writes, read and
validated, and the pieces to write it (:mod:`games.lux.kaggle_play` plays games into it).

The file is ``kaggle_environments.core.Environment.toJSON()`` of the ``lux_ai_s2`` environment
(its interpreter: ``kaggle_environments/envs/lux_ai_s2/lux_ai_s2.py``), written with
``json.dumps(..., sort_keys=True)``:

- ``id``, ``name`` (``"lux_ai_s2"``), ``title``, ``description``, ``version``,
  ``specification`` (the environment's schema), ``schema_version`` (1), ``info`` (Kaggle's:
  ``EpisodeId``, ``TeamNames``...);
- ``configuration``: ``episodeSteps``, ``max_episode_length``, ``seed``, ``actTimeout``,
  ``runTimeout`` and ``env_cfg``, the full ``dataclasses.asdict`` of the engine's ``EnvConfig``
  (set by the interpreter at reset: the game is rebuilt from it and the seed);
- ``steps``: one ``[agent0, agent1]`` per environment step, step 0 the reset. An agent is
  ``{action, reward, info, status, observation}``; ``steps[t][i].action`` is what player ``i``
  played to reach step ``t`` (``{}`` at step 0, ``None`` when the agent had failed: status
  ``ERROR``, ``TIMEOUT`` or ``INVALID``). ``observation`` holds ``player``, ``reward`` and
  ``remainingOverageTime``, agent 0's also the shared ``obs``, ``width``, ``height`` and
  ``step``, and at the last step both agents' ``stats``. ``obs`` is a JSON string: at step 0
  the full observation (``units, teams, factories, board{rubble, ore, ice, lichen,
  lichen_strains, valid_spawns_mask, factories_per_team}, real_env_steps, global_id``), after
  it the engine's ``get_change_obs`` against the previous step: ``rubble``, ``lichen`` and
  ``lichen_strains`` as ``{"x,y": value}`` changes, ``ore`` and ``ice`` left out,
  ``valid_spawns_mask`` left out once the main phase has begun;
- ``rewards`` and ``statuses``: the last step's (a failed agent's reward is ``None``).

Actions: step 1 the bids ``{"faction", "bid"}``; then ``2 * factories_per_team`` placement
steps (``{"spawn": [x, y], "metal", "water"}`` from the player whose turn it is, ``{}`` from the
other); then the main phase, ``{unit_id: [[type, direction, resource, amount, repeat, n],
...], factory_id: 0 | 1 | 2}`` (a unit's new action queue; a factory's light, heavy or
water), only the units and factories given new orders.

:func:`read_kaggle_episode` parses and checks such a file; every problem is one
:class:`KaggleError` line naming the file. Replaying it through the engine is
:mod:`games.lux.kaggle_replay`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.replays import ReplayError

NAME = "lux_ai_s2"
SCHEMA_VERSION = 1
PLAYERS = ("player_0", "player_1")
FAILED = ("ERROR", "TIMEOUT", "INVALID")
"""statuses of an agent that failed (its action is ``None``, its reward ``None``)"""
BOARD_KEYS = ("rubble", "ore", "ice", "lichen", "lichen_strains", "valid_spawns_mask",
              "factories_per_team")
DELTA_KEYS = ("rubble", "lichen", "lichen_strains")
"""board planes the change observations give as ``{"x,y": value}``"""
SPECIFICATION: dict[str, Any] = {
    "name": NAME, "title": "Lux AI Challenge Season 2",
    "description": "A Novel AI Programming Challenge about Lux", "version": "2.1.0",
    "agents": [2],
    "configuration": {
        "episodeSteps": {"description": "Maximum number of steps the environment can run.",
                         "type": "integer", "minimum": 2, "default": 1020},
        "max_episode_length": {"description": "Max game steps the environment can run, not "
                               "including the early phase of the game.", "minimum": 2,
                               "type": "integer", "default": 1000},
        "seed": {"description": "Seed to use for episodes", "type": "integer"},
        "actTimeout": 3, "runTimeout": 9600, "env_cfg": {"type": "object"}},
    "reward": {"description": "Reward of the agent. Equal to amount of lichen grown.",
               "type": "integer", "default": 0},
    "observation": {
        "remainingOverageTime": 60,
        "width": {"description": "The width of the map", "type": "integer", "shared": True,
                  "default": 48},
        "height": {"description": "The height of the map", "type": "integer", "shared": True,
                   "default": 48},
        "reward": {"description": "Current reward of the agent.", "type": "integer",
                   "default": 0},
        "obs": {"description": "String containing the observations", "type": "string",
                "shared": True},
        "player": {"description": "Current player's index / team id", "type": "string",
                   "defaults": "player_0"},
        "stats": {"description": "Aggregate statistics for an episode", "type": "object"}},
    "action": {"description": "Actions", "type": "object"},
    "info": {},
}
"""the ``lux_ai_s2`` environment's specification (``lux_ai_s2.json``), as files carry it"""


class KaggleError(ReplayError):
    """A Kaggle replay that cannot be used: corrupt, not Lux AI Season 2, or not the format
    this module reads (one line naming the file)."""


def to_json(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars as plain Python (the interpreter's
    ``to_json``)."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class KaggleEpisode:
    """A parsed Kaggle replay (:func:`read_kaggle_episode`)."""

    source: str
    """the file's name"""
    path: str
    """the file as given (errors name it)"""
    sha256: str
    episode_id: str
    seed: int
    env_cfg: dict[str, Any]
    """the engine's ``EnvConfig`` as the file gives it (``dataclasses.asdict``)"""
    team_names: tuple[str, str]
    actions: list[list[Any]]
    """per step ``t >= 1``: ``[player_0's action, player_1's]`` (``None`` for a failed
    agent)"""
    step_rewards: list[list[float | None]]
    """per step ``t >= 1``: each agent's reward after it"""
    rewards: tuple[float | None, float | None]
    statuses: tuple[str, str]
    observations: list[str]
    """agent 0's ``obs`` string per step (step 0 the full observation)"""

    @property
    def steps(self) -> int:
        """environment steps after the reset (bid and placements included)"""
        return len(self.actions)

    @property
    def factories_per_team(self) -> int:
        return int(self.initial_obs()["board"]["factories_per_team"])

    @property
    def early_steps(self) -> int:
        """the bid and placement steps"""
        return 1 + 2 * self.factories_per_team

    @property
    def winner(self) -> int | None:
        """the winning seat (more reward; a failed agent's ``None`` loses), ``None`` for a
        draw"""
        score = [-np.inf if r is None else float(r) for r in self.rewards]
        if score[0] == score[1]:
            return None
        return 0 if score[0] > score[1] else 1

    @property
    def outcome(self) -> tuple[float, float]:
        """``+1`` / ``-1`` / ``0`` per seat"""
        if self.winner is None:
            return (0.0, 0.0)
        return (1.0, -1.0) if self.winner == 0 else (-1.0, 1.0)

    def initial_obs(self) -> dict[str, Any]:
        """The full observation at step 0."""
        obs: dict[str, Any] = json.loads(self.observations[0])
        return obs

    def final_obs(self) -> dict[str, Any]:
        """The full observation after the last step: step 0's board with every step's changes,
        the last step's units, factories and teams."""
        obs = self.initial_obs()
        board = {k: np.array(obs["board"][k]) for k in BOARD_KEYS[:-1]}
        for t in range(1, len(self.observations)):
            obs = _load_obs(self, t)
            try:
                for key in DELTA_KEYS:
                    for cell, value in obs["board"][key].items():
                        x, y = (int(v) for v in cell.split(","))
                        board[key][x, y] = value
            except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
                raise KaggleError(f"{self.path}: the board changes of step {t} are not Lux "
                                  f"changes ({type(exc).__name__}: {exc})") from None
        final = dict(obs)
        final["board"] = {**board, "factories_per_team": obs["board"]["factories_per_team"]}
        if "valid_spawns_mask" in obs["board"]:  # the early phase: given in full
            final["board"]["valid_spawns_mask"] = np.array(obs["board"]["valid_spawns_mask"])
        else:
            del final["board"]["valid_spawns_mask"]
        return final


def _load_obs(episode: KaggleEpisode, t: int) -> dict[str, Any]:
    try:
        obs = json.loads(episode.observations[t])
        if not isinstance(obs.get("board"), dict):
            raise ValueError("no board")
        return dict(obs)
    except (ValueError, AttributeError) as exc:
        raise KaggleError(f"{episode.path}: the observation of step {t} is not a Lux "
                          f"observation ({exc})") from None


def read_kaggle_episode(path: Path | str) -> KaggleEpisode:
    """Parse and check the Kaggle replay at ``path``; :class:`KaggleError` (one line naming
    it) when it is unreadable, not JSON, not Lux AI Season 2, or malformed."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KaggleError(f"cannot read Kaggle replay {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:100]
        raise KaggleError(f"{path} is not JSON (truncated or corrupt?): {first}") from None
    return parse_episode(doc, str(path), hashlib.sha256(data).hexdigest())


def _fail(source: str, what: str) -> KaggleError:
    return KaggleError(f"{source}: {what}")


def parse_episode(doc: Any, source: str, sha256: str = "") -> KaggleEpisode:
    """A :class:`KaggleEpisode` from a decoded replay (``source`` names it in errors). A
    replay wrapped as ``{"environment": {...}}`` (Kaggle's HTML player) is unwrapped."""
    if isinstance(doc, dict) and "steps" not in doc and isinstance(doc.get("environment"), dict):
        doc = doc["environment"]
    if not isinstance(doc, dict):
        raise _fail(source, "not a Kaggle episode replay (the JSON is not an object)")
    for key in ("name", "schema_version", "configuration", "steps"):
        if key not in doc:
            raise _fail(source, f"not a Kaggle episode replay: no {key!r} key")
    if doc["name"] != NAME:
        raise _fail(source, f"a Kaggle replay of {doc['name']!r}, not Lux AI Season 2 "
                    f"({NAME!r})")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise _fail(source, f"Kaggle replay schema_version {doc['schema_version']!r}; "
                    f"selfplay reads version {SCHEMA_VERSION}")
    seed, env_cfg = _configuration(doc["configuration"], source)
    steps = doc["steps"]
    if not isinstance(steps, list) or len(steps) < 2:
        raise _fail(source, "'steps' must be a list of at least 2 steps (the reset and one "
                    "more)")
    for t, step in enumerate(steps):
        _check_step(step, t, source)
    observations = [step[0]["observation"].get("obs") for step in steps]
    for t, obs in enumerate(observations):
        if not isinstance(obs, str):
            raise _fail(source, f"step {t} has no observation string (agent 0's 'obs')")
    initial = _initial_obs(observations[0], source)
    fpt = int(initial["board"]["factories_per_team"])
    actions = [[agent["action"] for agent in step] for step in steps[1:]]
    for t, pair in enumerate(actions, start=1):
        for seat, action in enumerate(pair):
            problem = _action_problem(action, t, fpt, steps[t][seat]["status"])
            if problem:
                raise _fail(source, f"malformed action of {PLAYERS[seat]} at step {t}: "
                            f"{problem}")
    info: dict[str, Any] = doc["info"] if isinstance(doc.get("info"), dict) else {}
    names = info.get("TeamNames")
    team_names = (tuple(str(n) for n in names) if isinstance(names, list) and len(names) == 2
                  else PLAYERS)
    last = steps[-1]
    last_rewards = [agent["reward"] for agent in last]  # checked against the engine's
    last_statuses = [agent["status"] for agent in last]
    rewards = doc.get("rewards", last_rewards)
    statuses = doc.get("statuses", last_statuses)
    if (not isinstance(rewards, list) or len(rewards) != 2
            or not all(r is None or _number(r) for r in rewards)):
        raise _fail(source, f"'rewards' must be 2 numbers (or null), got {rewards!r:.60}")
    if not isinstance(statuses, list) or len(statuses) != 2:
        raise _fail(source, f"'statuses' must be 2 strings, got {statuses!r:.60}")
    # the winner comes from them: they must be the last step's, which the replay checks
    if rewards != last_rewards or [str(x) for x in statuses] != last_statuses:
        raise _fail(source, f"'rewards' {rewards} and 'statuses' {statuses} differ from the "
                    f"last step's ({last_rewards}, {last_statuses})")
    # no id (null, or absent): the file's hash stands for it ("None" made every such file
    # a duplicate of the first)
    given = info.get("EpisodeId")
    given = doc.get("id") if given is None else given
    episode_id = "" if given is None else str(given)
    return KaggleEpisode(
        source=Path(source).name, path=source, sha256=sha256,
        episode_id=episode_id, seed=seed, env_cfg=env_cfg,
        team_names=(team_names[0], team_names[1]), actions=actions,
        step_rewards=[[agent["reward"] for agent in step] for step in steps[1:]],
        rewards=(rewards[0], rewards[1]), statuses=(str(statuses[0]), str(statuses[1])),
        observations=observations)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _configuration(config: Any, source: str) -> tuple[int, dict[str, Any]]:
    if not isinstance(config, dict):
        raise _fail(source, "'configuration' is not an object")
    seed = config.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _fail(source, f"configuration has no integer 'seed' (got {seed!r:.40})")
    if not 0 <= seed < 2**32:  # the official engine's numpy generator takes no other
        raise _fail(source, f"configuration seed {seed} is not in 0..2**32-1")
    env_cfg = config.get("env_cfg")
    if not isinstance(env_cfg, dict) or not env_cfg:
        raise _fail(source, "configuration has no 'env_cfg' (the interpreter writes it at "
                    "reset: was the episode played?)")
    robots = env_cfg.get("ROBOTS")
    if (not _integer(env_cfg.get("map_size")) or not isinstance(robots, dict)
            or set(robots) != {"LIGHT", "HEAVY"}):
        raise _fail(source, "configuration.env_cfg lacks map_size or ROBOTS {LIGHT, HEAVY}")
    return int(seed), env_cfg


def _check_step(step: Any, t: int, source: str) -> None:
    if not isinstance(step, list) or len(step) != 2:
        raise _fail(source, f"step {t} is not a list of the 2 agents' states")
    for seat, agent in enumerate(step):
        if not isinstance(agent, dict):
            raise _fail(source, f"step {t}, agent {seat} is not an object")
        for key in ("action", "observation", "status", "reward"):
            if key not in agent:
                raise _fail(source, f"step {t}, agent {seat} has no {key!r}")
        if not isinstance(agent["observation"], dict) or not isinstance(agent["status"], str):
            raise _fail(source, f"step {t}, agent {seat}: observation must be an object and "
                        "status a string")
        if agent["reward"] is not None and not _number(agent["reward"]):
            raise _fail(source, f"step {t}, agent {seat}: reward {agent['reward']!r:.30} is "
                        "not a number")


def _initial_obs(text: str, source: str) -> dict[str, Any]:
    try:
        obs = json.loads(text)
    except ValueError:
        raise _fail(source, "the step-0 observation is not JSON") from None
    board = obs.get("board") if isinstance(obs, dict) else None
    if not isinstance(board, dict):
        raise _fail(source, "the step-0 observation has no board")
    missing = [k for k in BOARD_KEYS if k not in board]
    if missing:
        raise _fail(source, f"the step-0 observation is not a full Lux observation (no board "
                    f"{', '.join(missing)})")
    if not _integer(board["factories_per_team"]) or board["factories_per_team"] < 0:
        raise _fail(source, "the step-0 board's factories_per_team is not a count")
    result: dict[str, Any] = obs
    return result


def _action_problem(action: Any, t: int, fpt: int, status: str) -> str:
    """What is wrong with the action at step ``t`` (``""`` if nothing)."""
    if action is None:
        return "" if status in FAILED else f"null action while the agent is {status}"
    if not isinstance(action, dict):
        return f"not an object ({type(action).__name__})"
    if t == 1:
        if not isinstance(action.get("faction"), str) or not _number(action.get("bid")):
            return "a bid needs 'faction' (a string) and 'bid' (a number)"
        return ""
    if t <= 2 * fpt + 1:
        if not action:
            return ""
        spawn = action.get("spawn")
        if (not isinstance(spawn, list) or len(spawn) != 2 or not all(map(_integer, spawn))
                or not _number(action.get("metal")) or not _number(action.get("water"))):
            return "a placement needs 'spawn' [x, y] and 'metal' and 'water' numbers"
        return ""
    return _main_problem(action)


def _main_problem(action: Mapping[str, Any]) -> str:
    for key, value in action.items():
        if key.startswith("factory_"):
            if not _integer(value) or not 0 <= value <= 2:
                return f"{key}: a factory action is 0, 1 or 2, got {value!r:.30}"
        elif key.startswith("unit_"):
            if not isinstance(value, list):
                return f"{key}: an action queue is a list, got {type(value).__name__}"
            for entry in value:
                if (not isinstance(entry, list) or len(entry) != 6
                        or not all(map(_integer, entry))):
                    return f"{key}: a queued action is 6 integers, got {entry!r:.40}"
                if not (0 <= entry[0] <= 5 and 0 <= entry[1] <= 4 and 0 <= entry[2] <= 4):
                    return (f"{key}: action type, direction or resource out of range in "
                            f"{entry!r:.40}")
        else:
            return f"unknown key {key!r:.30} (neither a unit nor a factory)"
    return ""


def agent_state(action: Any, reward: int, status: str, observation: dict[str, Any]
                ) -> dict[str, Any]:
    """One agent's entry of a step (what the environment records)."""
    return {"action": action, "reward": reward, "info": {}, "status": status,
            "observation": observation}


def episode_document(*, episode_id: str, seed: int, env_cfg: dict[str, Any],
                     max_episode_length: int, steps: list[list[dict[str, Any]]],
                     team_names: tuple[str, str]) -> dict[str, Any]:
    """The whole replay (``Environment.toJSON()``) of a played episode's ``steps``."""
    spec = SPECIFICATION
    return {
        "id": episode_id, "name": NAME, "title": spec["title"],
        "description": spec["description"], "version": spec["version"],
        "configuration": {"episodeSteps": max_episode_length + 20,
                          "max_episode_length": max_episode_length, "seed": seed,
                          "actTimeout": 3, "runTimeout": 9600, "env_cfg": env_cfg},
        "specification": {k: spec[k] for k in ("action", "agents", "configuration", "info",
                                                "observation", "reward")},
        "steps": steps,
        "rewards": [agent["reward"] for agent in steps[-1]],
        "statuses": [agent["status"] for agent in steps[-1]],
        "schema_version": SCHEMA_VERSION,
        "info": {"EpisodeId": episode_id, "TeamNames": list(team_names),
                 "LiveVideoPath": None},
    }
