"""Starting and resuming training runs (what ``selfplay train`` does)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from games.core import HasOpponentNames, HasRewardComponents
from games.options import to_mapping
from games.registry import make_game
from selfplay.checkpoint import CheckpointError, list_checkpoints
from selfplay.component_returns import ComponentReturns
from selfplay.config import TrainConfig, config_from_mapping, read_yaml
from selfplay.league_training import attach, describe
from selfplay.opponent_stats import OpponentWinRates
from selfplay.ppo import Trainer
from selfplay.run_loop import load_resumable
from selfplay.tracking import MetricSink, Progress, RunDir


def build_trainer(config: TrainConfig, run: RunDir | None) -> Trainer:
    game = make_game(config.game.name, num_envs=config.game.num_envs, seed=config.seed,
                     options=config.game.options)
    try:
        return Trainer(config, game, run)
    except BaseException:
        game.close()
        raise


# settings that do not change what a run computes: a re-run may differ in them
_COSMETIC = frozenset({"log.progress", "log.tensorboard"})


def config_differences(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (cosmetic settings ignored)."""
    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                out.update(flat(item, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: value}

    a, b = flat(to_mapping(saved)), flat(to_mapping(new))
    return sorted(k for k in a.keys() | b.keys() if k not in _COSMETIC and a.get(k) != b.get(k))


def _holds_checkpoints(run: RunDir) -> bool:
    """Whether ``run`` holds a finished checkpoint (a temporary file left by a save that was
    killed half-way does not count)."""
    return bool(list_checkpoints(run.checkpoints))


def run_training(config: TrainConfig, run_dir: Path | None = None,
                 resume: Path | None = None, total_steps: int | None = None) -> dict[str, Any]:
    """Train a new run (``config``) or continue ``resume``; returns a summary.

    A ``run_dir`` that already holds checkpoints of a run with the same config is resumed
    (running the same command again after a crash or a kill continues the run); one with
    another config is refused, naming the settings that differ.
    """
    if resume is None and run_dir is not None and _holds_checkpoints(RunDir(run_dir)):
        run = RunDir(run_dir)
        if not run.config_file.is_file():
            raise FileExistsError(f"{run.path} holds checkpoints but no config.yaml, so it "
                                  "cannot be resumed; pick another --run-dir")
        assert config is not None, "a new run needs its config"
        differ = config_differences(config_from_mapping(read_yaml(run.config_file)), config)
        if differ:
            shown = ", ".join(differ[:6]) + (", ..." if len(differ) > 6 else "")
            raise FileExistsError(f"{run.path} already holds a run with other settings "
                                  f"({shown}); use --resume {run.path} to continue it with its "
                                  "saved config, or pick another --run-dir")
        print(f"{run.path} already holds this run (same settings): resuming it",
              file=sys.stderr)
        return run_training(config, resume=run.path)
    if resume is not None:
        run = RunDir(resume)
        if not run.config_file.is_file():
            raise CheckpointError(f"{run.path} is not a selfplay run directory (no config.yaml, "
                                  "no checkpoint); nothing to resume")
        saved_config = config_from_mapping(read_yaml(run.config_file))
        if config is not None:  # the same settings, re-run: keep this call's cosmetic ones
            saved_config.log.progress = config.log.progress
        config = saved_config
        if total_steps is not None:
            config.total_steps = total_steps
        state, path = load_resumable(run)
        trainer = build_trainer(config, run)
        exact = trainer.load_state_dict(state)
        note = "" if exact else " (this game cannot restore its episodes: new episodes start)"
        print(f"resuming {run.path} from {path.name} at step {trainer.global_step}{note}",
              file=sys.stderr)
    else:
        run = RunDir(run_dir) if run_dir is not None else RunDir.default_for(config)
        if _holds_checkpoints(run):  # a default (time-stamped) directory already taken
            raise FileExistsError(f"{run.path} already holds a run; use --resume {run.path} "
                                  "to continue it or pick another --run-dir")
        created = not run.path.exists()
        run.path.mkdir(parents=True, exist_ok=True)
        try:
            trainer = build_trainer(config, run)
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
