"""The microRTS family: its bots play inside the Java engine, so it stages and plays its own
matches (bot envs, bot-vs-bot games) and has a set-up step (engine files, Java)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from games.core import EngineBot, GameError, Policy, VecGame
from games.family import Family, MatchConditions, MatchDefaults, RecordRequest, Teachers
from games.matches import GameFactory, MatchRunner, MatchSetup, VecGameRunner

BOT_MAX_STEPS = 5000  # game length of bot-only tournaments (MicroRTS-Py's league)


class MicroRTSFamily(Family):
    name = "microrts"
    title = "microRTS"
    summary = "microRTS real-time strategy (Java engine through JPype)"
    factory = "games.microrts:make"
    games = ("microrts",)
    has_maps = True
    two_player = True
    needs_setup = True

    def bot_names(self, game: str) -> list[str]:
        from games.microrts.bots import bot_names

        return bot_names()

    def match_setup(self, game: str, bot: str | None, num_envs: int, seed: int,
                    map_name: str | None = None) -> MatchSetup:
        """Matches alternate sides even where training did not (``alternate_sides``); a
        ``map_name`` replaces the training's ``maps`` list too. Against a bot, every env is a
        bot env: the bot plays inside the engine and the game has one seat."""
        options: dict[str, Any] = {"alternate_sides": True}
        if map_name is not None:
            options.update(map=map_name, maps=[])
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
        only: the default runner."""
        bots = {pid: p.name for pid, p in policies.items() if isinstance(p, EngineBot)}
        if len(bots) == len(policies):
            from games.microrts.botmatch import DEFAULT_MAP
            from games.microrts.match_runner import BotMatchRunner

            processes = conditions.processes
            return BotMatchRunner(bots, map_name=conditions.map_name or DEFAULT_MAP,
                                  max_steps=conditions.max_steps or BOT_MAX_STEPS,
                                  parallel=conditions.num_envs if processes == 1 else 1,
                                  processes=processes)
        if conditions.processes > 1:
            raise GameError("processes > 1 applies only to tournaments of engine bots")
        if not bots:
            return VecGameRunner(game_factory, policies, conditions.num_envs, conditions.seed)
        from games.microrts.match_runner import PolicyMatchRunner

        options = {**conditions.options,
                   **({"map": conditions.map_name} if conditions.map_name else {})}
        return PolicyMatchRunner(policies, options, num_envs=conditions.num_envs,
                                 seed=conditions.seed)

    def plays_engine_bots(self) -> bool:
        return True

    def record(self, game: str, request: RecordRequest,
               progress: Callable[[int, int], None] | None = None) -> Mapping[str, Any]:
        """Scripted-bot games recorded in worker processes (see
        :mod:`games.microrts.recorder`); the map defaults to the bots' tournament map."""
        from games.microrts.botmatch import DEFAULT_MAP
        from games.microrts.recorder import RecordPlan, record

        plan = RecordPlan(request.players, request.maps or (DEFAULT_MAP,), request.games,
                          request.shard_games, request.max_steps or 2000, request.seed,
                          parallel=16)
        return record(plan, request.out, request.processes, progress)

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
        if teachers.replays is not None:
            from games.microrts.replays import ReplayGame, replay_logs

            size = resolve_maps(opts.maps or [opts.map])[0].shape
            logs, maps, max_steps = replay_logs(
                teachers.replays, list(teachers.imitate), teachers.winners_only,
                teachers.held_out, teachers.validation_share, seed, size)
            opts = replace(opts, maps=maps, max_steps=max_steps)
            return ReplayGame(opts, num_envs, logs, seed=seed, name=game)
        if teachers.winners_only:
            raise GameError("--winners-only needs replays: live games have no winner yet")
        if not teachers.bots:
            raise GameError("name teacher bots or a replay folder")
        from games.microrts.teacher_game import LiveBots, TeacherGame

        bots = LiveBots(list(teachers.bots), list(teachers.imitate), seed=seed)
        return TeacherGame(opts, num_envs, bots, seed=seed, name=game)

    def setup(self, quiet: bool = False) -> Mapping[str, Any]:
        from games.microrts.engine import setup
        from games.options import to_mapping

        report = to_mapping(setup(quiet=quiet))
        return report if isinstance(report, dict) else {}


FAMILIES = (MicroRTSFamily(),)
