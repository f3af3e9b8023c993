"""The league: ratings, the league database, matchmaking, snapshots, tournaments, reports.

Modules (import them directly; only :mod:`league.snapshots` imports torch):
:mod:`league.ratings` (TrueSkill and Elo as pure functions), :mod:`league.db` (the SQLite
league database), :mod:`league.matchmaking` (PFSP and exploiter roles), :mod:`league.snapshots`
(the snapshot store), :mod:`league.tournament` (round-robin and TrueSkill-adaptive tournaments
in any two-seat game) and :mod:`league.report` (a self-contained HTML report).
"""
