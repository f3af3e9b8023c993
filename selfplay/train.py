"""Starting and resuming training runs (what ``selfplay train`` does).

Under ``torchrun --nproc-per-node N`` every process runs :func:`run_training` as one rank of a
data-parallel run (:mod:`selfplay.data_parallel`): each steps its share of the envs, rank 0
writes the config, checkpoints, metrics and progress.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from games.core import GameError, HasLostWorkers, HasOpponentNames, HasRewardComponents
from selfplay.acting import StepListener
from selfplay.checkpoint import list_checkpoints
from selfplay.component_returns import ComponentReturns
from selfplay.config import TrainConfig
from selfplay.data_parallel import (
    RankLost,
    Ranks,
    join_ranks,
    lost_peer,
    lost_rank_line,
    world_from_environment,
)
from selfplay.league_training import attach, describe
from selfplay.opponent_stats import OpponentWinRates
from selfplay.ppo import Trainer
from selfplay.run_dirs import making_run, open_run, release_run
from selfplay.run_loop import load_resumable
from selfplay.tracking import MetricSink, Progress, RunDir
from selfplay.worker_backend import build_game, print_warnings


def build_trainer(config: TrainConfig, run: RunDir | None,
                  init_from: Path | None = None, ranks: Ranks | None = None) -> Trainer:
    """A trainer of ``config`` on a new game (this rank's share of the envs); its network
    taken from checkpoint ``init_from`` when given (:meth:`Trainer.start_from`)."""
    ranks = ranks if ranks is not None else Ranks()
    warnings: list[str] = []  # printed once the run starts, not before an error refusing it
    game = build_game(config, ranks.local_envs(config.game.num_envs), ranks.seed(config.seed),
                      warnings)
    try:
        trainer = Trainer(config, game, run, ranks)
        if init_from is not None:
            trainer.start_from(init_from)
        print_warnings(warnings)
        if config.distributed.backend == "ray" and isinstance(game, HasLostWorkers):
            # in the metrics (TensorBoard, metrics.jsonl) beside the warning on stderr
            trainer.add_update_hook(lambda: {
                "workers/lost": float(game.revivals),
                "workers/recollected_steps": float(trainer.actor.recollected)})
        return trainer
    except BaseException:
        game.close()
        raise


def run_training(config: TrainConfig | None, run_dir: Path | None = None,
                 resume: Path | None = None, total_steps: int | None = None,
                 progress_bar: bool | None = None) -> dict[str, Any]:
    """Train a new run (``config``) or continue ``resume`` (``config`` None: its saved one;
    ``total_steps`` replaces its ``total_steps``, ``progress_bar`` its progress bar setting);
    returns a summary. A resumed run's config.yaml must hold the settings of the checkpoint
    it continues from (:func:`selfplay.run_dirs.check_checkpoint_config`).

    A ``run_dir`` that already holds checkpoints of a run with the same config is resumed
    (running the same command again after a crash or a kill continues the run); one with
    another config is refused, naming the settings that differ.

    A new run with ``config.init_from`` starts from that checkpoint's network (a run directory
    means its newest checkpoint, and that file's absolute path is what the saved config
    records); a resumed run continues from its own checkpoint and never loads ``init_from``
    again. The same command run again resumes its run even when the ``init_from`` run
    directory has saved newer checkpoints since (see :func:`selfplay.run_dirs.same_run`).
    """
    opening = open_run(config, run_dir, resume, total_steps, progress_bar, cloning=False,
                       load=load_resumable)
    config, rewrite = opening.config, opening.rewrite_config
    run_dir = opening.folder or run_dir  # a run stopped before its first checkpoint: anew
    created: Path | None = None  # the folders a new run made
    try:
        ranks = join_ranks(config)
        if opening.run is not None:
            assert opening.state is not None and opening.checkpoint is not None
            run = opening.run
            trainer = build_trainer(config, run, ranks=ranks)
            exact = trainer.load_state_dict(opening.state)
            if ranks.is_main:
                print(f"resuming {run.path} from {opening.checkpoint.name} at step "
                      f"{trainer.global_step}{resume_note(opening.state, ranks.world, exact)}",
                      file=sys.stderr)
        else:
            if run_dir is None and ranks.world > 1:  # one time-stamped directory for all
                run_dir = Path(ranks.all_gather(str(RunDir.default_for(config).path))[0])
            with making_run(config, run_dir) as (run, created):
                trainer = build_trainer(config, run, None if config.init_from is None
                                        else Path(config.init_from), ranks)
    except BaseException as exc:  # a resumed run that cannot start: its folder is free again
        if opening.run is not None:
            release_run(opening.run.path)
        lost_while_starting(exc, f"it resumes from {opening.checkpoint}"
                            if opening.checkpoint is not None
                            else "nothing was trained: run the command again")
        raise
    failed = True
    try:
        summary = _train(trainer, config, run, rewrite, created, opening.run is None)
        failed = False
        return summary
    finally:
        ranks.close(failed)
        release_run(run.path)


def lost_while_starting(exc: BaseException, where: str) -> None:
    """Raise :class:`RankLost` if ``exc`` is a data-parallel run's collective failing because a
    rank was lost before training began (it was a torch traceback); ``where``: what to resume
    from."""
    rank, world, _ = world_from_environment()
    if world == 1 or not isinstance(exc, RuntimeError) or not lost_peer(exc):
        return
    raise RankLost(f"{lost_rank_line(rank, world, exc)} while the run started; {where}") \
        from exc


def keep_state(trainer: Trainer, name: str, part: ComponentReturns | OpponentWinRates) -> None:
    """Save ``part``'s windows with each checkpoint under ``name``, every rank's (each keeps
    windows of its own envs), restored from the one the run resumed from (the logged
    ``reward/*``, ``win_rate/*`` of a resumed run differed); a checkpoint saved before they
    were kept by rank held one process's windows among its extras (rank 0 takes them, and
    rank 0's of a run saved by another number of ranks)."""
    saved = trainer.restored_rank_extra.get(name)
    if saved is None and trainer.ranks.is_main:  # saved by one process before (rank 0's)
        saved = trainer.restored_extra.get(name)
    if saved is not None:
        part.load_state_dict(saved)
    trainer.add_rank_state(name, part.state_dict)


def resume_note(state: dict[str, Any], world: int, exact: bool) -> str:
    """What a resumed run could not take back from its checkpoint, for the "resuming" line."""
    saved = int(state.get("world", 1))
    if saved != world:
        return (f" (saved by {saved} rank(s), resumed by {world}: the weights, optimizer and "
                "counters continue, new episodes start)")
    return "" if exact else " (this game cannot restore its episodes: new episodes start)"


def _train(trainer: Trainer, config: TrainConfig, run: RunDir,
           write_config: bool = True, created: Path | None = None,
           new: bool = False) -> dict[str, Any]:
    """Attach the league and the metric hooks, train, close; the run's summary. The config is
    written for a new run and for a resumed one given another ``total_steps``; otherwise a
    run's config.yaml is never changed. ``created``: the folder made for this new run,
    removed if the run cannot start (a league setting the game refuses, say); a ``new`` run
    in a folder that was there (one holding a league database) takes the config.yaml it wrote
    there away again."""
    main = trainer.ranks.is_main
    league = None
    wrote_new_config = False  # a config.yaml this process put there (none was before)
    try:
        if main and write_config:
            wrote_new_config = new and not run.config_file.exists()
            run.write_config(config)
        league = attach(trainer, run.path)
        game = trainer.game
        if isinstance(game, HasOpponentNames):
            # games mixing opponents: win rate per opponent in the logs, each game credited
            # to the opponent it was played against (read live: envs change opponents)
            per_opponent = OpponentWinRates(lambda: game.ended_opponent_names)
            keep_state(trainer, "opponent_win_rates", per_opponent)
            trainer.add_episode_listener(StepListener(  # the names as the games ended
                lambda _: list(game.ended_opponent_names),
                lambda stats, names: per_opponent.add(stats, names)))
            trainer.add_update_hook(per_opponent.metrics, per_opponent.weights)
        if isinstance(game, HasRewardComponents):  # reward terms logged one by one
            components = ComponentReturns(list(game.reward_component_names),
                                          config.log.return_window)
            keep_state(trainer, "component_returns", components)
            trainer.add_episode_listener(StepListener(  # the components as the games ended
                lambda _: game.episode_reward_components().copy(), components.add))
            trainer.add_update_hook(components.metrics, components.weights)
        sink = MetricSink(run, config, resume_step=trainer.global_step) if main else None
        if league is not None and sink is not None:
            league.log_ratings_to(sink)
        progress = Progress(trainer.num_updates * trainer.steps_per_update, trainer.global_step,
                            config.log.progress and main, config.game.name)
    except BaseException as exc:  # the rater process (resubmitted tournaments) stops with us
        if league is not None:
            league.close()
        trainer.game.close()
        if created is not None and main:  # nothing trained: the new run leaves nothing
            shutil.rmtree(created, ignore_errors=True)
        elif wrote_new_config:  # a run restarted in place keeps the config.yaml it had
            run.config_file.unlink(missing_ok=True)
        lost_while_starting(exc, where_to_resume(run, trainer.update, trainer.ranks.world))
        raise
    league_info: dict[str, Any] = {}
    start_step, start_update = trainer.global_step, trainer.update  # > 0: a resumed run
    try:
        world = trainer.ranks.world
        try:
            trainer.train(sink, progress)
        except GameError as exc:  # a worker's engine error, or a worker lost for good
            raise GameError(f"{exc}; {where_to_resume(run, trainer.update, world)}") from exc
        except RuntimeError as exc:
            if world == 1 or not lost_peer(exc):
                raise
            raise RankLost(f"{lost_rank_line(trainer.ranks.rank, world, exc)}; "
                           f"{where_to_resume(run, trainer.update, world)}") from exc
        if league is not None:  # the rater's last tournaments: every snapshot ends up rated
            league_info.update(league.finish())
        league_info.update(describe(league))
    finally:
        progress.close()
        if sink is not None:
            sink.close()
        if league is not None:  # first: a Ray rater leaves before the workers' Ray does
            league.close()
        trainer.game.close()
    summary: dict[str, Any] = {"run_dir": str(run.path), "global_step": trainer.global_step,
                               "updates": trainer.update, "start_step": start_step,
                               "start_update": start_update}
    # the episodes and the update hooks' figures (win rates against each opponent, reward
    # components, the league's shares) as the last update logged them, over every rank (rank
    # 0's alone said 77.5 where the logged mean over the ranks was 79.95; one rank's summary
    # lacked the hooks' figures); the episodes so far where no update ran
    summary.update(trainer.ranks_episodes or trainer.episodes.summary())
    summary.update(league_info)
    return summary


def where_to_resume(run: RunDir, update: int, world: int = 1) -> str:
    """What a run of ``world`` ranks stopped during update ``update + 1`` leaves to resume
    from."""
    saved = list_checkpoints(run.checkpoints)
    if not saved:
        return f"the run stopped during update {update + 1}, before its first checkpoint"
    return (f"the run stopped during update {update + 1}; its last checkpoint is "
            f"{saved[-1]} (continue with: {resume_command(world)} --resume {run.path})")


def resume_command(world: int, command: str = "train") -> str:
    """The command that continues a run of ``world`` ranks exactly (as many ranks, laid out
    over as many machines as ``torchrun`` says this one's were: ``LOCAL_WORLD_SIZE``)."""
    if world == 1:
        return f"selfplay {command}"
    if "TORCHELASTIC_RUN_ID" not in os.environ:  # ranks started by hand, or by a scheduler
        return (f"start the {world} ranks again as before (WORLD_SIZE, RANK, MASTER_ADDR, "
                f"MASTER_PORT), each with selfplay {command}")
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world) or world)
    nodes = f"--nnodes {world // local} " if 0 < local < world else ""
    per_node = local if 0 < local < world else world
    return f"torchrun {nodes}--nproc-per-node {per_node} -m selfplay.cli {command}"
