"""Starting and resuming behaviour-cloning runs (what ``selfplay bc`` does).

A cloning run is laid out, logged, checkpointed, interrupted and resumed as a training run
(:mod:`selfplay.train`, :mod:`selfplay.run_dirs`); its teachers are settings (``bc.teachers``
or ``bc.replays``, ``bc.imitate``, ``bc.winners_only``), so its saved config describes it.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from games.core import SupportsReplayPosition
from games.family import Teachers
from games.registry import family_of
from selfplay.bc_config import BCConfig
from selfplay.clone_league import CloneLeague
from selfplay.cloning import Cloner
from selfplay.config import ConfigError, TrainConfig
from selfplay.run_dirs import making_run, open_run, release_run
from selfplay.run_loop import load_resumable
from selfplay.tracking import MetricSink, Progress, RunDir

VALIDATION_SEED_OFFSET = 10_007
"""Live teachers: the validation games' seed is the run's plus this."""


def teachers_of(bc: BCConfig, held_out: bool = False) -> Teachers:
    """The :class:`Teachers` that ``bc`` names (``held_out``: the validation share)."""
    return Teachers(bots=tuple(bc.teachers),
                    replays=Path(bc.replays) if bc.replays is not None else None,
                    imitate=tuple(bc.imitate), winners_only=bc.winners_only,
                    held_out=held_out, validation_share=bc.validation_share)


def build_cloner(config: TrainConfig, run: RunDir | None, init_from: Path | None = None
                 ) -> Cloner:
    """A :class:`Cloner` of ``config`` on new teacher games (and validation games), its
    network taken from checkpoint ``init_from`` when given (:meth:`Cloner.start_from`)."""
    bc, name = config.bc, config.game.name
    if not bc.teachers and bc.replays is None:
        raise ConfigError("name the teachers: --teachers a,b (the game's scripted players, "
                          "bc.teachers) or --replays DIR (recorded games, bc.replays)")
    if bc.replays is not None and not Path(bc.replays).is_dir():
        raise ConfigError(f"bc.replays: {bc.replays} is a file, not a folder of replays"
                          if Path(bc.replays).exists() else
                          f"bc.replays: no such folder {bc.replays}")
    family = family_of(name)
    teachers = teachers_of(bc)
    game = family.teacher_game(name, teachers, bc.num_envs, config.seed, config.game.options)
    validation = None
    try:
        seed = config.seed + (0 if bc.replays is not None else VALIDATION_SEED_OFFSET)
        if bc.validate_every > 0:
            validation = family.teacher_game(name, replace(teachers, held_out=True),
                                             bc.num_envs, seed, config.game.options)
        cloner = Cloner(config, game, validation, seed, run)
        if init_from is not None:
            cloner.start_from(init_from)
        return cloner
    except BaseException:
        game.close()
        if validation is not None:
            validation.close()
        raise


def run_cloning(config: TrainConfig | None, run_dir: Path | None = None,
                resume: Path | None = None, total_steps: int | None = None,
                progress_bar: bool | None = None) -> dict[str, Any]:
    """Clone into a new run (``config``) or continue ``resume`` (``total_steps`` replaces its
    ``bc.total_steps``, ``progress_bar`` its progress bar setting); returns a summary. A
    ``run_dir`` that holds this run already is resumed; one holding another is refused (see
    :func:`selfplay.run_dirs.same_run`)."""
    opening = open_run(config, run_dir, resume, total_steps, progress_bar, cloning=True,
                       load=load_resumable)
    config, rewrite = opening.config, opening.rewrite_config
    run_dir = opening.folder or run_dir  # a run stopped before its first checkpoint: anew
    if opening.run is not None:
        assert opening.state is not None and opening.checkpoint is not None
        run = opening.run
        try:
            cloner = build_cloner(config, run)
        except BaseException:  # a resumed run that cannot start: its folder is free again
            release_run(run.path)
            raise
        try:
            exact = cloner.load_state_dict(opening.state)
        except BaseException:
            cloner.close()
            release_run(run.path)
            raise
        note = ("" if exact else
                " (the replays go on where they were: the games in progress start again, "
                "without labels for their steps already learned)"
                if isinstance(cloner.game, SupportsReplayPosition) else
                " (its teacher games cannot be restored: new games start)")
        print(f"resuming {run.path} from {opening.checkpoint.name} at step "
              f"{cloner.global_step}{note}", file=sys.stderr)
    else:
        with making_run(config, run_dir) as (run, _):
            cloner = build_cloner(config, run, None if config.init_from is None
                                  else Path(config.init_from))
    try:
        if rewrite:  # a new run's, or a resumed run's given more steps; otherwise never changed
            run.write_config(config)
        if config.bc.snapshot_every > 0:  # after the counters are restored: resumes see them
            cloner.league = CloneLeague(cloner, run.path, config.league,
                                        config.bc.snapshot_every)
        sink = MetricSink(run, config, resume_step=cloner.global_step)
        if cloner.league is not None:
            cloner.league.log_ratings_to(sink)
    except BaseException:
        cloner.close()
        release_run(run.path)
        raise
    progress = Progress(cloner.num_updates * cloner.steps_per_update, cloner.global_step,
                        config.log.progress, f"bc {config.game.name}")
    league_info: dict[str, Any] = {}
    try:
        cloner.train(sink, progress)
        if cloner.league is not None:  # the rater's last tournaments: every snapshot rated
            league_info.update(cloner.league.finish())
            league_info.update(cloner.league.describe())
    finally:
        progress.close()
        sink.close()
        cloner.close()
        release_run(run.path)
    summary: dict[str, Any] = {"run_dir": str(run.path), "global_step": cloner.global_step,
                               "updates": cloner.update, **league_info}
    summary.update({key: value for key, value in cloner.last_metrics.items()
                    if key.startswith(("bc/accuracy/", "val/", "loss/bc_"))})
    return summary
