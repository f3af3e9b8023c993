"""The microRTS family: its bots play inside the Java engine, so it stages and plays its own
matches (bot envs, bot-vs-bot games) and has a set-up step (engine files, Java). Recorded
games are staged as self-play envs, a bot thinking for its seat as a teacher
(:mod:`games.microrts.recording`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from games.core import EngineBot, GameError, Policy, VecGame
from games.family import Family, MatchConditions, MatchDefaults, RecordRequest, Teachers
from games.matches import GameFactory, MatchRunner, MatchSetup, VecGameRunner
from games.workers.vec import Launcher

BOT_MAX_STEPS = 5000  # game length of bot-only tournaments (MicroRTS-Py's league)


VALIDATION_OPENING = 8
"""Live teachers' validation games start with up to this many random cycles (never labelled),
so that deterministic bots play games other than the training games."""


class MicroRTSFamily(Family):
    name = "microrts"
    title = "microRTS"
    summary = "microRTS real-time strategy (Java engine through JPype)"
    factory = "games.microrts:make"
    options_type = "games.microrts.options:MicroRTSOptions"
    games = ("microrts",)
    has_maps = True
    two_player = True
    needs_setup = True
    length_option = "max_steps"

    def bot_names(self, game: str) -> list[str]:
        from games.microrts.bots import bot_names

        return bot_names()

    def bot_aliases(self, game: str) -> dict[str, str]:
        from games.microrts.bots import bot_aliases

        return bot_aliases()

    def map_options(self, game: str, map_name: str) -> dict[str, Any]:
        """One map for every env: ``map`` set, a training's ``maps`` list and its weights
        dropped."""
        return {"map": map_name, "maps": [], "map_weights": []}

    def observation_settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Fog of war and the rotated board of player 1."""
        from games.microrts.options import MicroRTSOptions
        from games.options import from_mapping

        opts = from_mapping(MicroRTSOptions, options, "game.options.")
        return {"partial_obs": opts.partial_obs, "rotate_player1": opts.rotate_player1}

    def check_run(self, game: str, options: Mapping[str, Any], num_envs: int,
                  draws_bots: bool = False) -> list[str]:
        """Every map of ``maps`` must be played by some env: with fewer env pairs than maps
        the last maps were silently never played (and still sized the padded batch). Bots no
        bot env starts with are named in a warning, unless the league draws them
        (``draws_bots``)."""
        from games.microrts import bots as bots_mod
        from games.microrts.options import MicroRTSOptions, env_layout
        from games.options import from_mapping

        opts = from_mapping(MicroRTSOptions, options, "game.options.")
        if opts.workers > num_envs:
            raise GameError(f"game.options.workers ({opts.workers}) exceeds the {num_envs} "
                            "envs (each worker steps at least one): lower it")
        warnings = []
        if num_envs > opts.num_selfplay_envs and opts.bots and not draws_bots:
            layout = env_layout(opts, num_envs)
            met = {bot.name for bot in layout.bots if bot is not None}
            idle = [b for b in opts.bots if bots_mod.resolve_bot(b).name not in met]
            if idle:
                warnings.append(f"game.options.bots: {', '.join(idle)} start in none of the "
                                f"{num_envs - opts.num_selfplay_envs} bot envs (one bot per "
                                "pair of envs): raise game.num_envs, or "
                                "league.bot_env_pfsp=true (with the league on and collection: "
                                "sync) draws every game's bot")
        if len(opts.maps) < 2:
            return warnings
        from games.microrts.maps import resolve_maps

        named: dict[str, str] = {}
        for name, info in zip(opts.maps, resolve_maps(list(opts.maps), same_size=False),
                              strict=True):  # an unknown map is named first
            first = named.get(str(info.path))
            if first is not None:
                raise GameError(f"game.options.maps names the map {info.name} twice ({first!r} "
                                f"and {name!r}): name each map once (game.options.map_weights "
                                "sets their shares of the envs)")
            named[str(info.path)] = name
        sides = 2 if opts.alternate_sides else 1

        def short(n: int) -> list[int]:  # the maps with fewer envs than sides to play
            played = Counter(env_layout(opts, n).maps)
            return [i for i in range(len(opts.maps)) if played[i] < sides]

        unplayed = [opts.maps[i] for i in short(num_envs)]
        if unplayed:
            enough = next((n for n in range(num_envs + 1, num_envs + 64 * len(opts.maps))
                           if not short(n)), None)
            fix = (f"raise game.num_envs to {enough}" if enough is not None
                   else "give the maps more envs")
            raise GameError(f"game.options.maps: {', '.join(unplayed)} would not be played "
                            f"(from both sides) by the {num_envs} envs (self-play and bot envs "
                            f"take the maps apart); {fix} or list fewer maps")
        return warnings

    def canonical_map(self, game: str, map_name: str) -> str:
        """A shipped map by its name (``maps/8x8/basesWorkers8x8.xml``, ``8x8/basesWorkers8x8``
        and ``basesworkers8x8`` are ``basesWorkers8x8``), a user's map by its absolute path."""
        from games.microrts.maps import resolve_map

        return resolve_map(map_name).name

    def map_label(self, options: Mapping[str, Any]) -> str:
        """A training's ``maps`` list joined by commas, else its ``map``."""
        maps = options.get("maps") or options.get("map") or ""
        return ",".join(maps) if isinstance(maps, list) else str(maps)

    def match_setup(self, game: str, bot: str | None, num_envs: int, seed: int,
                    map_name: str | None = None) -> MatchSetup:
        """Matches alternate sides even where training did not (``alternate_sides``); a
        ``map_name`` replaces the training's ``maps`` list too. Against a bot, every env is a
        bot env: the bot plays inside the engine and the game has one seat."""
        options: dict[str, Any] = {"alternate_sides": True}
        if map_name is not None:
            options.update(self.map_options(game, map_name))
        if bot is None:
            return MatchSetup({**options, "num_selfplay_envs": num_envs})
        from games.microrts.bots import resolve_bot

        name = resolve_bot(bot).name
        return MatchSetup({**options, "bots": [name], "num_selfplay_envs": 0}, None, name)

    def match_defaults(self, options: Mapping[str, Any], bots_only: bool) -> MatchDefaults:
        if bots_only:
            from games.microrts.botmatch import DEFAULT_MAP

            return MatchDefaults(DEFAULT_MAP, BOT_MAX_STEPS)
        return super().match_defaults(options, bots_only)

    def match_runner(self, game: str, policies: Mapping[int, Policy],
                     conditions: MatchConditions, game_factory: GameFactory) -> MatchRunner:
        """Bots only: bot-vs-bot games inside the engine (one per worker process with
        ``processes`` > 1); policies and bots: bot envs whose bot changes per match; policies
        only: the default runner. With ``conditions.record`` every kind of match is recorded
        (bot games as self-play games of bots thinking for their seats), in this process."""
        bots = {pid: p.name for pid, p in policies.items() if isinstance(p, EngineBot)}
        record = conditions.record
        if record is not None and conditions.processes > 1:
            raise GameError("--record plays every game in this process; drop --processes")
        if len(bots) == len(policies):
            from games.microrts.botmatch import DEFAULT_MAP
            from games.microrts.match_runner import BotMatchRunner

            processes = conditions.processes
            # a training's map(s) and game length where the conditions name none (a league
            # run's anchor calibration), else the bot tournaments' defaults
            trained = conditions.options
            maps = (conditions.map_name or trained.get("maps") or trained.get("map")
                    or DEFAULT_MAP)
            return BotMatchRunner(bots, map_name=maps,
                                  max_steps=(conditions.max_steps or trained.get("max_steps")
                                             or BOT_MAX_STEPS),
                                  parallel=conditions.num_envs if processes == 1 else 1,
                                  processes=processes, record=record)
        if conditions.processes > 1:
            raise GameError("processes > 1 applies only to tournaments of engine bots")
        if not bots:
            if record is not None:
                def recording_factory(num_envs: int, seed: int) -> VecGame:
                    staged = self.match_setup(game, None, num_envs, seed, conditions.map_name)
                    return self.recording_game(game, {**conditions.options, **staged.options},
                                               num_envs, seed)

                game_factory = recording_factory
            return VecGameRunner(game_factory, policies, conditions.num_envs, conditions.seed,
                                 record)
        from games.microrts.match_runner import PolicyMatchRunner

        options = {**conditions.options,
                   **(self.map_options(game, conditions.map_name) if conditions.map_name
                      else {})}
        return PolicyMatchRunner(policies, options, num_envs=conditions.num_envs,
                                 seed=conditions.seed, record=record)

    def plays_engine_bots(self) -> bool:
        return True

    def recording_game(self, game: str, options: Mapping[str, Any], num_envs: int, seed: int,
                       bot: str | None = None) -> VecGame:
        """Self-play envs in this process (a :class:`~games.microrts.recording.RecordingGame`);
        with ``bot``, a :class:`~games.microrts.teacher_game.TeacherGame` whose bot thinks
        for seat 1, seeing the whole board as the engine's bots do."""
        from dataclasses import replace

        from games.microrts.options import MicroRTSOptions, env_layout
        from games.microrts.recording import RecordingGame
        from games.options import from_mapping

        opts = from_mapping(MicroRTSOptions, options, "game.options.")
        opts = replace(opts, num_selfplay_envs=num_envs, bots=[], workers=1)
        _one_size(opts, "recording (--record)")
        if bot is None:
            return RecordingGame(opts, num_envs, seed=seed, name=game)
        from games.microrts.bots import resolve_bot
        from games.microrts.teacher_game import LiveBots, TeacherGame, seat_pair

        name = resolve_bot(bot).name
        players = env_layout(opts, num_envs).players  # [E, 2]
        pairs = [seat_pair(players, e, name) for e in range(num_envs)]
        bots = LiveBots([name], seed=seed, schedule=lambda e, _: pairs[e], full_view=True)
        return TeacherGame(opts, num_envs, bots, seed=seed, name=game)

    def record(self, game: str, request: RecordRequest,
               progress: Callable[[int, int], None] | None = None) -> Mapping[str, Any]:
        """Scripted-bot games recorded in worker processes (see
        :mod:`games.microrts.recorder`); the map defaults to the bots' tournament map."""
        from games.microrts.botmatch import DEFAULT_MAP
        from games.microrts.recorder import RecordPlan, record

        plan = RecordPlan(request.players, request.maps or (DEFAULT_MAP,), request.games,
                          request.shard_games,
                          2000 if request.max_steps is None else request.max_steps, request.seed,
                          parallel=request.parallel, opening=request.opening,
                          focus=request.focus)
        return record(plan, request.out, request.processes, progress, request.ray_address)

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        """Every env a self-play game of teachers, in this process, observed as the run's
        ``options`` say (fog of war, rotation). Replays play their own maps (of the run's
        size) and game length; live bots play the run's maps."""
        from dataclasses import replace

        from games.microrts.maps import resolve_maps
        from games.microrts.options import MicroRTSOptions
        from games.options import from_mapping

        opts = from_mapping(MicroRTSOptions, options, "game.options.")
        opts = replace(opts, num_selfplay_envs=num_envs, bots=[], workers=1)
        _one_size(opts, "behaviour cloning")
        if teachers.replays is not None:
            from games.microrts.replays import ReplayGame, replay_logs

            size = resolve_maps(opts.maps or [opts.map])[0].shape
            logs, maps, max_steps = replay_logs(
                teachers.replays, list(teachers.imitate), teachers.winners_only,
                teachers.held_out, teachers.validation_share, seed, size)
            pair = 2 if opts.alternate_sides else 1  # envs sharing a map (both sides)
            if len(maps) * pair > num_envs:
                raise GameError(f"the replays hold {len(maps)} maps and each needs {pair} "
                                f"env(s): use at least {len(maps) * pair} envs "
                                f"(bc.num_envs={num_envs})")
            opts = replace(opts, maps=maps, max_steps=max_steps)
            return ReplayGame(opts, num_envs, logs, seed=seed, name=game)
        if teachers.winners_only:
            raise GameError("--winners-only needs replays: live games have no winner yet")
        if not teachers.bots:
            raise GameError("name teacher bots or a replay folder")
        from games.microrts.teacher_game import LiveBots, TeacherGame

        bots = LiveBots(list(teachers.bots), list(teachers.imitate), seed=seed)
        # the engine bots are deterministic: validation games from the same start would be
        # the training games again, so they open with a few random cycles
        opening = VALIDATION_OPENING if teachers.held_out else 0
        return TeacherGame(opts, num_envs, bots, seed=seed, name=game, opening=opening)

    def make_on_workers(self, game: str, num_envs: int, seed: int | None,
                        options: Mapping[str, Any], launcher: Launcher) -> VecGame:
        """``game.options.workers`` workers (one JVM each) that ``launcher`` starts."""
        from games.microrts.adapter import MicroRTSOptions
        from games.microrts.workers import MicroRTSWorkers
        from games.options import from_mapping

        opts = from_mapping(MicroRTSOptions, dict(options), "game.options.")
        return MicroRTSWorkers(opts, num_envs, seed=seed, name=game, launcher=launcher)

    def setup(self, quiet: bool = False) -> Mapping[str, Any]:
        from games.microrts.engine import setup
        from games.options import to_mapping

        report = to_mapping(setup(quiet=quiet))
        return report if isinstance(report, dict) else {}


def _one_size(options: Any, what: str) -> None:
    """A one-line :class:`GameError` when ``options.maps`` mixes board sizes: ``what`` plays
    one grid (its replays are of one size)."""
    from games.microrts.maps import resolve_maps

    infos = resolve_maps(options.maps or [options.map], same_size=False)
    sizes = sorted({f"{m.height}x{m.width}" for m in infos})
    if len(sizes) > 1:
        raise GameError(f"{what} plays maps of one size; game.options.maps mixes "
                        f"{', '.join(sizes)}: pick one size (--map, or --set "
                        f"game.options.maps=[...]), then train on all with --init-from")


FAMILIES = (MicroRTSFamily(),)
