"""Starting and resuming training runs (what ``selfplay train`` does)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from games.core import HasOpponentNames, HasRewardComponents
from games.registry import make_game
from selfplay.checkpoint import resolve_checkpoint
from selfplay.component_returns import ComponentReturns
from selfplay.config import TrainConfig
from selfplay.league_training import attach, describe
from selfplay.opponent_stats import OpponentWinRates
from selfplay.ppo import Trainer
from selfplay.run_dirs import new_run, same_run, saved_config
from selfplay.run_loop import load_resumable
from selfplay.tracking import MetricSink, Progress, RunDir


def build_trainer(config: TrainConfig, run: RunDir | None,
                  init_from: Path | None = None) -> Trainer:
    """A trainer of ``config`` on a new game; its network taken from checkpoint ``init_from``
    when given (:meth:`Trainer.start_from`)."""
    game = make_game(config.game.name, num_envs=config.game.num_envs, seed=config.seed,
                     options=config.game.options)
    try:
        trainer = Trainer(config, game, run)
        if init_from is not None:
            trainer.start_from(init_from)
        return trainer
    except BaseException:
        game.close()
        raise


def run_training(config: TrainConfig | None, run_dir: Path | None = None,
                 resume: Path | None = None, total_steps: int | None = None) -> dict[str, Any]:
    """Train a new run (``config``) or continue ``resume`` (``config`` None: its saved one;
    ``total_steps`` replaces its ``total_steps``); returns a summary.

    A ``run_dir`` that already holds checkpoints of a run with the same config is resumed
    (running the same command again after a crash or a kill continues the run); one with
    another config is refused, naming the settings that differ.

    A new run with ``config.init_from`` starts from that checkpoint's network (a run directory
    means its newest checkpoint, and that file's absolute path is what the saved config
    records); a resumed run continues from its own checkpoint and never loads ``init_from``
    again. The same command run again resumes its run even when the ``init_from`` run
    directory has saved newer checkpoints since (see :func:`selfplay.run_dirs.same_run`).
    """
    if resume is None and run_dir is not None:
        assert config is not None, "a new run needs its config"
        same = same_run(Path(run_dir), config)
        if same is not None:
            return run_training(config, resume=same)
    if resume is None and config is not None and config.init_from is not None:
        config = replace(config,
                         init_from=str(resolve_checkpoint(config.init_from).resolve()))
    if resume is not None:
        run = RunDir(resume)
        config = saved_config(run, config)
        if total_steps is not None:
            config = replace(config, total_steps=total_steps)
        state, path = load_resumable(run)
        trainer = build_trainer(config, run)
        exact = trainer.load_state_dict(state)
        note = "" if exact else " (this game cannot restore its episodes: new episodes start)"
        print(f"resuming {run.path} from {path.name} at step {trainer.global_step}{note}",
              file=sys.stderr)
    else:
        assert config is not None, "a new run needs its config"
        run, created = new_run(config, run_dir)
        try:
            trainer = build_trainer(config, run, None if config.init_from is None
                                    else Path(config.init_from))
        except BaseException:
            if created:  # a bad game option, say: leave no empty run behind
                shutil.rmtree(run.path, ignore_errors=True)
            raise
    run.write_config(config)
    league = attach(trainer, run.path)
    try:
        game = trainer.game
        if isinstance(game, HasOpponentNames):
            # games mixing opponents: win rate per opponent in the logs, each game credited
            # to the opponent it was played against (read live: envs change opponents)
            per_opponent = OpponentWinRates(game.ended_opponent_names)
            trainer.add_episode_listener(per_opponent.add)
            trainer.add_update_hook(per_opponent.metrics)
        if isinstance(game, HasRewardComponents):  # reward terms logged one by one
            components = ComponentReturns(list(game.reward_component_names),
                                          config.log.return_window)
            trainer.add_episode_listener(
                lambda stats: components.add(stats, game.episode_reward_components()))
            trainer.add_update_hook(components.metrics)
        sink = MetricSink(run, config, resume_step=trainer.global_step)
        progress = Progress(trainer.num_updates * trainer.steps_per_update, trainer.global_step,
                            config.log.progress, config.game.name)
    except BaseException:  # the rater process (resubmitted tournaments) stops with us
        if league is not None:
            league.close()
        raise
    league_info: dict[str, Any] = {}
    try:
        trainer.train(sink, progress)
        if league is not None:  # the rater's last tournaments: every snapshot ends up rated
            league_info.update(league.finish())
        league_info.update(describe(league))
    finally:
        progress.close()
        sink.close()
        trainer.game.close()
        if league is not None:
            league.close()
    summary: dict[str, Any] = {"run_dir": str(run.path), "global_step": trainer.global_step,
                               "updates": trainer.update}
    summary.update(trainer.episodes.summary())
    summary.update(league_info)
    return summary
