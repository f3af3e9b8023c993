"""Game families as plugins: what a family brings besides its adapters.

A family (``classic``, ``microrts``, ``pettingzoo``, ...) is a :class:`Family` object that the
registry (:mod:`games.registry`) lists: its games and their factory, the scripted opponents it
knows by name, how a match against one is staged (:meth:`Family.match_setup`) and played
(:meth:`Family.match_runner`) and recorded (:meth:`Family.recording_game`), and its set-up
check (:meth:`Family.setup`). Code outside
``games/<family>/`` asks the family, never tests its name. One of selfplay's own families is a
module under ``games/<family>/`` listed in the registry; any other package adds one as a plugin
(a ``selfplay.families`` entry point or ``$SELFPLAY_FAMILIES``: :mod:`games.registry`, and the
README's "Adding a game").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from games.core import EngineBot, GameError, Policy, ScriptedPolicy, VecGame
from games.matches import GameFactory, MatchRunner, MatchSetup, RecordTo, VecGameRunner
from games.workers.vec import Launcher


@dataclass(frozen=True)
class MatchConditions:
    """How the games of a tournament (or a rating gauntlet) are played."""

    options: Mapping[str, Any] = field(default_factory=dict)
    """game options (the family's defaults, or a training run's); ``max_steps`` included
    when one was asked for"""
    num_envs: int = 16
    """games played at once"""
    seed: int = 0
    map_name: str | None = None
    max_steps: int | None = None
    """the game length asked for (``None``: the family's default)"""
    processes: int = 1
    """worker processes, where the family's runner plays one game in each"""
    record: RecordTo | None = None
    """record the games as replays (a family that cannot: a one-line error before any game)"""


@dataclass(frozen=True)
class MatchDefaults:
    """What a tournament plays when the user does not say."""

    map_name: str | None = None
    max_steps: int | None = None


@dataclass(frozen=True)
class Teachers:
    """Who plays the seats of a behaviour-cloning run's games, and whose actions are learned.

    Either ``bots`` (live cloning: the family's scripted players choose, spread over seats,
    sides and maps as in a tournament) or ``replays`` (a folder of recorded games, replayed
    through the engine).
    """

    bots: tuple[str, ...] = ()
    """live teachers: the family's scripted players, by name"""
    replays: Path | None = None
    """a folder of replay shards (``selfplay record``, ``play --record``)"""
    imitate: tuple[str, ...] = ()
    """learn only these players' actions (names as recorded; empty: every teacher's)"""
    winners_only: bool = False
    """learn only the actions of the games' winners (replays only: live games have no
    winner yet)"""
    held_out: bool = False
    """replays: play the held-out share (validation) instead of the training share"""
    validation_share: float = 0.05
    """replays: the share of games held out for validation (chosen by each game's hash, so
    the split never changes as shards are added)"""


@dataclass(frozen=True)
class RecordRequest:
    """Games of scripted players to record as replays (``selfplay record``)."""

    players: tuple[str, ...]
    out: Path
    games: int
    maps: tuple[str, ...] = ()
    """maps the games are spread over (empty: the family's default)"""
    processes: int = 1
    seed: int = 0
    max_steps: int | None = None
    """game length limit (``None``: the family's default)"""
    shard_games: int = 100
    """games per replay shard"""
    parallel: int = 16
    """games played at once in each process"""
    opening: int = 0
    """each game opens with up to this many cycles of random legal moves (never learned), so
    that deterministic players do not repeat one game"""
    ray_address: str | None = None
    """play the games as Ray tasks on the cluster at this address (``local``, ``auto``,
    ``HOST:PORT``) instead of this machine's processes; only this process writes files"""
    focus: tuple[str, ...] = ()
    """only the pairings with one of these players (empty: every pairing)"""


class Family:
    """A game family. Subclasses set the class attributes and override what they support;
    the defaults describe a family of single-agent games without bots or set-up."""

    name: str = ""
    """the family's name; ``hyperparams/<name>.yaml`` holds its settings"""
    title: str = ""
    """the family's name as people write it (default: :attr:`name`)"""
    summary: str = ""
    factory: str = ""
    """``"module:function"`` called as ``factory(name, num_envs=..., seed=..., **options)``"""
    games: tuple[str, ...] = ()
    """game names listed one by one"""
    prefix: str | None = None
    """games named ``<prefix>/<game>``: any game of the family's engine"""
    aliases: Mapping[str, str] = {}
    """short names (lower case) -> canonical game names"""
    has_maps: bool = False
    """whether ``--map`` means something for its games"""
    two_player: bool = False
    """whether its games can seat two players against each other"""
    needs_setup: bool = False
    """whether :meth:`setup` fetches or checks something (``selfplay setup <family>``)"""
    length_option: str | None = None
    """the game option that limits a game's length (``--max-steps``); None: none to set"""
    options_type: str | None = None
    """``"module:Class"``: the dataclass of the game options (``game.options``), with which
    :meth:`full_options` fills in their defaults; None: options are compared as given"""
    hyperparams: str | Path | None = None
    """a plugin family's settings file (as ``hyperparams/<name>.yaml`` holds selfplay's own
    families'), an absolute path (``Path(__file__).with_name("mine.yaml")``); None: the
    dataclass defaults"""

    def make(self, game: str, num_envs: int = 1, seed: int | None = None,
             options: Mapping[str, Any] | None = None) -> VecGame:
        """``num_envs`` envs of ``game`` (a canonical name of this family) with ``options``,
        built by the family's factory; a :class:`GameError` naming the extra to install when
        the factory's packages are missing."""
        taken = sorted({"name", "num_envs", "seed"} & set(options or {}))
        if taken:  # the factory's own arguments: "got multiple values" tracebacks
            raise GameError(f"game.options.{taken[0]} is not a game option: the game is "
                            "--game, the number of envs game.num_envs, the seed --seed")
        module_name, _, attr = self.factory.partition(":")
        own = module_name.split(".")[0] in {"games", "selfplay"}  # else a plugin's family
        try:
            module = importlib.import_module(module_name)
            factory: Callable[..., VecGame] | None = getattr(module, attr, None)
            if not callable(factory):
                raise GameError(f"game family {self.name!r}: its factory {self.factory!r} "
                                f"names nothing callable in {module_name}")
            try:  # the signature it is called through (a decorator's own, not the wrapped one)
                signature: inspect.Signature | None = inspect.signature(
                    factory, follow_wrapped=False)
            except (TypeError, ValueError):  # none to read (a builtin): called as it is
                signature = None
            if signature is not None:
                try:  # before any of its code runs
                    signature.bind(game, num_envs=num_envs, seed=seed, **dict(options or {}))
                except TypeError as exc:
                    raise GameError(f"game family {self.name!r}: its factory {self.factory!r} "
                                    f"cannot be called as factory(name, num_envs=..., seed=..., "
                                    f"**options) with options {sorted(options or {})} ({exc})"
                                    ) from None
            # packages some factories import only when called (ale-py for the ROM list)
            return factory(game, num_envs=num_envs, seed=seed, **dict(options or {}))
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in {"games", "selfplay"}:
                raise GameError(f"game family {self.name!r} is not available in this "
                                f"version of selfplay ({exc.name} missing)") from exc
            package = (exc.name or "?").split(".")[0]
            extra = (f"pip install 'selfplay[{self.name}]'" if own
                     else f"pip install {package} (the {self.name!r} family is a plugin's: "
                          "see its own installation notes)")
            raise GameError(f"game {game!r} needs the Python package {package!r}; "
                            f"install it with: {extra}") from exc

    def full_options(self, game: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` with every default of :attr:`options_type` filled in, so that two
        runs' options compare equal when they play alike (a run saved with ``{}`` and one
        whose settings file writes the defaults out); as given where they do not parse."""
        if self.options_type is None:
            return dict(options)
        from games.options import from_mapping, to_mapping

        module_name, _, class_name = self.options_type.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
            return dict(to_mapping(from_mapping(cls, options, "game.options.")))
        except Exception:  # noqa: BLE001 - refused later with its own message, where it is used
            return dict(options)

    def observation_settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The settings in game ``options`` that change what a seat observes (and the frame
        its actions are read in), defaults filled in: two networks trained with different
        ones cannot share one game. None by default."""
        return {}

    def decided(self, game: str) -> bool:
        """Whether ``game``'s games end with a winner (:attr:`GameSpec.decided`, known
        without making one: a tournament asks before it opens its database)."""
        return True

    def observation_difference(self, a: Mapping[str, Any], b: Mapping[str, Any]
                               ) -> tuple[str, Any, Any] | None:
        """The first of :meth:`observation_settings` in which game options ``a`` and ``b``
        differ, as ``(key, value in a, value in b)``; None if they observe alike."""
        theirs = self.observation_settings(b)
        for key, value in self.observation_settings(a).items():
            if theirs.get(key) != value:
                return key, value, theirs.get(key)
        return None

    def check_run(self, game: str, options: Mapping[str, Any], num_envs: int,
                  draws_bots: bool = False) -> list[str]:
        """Refuse (:class:`GameError`) the settings of a training run that would not play
        what they name, before its games are made (by default: nothing to check); the
        warnings to print once the run starts (not before an error that refuses it).
        ``draws_bots``: the league draws each bot env's bot per game (``bot_env_pfsp``)."""
        return []

    def canonical(self, rest: str) -> str:
        """The canonical spelling of the part after :attr:`prefix` (prefix families)."""
        return rest

    def prefixed_games(self) -> list[str]:
        """The games behind :attr:`prefix` (the part after it), where the installed engine
        lists them; empty where it cannot (``selfplay games`` then shows ``prefix/<game>``)."""
        return []

    def bot_names(self, game: str) -> list[str]:
        """The scripted opponents ``game`` knows by name."""
        return []

    def bot_aliases(self, game: str) -> dict[str, str]:
        """Other names of :meth:`bot_names`' bots: lower-case alias -> canonical name."""
        return {}

    def scripted(self, game: str, bot: str, seed: int) -> MatchSetup:
        """The staging of games against ``bot`` (override in families with bots); a
        :class:`GameError` naming the known bots for an unknown one."""
        raise GameError(f"{game} has no scripted opponents; play another checkpoint")

    def map_options(self, game: str, map_name: str) -> dict[str, Any]:
        """The game options that play ``map_name`` instead of the configured map(s); a
        :class:`GameError` for a family without maps."""
        raise GameError(f"game {game!r} has no maps; drop --map")

    def map_label(self, options: Mapping[str, Any]) -> str:
        """The map(s) ``options`` play, as a tournament names them ("" for a family without
        maps)."""
        return ""

    def canonical_map(self, game: str, map_name: str) -> str:
        """One spelling of the map ``map_name`` names (a tournament's id holds it, so that
        the same map typed another way is the same tournament); a :class:`GameError` for an
        unknown map or a family without maps."""
        raise GameError(f"game {game!r} has no maps; drop --map")

    def with_game_length(self, game: str, options: Mapping[str, Any],
                         steps: int) -> dict[str, Any]:
        """``options`` with games cut after ``steps`` (:attr:`length_option`); a
        :class:`GameError` for a family whose games have no length to set."""
        if self.length_option is None:
            raise GameError(f"{game} has no game length to set; drop --max-steps")
        return {**options, self.length_option: steps}

    def match_setup(self, game: str, bot: str | None, num_envs: int, seed: int,
                    map_name: str | None = None) -> MatchSetup:
        """Options (and scripted policy) for ``num_envs`` games of ``game`` against ``bot``;
        ``bot=None`` means policy against policy (seat 0 the player measured, seat 1 its
        opponent)."""
        if not self.two_player:
            raise GameError(f"game {game!r} is single-agent: there is no opponent to play "
                            "against (selfplay eval scores its checkpoints)")
        if map_name is not None and not self.has_maps:
            raise GameError(f"game {game!r} has no maps; drop --map")
        if bot is None:
            return MatchSetup()
        return self.scripted(game, bot, seed)

    def opponent(self, game: str, name: str, seed: int) -> Policy:
        """Bot ``name`` as a league player: a policy acting through seats, or an
        :class:`EngineBot` for a bot that plays inside the engine."""
        setup = self.match_setup(game, name, 1, seed)
        return setup.scripted if setup.scripted is not None else EngineBot(
            setup.opponent_name or name)

    def match_defaults(self, options: Mapping[str, Any], bots_only: bool) -> MatchDefaults:
        """The map and game length of a tournament that names none (``bots_only``: every
        player is one of the family's bots)."""
        steps = options.get(self.length_option) if self.length_option else None
        return MatchDefaults(None, int(steps) if isinstance(steps, int) else None)

    def match_games(self, game: str, options: Mapping[str, Any],
                    map_name: str | None = None) -> GameFactory:
        """``(envs, seed) -> game``: the games of policy-against-policy matches of ``game``
        (``options`` with the family's match set-up, on ``map_name`` when given)."""
        from games.registry import make_game

        def game_factory(envs: int, seed: int) -> VecGame:
            setup = self.match_setup(game, None, envs, seed, map_name)
            return make_game(game, num_envs=envs, seed=seed, options={**options, **setup.options})

        return game_factory

    def match_runner(self, game: str, policies: Mapping[int, Policy],
                     conditions: MatchConditions, game_factory: GameFactory) -> MatchRunner:
        """The runner of a tournament between ``policies`` (by league player id): by default
        :class:`VecGameRunner` in envs made by ``game_factory``."""
        engine = sorted(p.name for p in policies.values() if isinstance(p, EngineBot))
        if engine:
            raise GameError(f"{', '.join(engine)} play(s) inside the {game} engine; matches "
                            "with them are not supported")
        if conditions.processes > 1:
            raise GameError("processes > 1 applies only to tournaments of engine bots")
        return VecGameRunner(game_factory, policies, conditions.num_envs, conditions.seed,
                             conditions.record)

    def recording_game(self, game: str, options: Mapping[str, Any], num_envs: int, seed: int,
                       bot: str | None = None) -> VecGame:
        """``num_envs`` two-seat games of ``game`` (with ``options``) that record what is
        played in them (:class:`~games.core.SupportsRecording`): the caller plays seat 0, and
        seat 1 too unless ``bot``, a scripted player that plays inside the engine, does. A
        :class:`GameError` where the family cannot record its games."""
        raise GameError(f"{game} cannot record its games as replays; drop --record")

    def plays_engine_bots(self) -> bool:
        """Whether :meth:`match_runner` can play :class:`EngineBot` players."""
        return False

    def record(self, game: str, request: RecordRequest,
               progress: Callable[[int, int], None] | None = None) -> Mapping[str, Any]:
        """Record ``request``'s games into its replay folder (resuming: finished shards are
        kept); a summary. ``progress(done, total)`` as games finish."""
        raise GameError(f"{game} cannot record games of scripted players")

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        """``num_envs`` games of ``game`` (with the run's ``options``) whose seats
        ``teachers`` play: a :class:`~games.core.SupportsTeachers` game for behaviour
        cloning. A :class:`GameError` where the family has no such teachers."""
        raise GameError(f"{game} has no teachers for behaviour cloning (no scripted players "
                        "or replays of it)")

    def make_on_workers(self, game: str, num_envs: int, seed: int | None,
                        options: Mapping[str, Any], launcher: Launcher) -> VecGame | None:
        """``num_envs`` envs of ``game`` split over workers that ``launcher`` starts (Ray
        actors, say: :mod:`games.workers`), in the family's own worker layout; ``None`` where
        it has none (each worker then builds its envs with :meth:`make`:
        :mod:`games.workers.generic`)."""
        return None

    def import_replays(self, game: str, fmt: str, paths: list[Path], out: Path,
                       shard_games: int = 100, skip_bad: bool = False) -> Mapping[str, Any]:
        """Convert replay files of format ``fmt`` (e.g. Kaggle episodes) into the replay folder
        ``out``; a summary (``folder``, ``games``, ``shards``, ``steps``, ``duplicates``,
        ``skipped``). A :class:`GameError` where the family imports no such format."""
        raise GameError(f"{game} cannot import replays of format {fmt!r}")

    def setup(self, quiet: bool = False) -> Mapping[str, Any] | None:
        """Fetch what the family's engine needs and check it (``selfplay setup <family>``);
        ``None`` when the family needs no set-up."""
        return None


class SeatBotsFamily(Family):
    """A family whose scripted players act through seats: NumPy bots ``fn(obs, mask, rng)``
    named in :meth:`seat_bots`, each a :class:`~games.core.ScriptedPolicy` with its own seed."""

    def seat_bots(self) -> Mapping[str, Callable[..., Any]]:
        """The bots by name (names are compared without case and shown in lower case)."""
        raise NotImplementedError

    def _bots(self) -> dict[str, Callable[..., Any]]:
        bots = {name.lower(): bot for name, bot in self.seat_bots().items()}
        if len(bots) != len(self.seat_bots()):
            raise GameError(f"{self.name}: two seat bots share a name but for case: "
                            f"{', '.join(sorted(self.seat_bots()))}")
        return bots

    def bot_names(self, game: str) -> list[str]:
        return sorted(self._bots())

    def scripted(self, game: str, bot: str, seed: int) -> MatchSetup:
        bots = self._bots()
        key = bot.lower()
        if key not in bots:
            raise GameError(f"unknown {game} bot {bot!r}; known: {', '.join(sorted(bots))}")
        return MatchSetup({}, ScriptedPolicy(key, bots[key], seed), key)

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        """Live teachers: the family's seat bots play every seat
        (:class:`~games.seat_teachers.SeatTeacherGame`)."""
        from games.seat_teachers import SeatTeacherGame

        known = self._bots()
        names = ", ".join(sorted(known))
        if teachers.replays is not None:
            raise GameError(f"{game} has no replays to clone; clone its live bots instead "
                            f"({names})")
        if teachers.winners_only:
            raise GameError(f"winners_only needs replays: live {game} games have no winner yet "
                            "when their moves are learned; imitate named bots instead")
        if not teachers.bots:
            raise GameError(f"name the teachers of {game}: one or more of {names}")
        bots = [bot.lower() for bot in teachers.bots]
        for bot in bots:
            if bot not in known:
                raise GameError(f"unknown {game} bot {bot!r}; known: {names}")
        imitate = [bot.lower() for bot in teachers.imitate]
        for bot in imitate:
            if bot not in bots:
                raise GameError(f"imitate names {bot!r}, who does not play these games; "
                                f"teachers: {', '.join(bots)}")
        learned = [not imitate or bot in imitate for bot in bots]
        played = self.make(game, num_envs, seed, options)
        return SeatTeacherGame(played, [known[bot] for bot in bots], learned, seed, bots)
