"""Tournaments between league players, in any two-seat :class:`games.core.VecGame`.

Two schedules: *round-robin* (every pair plays ``games_per_pair`` games, sides alternating)
and *TrueSkill-adaptive* (repeatedly the pairing of highest match quality involving a player
whose σ is still ≥ ``until_sigma``), which may open with a round robin
(``opening_games_per_pair``), as MicroRTS-Py's league does: adaptive pairings alone mostly pit
close players against each other, so a player's record against the rest of the field, which
separates players who split their games with each other, is barely sampled.

A runner plays many games at once, one per environment: seats are grouped by the player that
owns them and each player's policy acts once per step for all its seats; when an
environment's game ends its result is recorded at once
(:meth:`league.db.LeagueDB.record_match`) and the environment takes the next scheduled match.

Every match has an idempotency key ``<tournament>/<id_a>-<id_b>/<k>``, so re-running the same
command after a crash plays only what is missing: no match is lost or stored twice. The
tournament id names the schedule, the seed, the map and any other game setting that changes
what a match plays (:attr:`TournamentConfig.settings`, e.g. the game length), so a re-run with
other settings starts another tournament rather than counting the stored games as its own.
Players whose policy cannot be built (missing or corrupt file) are reported, flagged and
skipped.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from games.core import Policy
from games.family import MatchConditions
from games.files import CheckpointError
from games.matches import GameFactory, MatchResult, MatchRunner, MatchSpec, VecGameRunner
from games.registry import family_of, resolve
from league.db import LeagueDB, LeagueError
from league.ratings import quality_matrix
from league.records import visible

PolicyFactory = Callable[[str], Policy]  # player name -> policy
RunnerFactory = Callable[[Mapping[int, Policy]], MatchRunner]  # policies by player id


@dataclass(frozen=True)
class TournamentConfig:
    """What to play; the same config re-run resumes the same tournament."""

    games_per_pair: int = 10
    """round-robin: games per pair of players, sides alternating"""
    until_sigma: float | None = None
    """adaptive mode: play until every (non-frozen) player's σ is below this"""
    opening_games_per_pair: int = 0
    """adaptive mode: first a round robin of this many games per pair, then adaptive pairings"""
    min_quality: float = 0.0
    """adaptive mode: skip pairings of lower TrueSkill match quality. Below 0.05 the favourite
    wins about 99 % of games: such a game teaches TrueSkill almost nothing, while every game
    adds its drift τ to σ, so a player whose only pairings are that lopsided (the weakest bot
    of a field) never gets its σ below ``until_sigma``; with a floor it is left as it is and
    the tournament ends"""
    num_envs: int = 16
    """games played at once"""
    seed: int = 0
    """seed of the game batch and of the per-match seeds"""
    map: str = ""
    """map name recorded with each match (the game factory is expected to use it)"""
    max_matches: int = 100_000
    """adaptive mode: stop when the tournament holds this many matches (those stored by
    earlier runs and the opening's included) even if some σ is still large"""
    settings: str = ""
    """game settings other than the map that change what a match plays, e.g.
    ``max_steps=2000`` (empty: the game's defaults); part of the default tournament id, so
    games played with other settings are never taken for this tournament's"""
    name: str = ""
    """tournament id used in the match keys (default: derived from mode, seed, map and
    settings; a name given here must itself tell apart tournaments of other settings)"""

    @property
    def tournament_id(self) -> str:
        if self.name:
            return self.name
        mode = "rr" if self.until_sigma is None else "ts"
        if self.until_sigma is not None and self.opening_games_per_pair:
            mode = f"rr{self.opening_games_per_pair}+ts"
        # no settings: the id of earlier versions, so their databases resume
        return f"{mode}:s{self.seed}:{self.map}" + (f":{self.settings}" if self.settings else "")


@dataclass
class TournamentSummary:
    tournament: str
    played: int = 0  # matches recorded by this run
    already_stored: int = 0  # matches of the schedule found in the database
    skipped_players: list[str] = field(default_factory=list)
    sigma_reached: bool | None = None
    """adaptive mode: whether every rated player's σ ended below ``until_sigma`` (False: the
    match cap, the quality floor or a stall stopped it first)"""
    stalled_players: list[str] = field(default_factory=list)
    """adaptive mode: the players whose σ stopped falling above ``until_sigma`` (no new low
    in :data:`STALL_WINDOW` matches), which ended the tournament"""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "tournament": self.tournament, "played": self.played,
            "already_stored": self.already_stored, "skipped_players": self.skipped_players}
        if self.sigma_reached is not None:
            out["sigma_reached"] = self.sigma_reached
            out["stalled_players"] = self.stalled_players
        return out


def match_seed(seed: int, key: str) -> int:
    """A deterministic 31-bit seed for one match."""
    digest = hashlib.sha256(f"{seed}/{key}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def lower_id_seat(a: int, b: int, k: int) -> int:
    """The seat of the lower id ``a`` in game ``k`` of pair ``(a, b)``: the sides alternate,
    and which player gets the extra game of an odd count changes from pair to pair (it was
    always the lower id: the first mover in every game of ``--games-per-pair 1``)."""
    return (k + a + b) % 2


def match_key(tournament: str, a: int, b: int, k: int) -> str:
    return f"{tournament}/{a}-{b}/{k}"


# --------------------------------------------------------------------------- schedules


class RoundRobin:
    """Every pair ``games_per_pair`` times, sides alternating (:func:`lower_id_seat`)."""

    def __init__(self, ids: Sequence[int], config: TournamentConfig, stored: set[str],
                 focus: set[int] | None = None, games_per_pair: int | None = None) -> None:
        tid = config.tournament_id
        pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]
                 if focus is None or a in focus or b in focus]
        self.pending: list[MatchSpec] = []
        self.already_stored = 0
        games = config.games_per_pair if games_per_pair is None else games_per_pair
        for k in range(games):
            for a, b in pairs:
                key = match_key(tid, a, b, k)
                if key in stored:
                    self.already_stored += 1
                else:
                    self.pending.append(MatchSpec(key, a, b, lower_id_seat(a, b, k),
                                                  match_seed(config.seed, key), k))
        self.pending.reverse()  # pop() from the end in schedule order
        self.total = len(self.pending)

    def next(self) -> MatchSpec | None:
        return self.pending.pop() if self.pending else None

    def done(self, spec: MatchSpec) -> None:
        """Nothing to update: the schedule is fixed."""


STALL_PACE = 20
"""an adaptive tournament stops when, over :func:`stall_window` matches, no σ still above
the target fell by a ``1 / STALL_PACE`` share of its distance to it (at that pace it would
need more than ``STALL_PACE`` windows more)"""


def stall_window(players: int) -> int:
    """The matches over which an adaptive tournament checks that some σ above the target is
    still falling at :data:`STALL_PACE`: a player whose pairings are all foregone (the
    weakest bot of a field, which loses every game) gains in each game TrueSkill's drift τ
    about what the game teaches, and its σ settles above the target (a 4-bot microRTS
    tournament on 8x8 ran 47 minutes, 2,367 matches, LightRush's σ at 2.45, until stopped by
    hand)."""
    return max(200, 10 * players * players)


class Adaptive:
    """The best-quality pairing involving a player whose σ is still ≥ ``until_sigma``; it
    stops when none of those σ falls at :data:`STALL_PACE` (``stalled``: their ids)."""

    def __init__(self, db: LeagueDB, ids: Sequence[int], config: TournamentConfig,
                 stored: set[str], focus: set[int] | None = None, first_k: int = 0) -> None:
        assert config.until_sigma is not None
        self.db, self.config, self.ids = db, config, list(ids)
        self.stored = stored
        self.first_k = first_k  # game numbers below this belong to an opening round robin
        self.mine: set[str] = set()  # keys of the matches this schedule handed out
        # players whose σ must shrink: not frozen, and in ``focus`` when one is given
        self.rated = np.array([not db.player(p).frozen and (focus is None or p in focus)
                               for p in ids], bool)  # [N]
        self.inflight = np.zeros((len(ids), len(ids)))  # [N, N]
        self.next_k: dict[tuple[int, int], int] = {}  # next game number per pair
        self.index = {p: i for i, p in enumerate(ids)}
        self.dispatched = len(stored)  # max_matches counts the tournament's stored ones
        self.total: int | None = None
        self.already_stored = len(stored)
        self._refresh()
        self.mark = self.sigma.copy()  # [N] each σ when the current window began
        self.lowest = self.sigma.copy()  # [N] each σ's lowest in the current window
        self.played = np.zeros(len(ids), np.int64)  # [N] games in the current window
        self.in_window = 0  # matches done in the current window
        self.window = stall_window(len(ids))
        self.stalled: list[int] = []

    def reached(self) -> bool:
        """Whether every player rated here has its σ below ``until_sigma``."""
        assert self.config.until_sigma is not None
        self._refresh()
        return not bool(((self.sigma >= self.config.until_sigma) & self.rated).any())

    def _refresh(self) -> None:
        ratings = self.db.ratings()
        self.mu = np.array([ratings[p].mu for p in self.ids])  # [N]
        self.sigma = np.array([ratings[p].sigma for p in self.ids])  # [N]

    def next(self) -> MatchSpec | None:
        cfg = self.config
        assert cfg.until_sigma is not None
        need = (self.sigma >= cfg.until_sigma) & self.rated  # [N]
        if not need.any() or self.dispatched >= cfg.max_matches or len(self.ids) < 2:
            return None
        if self.stalled:
            return None
        allowed = need[:, None] | need[None, :]  # [N, N]
        np.fill_diagonal(allowed, False)
        quality = quality_matrix(self.mu, self.sigma, self.db.config)  # [N, N]
        allowed &= quality >= cfg.min_quality
        if not allowed.any():
            return None
        score = quality / (1.0 + self.inflight)
        score[~allowed] = -1.0
        i, j = np.unravel_index(int(np.argmax(score)), score.shape)
        a, b = sorted((self.ids[i], self.ids[j]))
        tid = cfg.tournament_id
        k = self.next_k.get((a, b), self.first_k)
        while match_key(tid, a, b, k) in self.stored:  # skip games stored by earlier runs
            k += 1
        self.next_k[(a, b)] = k + 1
        key = match_key(tid, a, b, k)
        self.inflight[i, j] += 1
        self.inflight[j, i] += 1
        self.dispatched += 1
        self.mine.add(key)
        return MatchSpec(key, a, b, lower_id_seat(a, b, k), match_seed(cfg.seed, key), k)

    def done(self, spec: MatchSpec) -> None:
        if spec.key in self.mine:
            self.mine.discard(spec.key)
            i, j = self.index[spec.a], self.index[spec.b]
            self.inflight[i, j] -= 1
            self.inflight[j, i] -= 1
        self._refresh()
        self._watch(spec)

    def _watch(self, spec: MatchSpec) -> None:
        """Count ``spec`` in the stall window; at its end, ``stalled`` names the players
        above the target if every one of them played and none fell at :data:`STALL_PACE`
        (a σ that dipped below the target counts as falling: near it, each game's drift
        lifts it back; a player the schedule left waiting is not stalled)."""
        self.played[[self.index[spec.a], self.index[spec.b]]] += 1
        np.minimum(self.lowest, self.sigma, out=self.lowest)
        self.in_window += 1
        if self.in_window < self.window:
            return
        target = self.config.until_sigma
        assert target is not None
        need = (self.sigma >= target) & self.rated  # [N]
        falling = ((self.lowest < target)
                   | (self.mark - self.lowest >= (self.mark - target) / STALL_PACE))  # [N]
        if need.any() and (self.played[need] > 0).all() and not (need & falling).any():
            self.stalled = [self.ids[i] for i in np.flatnonzero(need)]
        self.mark, self.lowest, self.in_window = self.sigma.copy(), self.sigma.copy(), 0
        self.played[:] = 0


class OpeningThenAdaptive:
    """A round robin of ``config.opening_games_per_pair`` games per pair, then
    :class:`Adaptive` pairings (which start once every opening match has been handed out)."""

    def __init__(self, db: LeagueDB, ids: Sequence[int], config: TournamentConfig,
                 stored: set[str], focus: set[int] | None = None) -> None:
        opening = config.opening_games_per_pair
        self.opening = RoundRobin(ids, config, stored, focus, games_per_pair=opening)
        self.adaptive = Adaptive(db, ids, config, stored, focus, first_k=opening)
        self.already_stored = len(stored)
        self.total: int | None = None
        self.max_matches = config.max_matches
        self.dispatched = len(stored)

    def next(self) -> MatchSpec | None:
        """The opening's next match, then adaptive ones; ``max_matches`` bounds both."""
        if self.dispatched >= self.max_matches:
            return None
        match = self.opening.next() or self.adaptive.next()
        self.dispatched += match is not None
        return match

    def done(self, spec: MatchSpec) -> None:
        self.adaptive.done(spec)

    def reached(self) -> bool:
        return self.adaptive.reached()


# --------------------------------------------------------------------------- entry point


class IncompatiblePlayer(Exception):
    """A player whose file is fine but does not fit this process (another network, say a
    snapshot of a run sharing the database): skipped here, not flagged as broken."""


def build_policies(db: LeagueDB, names: Sequence[str], factory: PolicyFactory
                   ) -> tuple[dict[int, Policy], list[str]]:
    """Policies of the players that load; the others are reported, flagged (unless merely
    :class:`IncompatiblePlayer`) and listed. Only a file's failures skip a player (missing,
    unreadable, corrupt, another network): any other error is a fault of the code loading
    it, raised rather than recorded in the database as the player's."""
    policies: dict[int, Policy] = {}
    skipped: list[str] = []
    for name in names:
        player = db.player(name)
        try:
            policies[player.id] = factory(name)
        except (CheckpointError, OSError, IncompatiblePlayer) as exc:  # its file, not the code
            if player.kind == "bot":  # no file to be broken: the input is wrong
                raise
            # one line, whole (a newline in a file's name, escaped, does not cut it short)
            reason = visible(str(exc).strip())[:300] or type(exc).__name__
            print(f"warning: skipping player {name!r}: {reason}", file=sys.stderr)
            if not isinstance(exc, IncompatiblePlayer):
                db.mark_broken(player.id, reason)
            skipped.append(name)
            continue
        if player.broken is not None:
            db.mark_broken(player.id, None)
    return policies, skipped


def run_tournament(db: LeagueDB, players: Sequence[str], policy_factory: PolicyFactory,
                   game_factory: GameFactory, config: TournamentConfig,
                   focus: Sequence[str] | None = None,
                   progress: Callable[[int, int | None], None] | None = None,
                   runner: RunnerFactory | None = None) -> TournamentSummary:
    """Play (or finish) a tournament between registered ``players`` (names in ``db``).

    With ``focus`` (a gauntlet, e.g. a new snapshot against a reference pool) only pairs
    involving a focus player are played, and in adaptive mode only their σ must shrink.
    ``progress(done, total)`` is called after every recorded match (``total`` is ``None`` in
    adaptive mode). ``runner`` replaces the default :class:`VecGameRunner` (e.g. for engines
    whose scripted bots are not seats); ``game_factory`` is then unused.
    """
    if len(set(players)) != len(players):
        raise LeagueError("each player may appear only once in a tournament")
    if config.num_envs < 1 or config.games_per_pair < 0:
        raise LeagueError("num_envs must be >= 1 and games_per_pair >= 0")
    if config.opening_games_per_pair < 0:
        raise LeagueError("opening_games_per_pair must be >= 0")
    if not 0.0 <= config.min_quality < 1.0:
        raise LeagueError(f"min_quality must be in [0, 1), got {config.min_quality}")
    policies, skipped = build_policies(db, players, policy_factory)
    ids = sorted(policies)
    tid = config.tournament_id
    stored = db.match_keys(tid + "/")
    focus_ids = None if focus is None else {db.player(name).id for name in focus}
    schedule: RoundRobin | Adaptive | OpeningThenAdaptive
    if config.until_sigma is None:
        schedule = RoundRobin(ids, config, stored, focus_ids)
    elif config.opening_games_per_pair:
        schedule = OpeningThenAdaptive(db, ids, config, stored, focus_ids)
    else:
        schedule = Adaptive(db, ids, config, stored, focus_ids)
    summary = TournamentSummary(tid, already_stored=schedule.already_stored,
                                skipped_players=skipped)

    def on_result(match: MatchSpec, result: MatchResult) -> None:
        if db.record_match(match.a, match.b, result.outcome, key=match.key,
                           side_a=match.side_a, map=config.map, seed=match.seed,
                           length=result.length, duration=result.duration) is not None:
            summary.played += 1
        schedule.done(match)
        if progress is not None:
            progress(summary.played, schedule.total)

    if len(ids) >= 2:
        play = (runner(policies) if runner is not None
                else VecGameRunner(game_factory, policies, config.num_envs, config.seed))
        play.run(schedule.next, on_result)
    if not isinstance(schedule, RoundRobin):
        summary.sigma_reached = schedule.reached()
        adaptive = schedule.adaptive if isinstance(schedule, OpeningThenAdaptive) else schedule
        if not summary.sigma_reached:
            summary.stalled_players = [db.player(p).name for p in adaptive.stalled]
    return summary


def bot_tournament(db: LeagueDB, game: str, bots: Sequence[str], config: TournamentConfig,
                   max_steps: int | None = None, parallel: int | None = None,
                   progress: Callable[[int, int | None], None] | None = None,
                   processes: int = 1) -> TournamentSummary:
    """Register ``bots`` of ``game``'s family (league players of kind ``bot``, canonical
    names) and play (or finish) their tournament, ``parallel`` (default ``config.num_envs``)
    games at once, or with ``processes`` > 1 one game at a time in each of that many worker
    processes (families whose bots play inside the engine). The map and game length default
    to the family's for bot tournaments."""
    family = family_of(game)
    game = resolve(game).name
    names = [family.match_setup(game, bot, 1, config.seed).opponent_name or bot for bot in bots]
    defaults = family.match_defaults({}, bots_only=True)
    map_name = config.map or defaults.map_name or ""
    if map_name:
        map_name = family.canonical_map(game, map_name)
    if config.map != map_name:
        config = replace(config, map=map_name)
    for name in names:
        db.add_player(name, "bot")
    conditions = MatchConditions(num_envs=parallel or config.num_envs, seed=config.seed,
                                 map_name=map_name or None,
                                 max_steps=max_steps or defaults.max_steps, processes=processes)

    game_factory = family.match_games(game, {}, map_name or None)

    def runner(policies: Mapping[int, Policy]) -> MatchRunner:
        return family.match_runner(game, policies, conditions, game_factory)

    return run_tournament(db, names, lambda name: family.opponent(game, name, config.seed),
                          game_factory, config, progress=progress, runner=runner)
