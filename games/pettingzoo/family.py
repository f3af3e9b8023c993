"""The two-player PettingZoo Atari family: policy against policy, or against the console's
own player inside the emulator (``builtin``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from games.core import GameError
from games.family import Family, MatchDefaults
from games.matches import MatchSetup
from games.options import from_mapping
from games.pettingzoo.options import PettingZooAtariOptions

OBSERVATION_SETTINGS = ("frame_skip", "frame_stack", "screen_size", "interpolation", "max_pool",
                        "agent_indicator", "mirror_second_seat", "full_action_space",
                        "game_kwargs")
"""game.options that two checkpoints playing one game must share"""


class PettingZooFamily(Family):
    name = "pettingzoo"
    summary = "two-player PettingZoo Atari, e.g. pettingzoo/pong_v3"
    factory = "games.pettingzoo:make"
    options_type = "games.pettingzoo.options:PettingZooAtariOptions"
    prefix = "pettingzoo"
    two_player = True

    def canonical(self, rest: str) -> str:
        try:
            from games.pettingzoo.catalog import canonical_name

            return canonical_name(rest)
        except ModuleNotFoundError:  # not installed: the factory reports what is missing
            return rest

    def prefixed_games(self) -> list[str]:
        """The two-player PettingZoo Atari games of the installed version."""
        try:
            from games.pettingzoo.catalog import two_player_games

            return two_player_games()
        except ImportError:  # not installed, or an install that does not load
            return []

    def bot_names(self, game: str) -> list[str]:
        from games.pettingzoo.catalog import builtin_opponent_games, resolve

        return ["builtin"] if resolve(game).name in builtin_opponent_games() else []

    def check_run(self, game: str, options: Mapping[str, Any], num_envs: int,
                  draws_bots: bool = False) -> list[str]:
        """A ``builtin_opponent_share`` that rounds to no env is named in a warning: the run
        would play no game against the console (no ``win_rate/builtin``) without a word."""
        from games.pettingzoo.adapter import builtin_envs

        share = self._options(options).builtin_opponent_share
        if share > 0 and builtin_envs(share, num_envs) == 0:
            return [f"game.options.builtin_opponent_share {share:g} of {num_envs} env(s) is "
                    "no env: no game is played against the console (nor win_rate/builtin "
                    f"logged); use at least {math.ceil(1 / share - 1e-9)} envs (per rank of a "
                    "data-parallel run) or set it to 0"]
        return []

    def decided(self, game: str) -> bool:
        """Competitive games have a winner; cooperative and mixed ones only returns."""
        from games.pettingzoo.catalog import resolve

        return resolve(game).kind == "competitive"

    def with_game_length(self, game: str, options: Mapping[str, Any],
                         steps: int) -> dict[str, Any]:
        """Games cut after ``steps`` agent steps: ``max_cycles`` counts emulator frames,
        ``frame_skip`` of them per step."""
        return {**options, "max_cycles": steps * self._options(options).frame_skip}

    def match_defaults(self, options: Mapping[str, Any], bots_only: bool) -> MatchDefaults:
        """No maps; the game length in agent steps (``max_cycles / frame_skip``)."""
        opts = self._options(options)
        steps = None if opts.max_cycles is None else opts.max_cycles // opts.frame_skip
        return MatchDefaults(None, steps)

    @staticmethod
    def _options(options: Mapping[str, Any]) -> PettingZooAtariOptions:
        return from_mapping(PettingZooAtariOptions, options, "game.options.")

    def observation_settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The preprocessing a seat's observations went through (frames, their size, filter
        and pooling, the seat channels, the mirrored seat), the action set, and the game's
        variant."""
        opts = self._options(options)
        return {key: getattr(opts, key) for key in OBSERVATION_SETTINGS}

    def match_setup(self, game: str, bot: str | None, num_envs: int, seed: int,
                    map_name: str | None = None) -> MatchSetup:
        setup = super().match_setup(game, bot, num_envs, seed, map_name)
        if bot is None:  # both seats played by policies: no env against the console
            return MatchSetup({"builtin_opponent_share": 0.0})
        return setup

    def scripted(self, game: str, bot: str, seed: int) -> MatchSetup:
        from games.pettingzoo.catalog import builtin_opponent_games, resolve

        if bot.lower() != "builtin":
            also = (" or the console's own player (builtin)"
                    if resolve(game).name in builtin_opponent_games() else "")
            raise GameError(f"{game} has no scripted opponent {bot!r}: play another "
                            f"checkpoint{also}")

        if resolve(game).name not in builtin_opponent_games():
            raise GameError(f"{game} has no built-in opponent; games with one: "
                            f"{', '.join(builtin_opponent_games())}")
        # the console's own player, inside the emulator: seat 1 never acts
        return MatchSetup({"builtin_opponent_share": 1.0}, None, "builtin")


FAMILIES = (PettingZooFamily(),)
