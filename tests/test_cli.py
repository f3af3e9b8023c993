"""The `selfplay` command as users run it: one subprocess per subcommand and error path."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

SELFPLAY = [sys.executable, "-m", "selfplay.cli"]
QUIET = ["--no-progress", "--set", "log.tensorboard=false"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SELFPLAY, *args], capture_output=True, text=True, timeout=timeout)


def run_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``selfplay ARGS`` in this process (no interpreter start-up: for the many quick error
    checks), as :func:`run` reports it; an exception escaping ``main`` fails the test."""
    from selfplay.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(["selfplay", *args], code, out.getvalue(),
                                       err.getvalue())


def assert_one_line_error(proc: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert pattern in lines[0], lines[0]


def test_help_lists_every_subcommand() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for name in ("train", "eval", "play", "league", "bc"):
        assert name in proc.stdout


def test_bc_clones_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "bc"
    proc = run("bc", "--game", "tictactoe", "--teachers", "win_or_block,random", "--imitate",
               "win_or_block", "--total-steps", "2048", "--run-dir", str(run_dir), "--json",
               "--set", "bc.validate_every=2", *QUIET)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["global_step"] == 2048 and "val/accuracy/action" in summary
    proc = run_here("bc", "--resume", str(run_dir), "--total-steps", "3072", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["global_step"] == 3072
    assert "resuming" in proc.stderr
    assert_one_line_error(run_here("bc", "--resume", str(run_dir), "--init-from", str(run_dir)),
                          "--init-from starts a new run from a checkpoint's network and "
                          "--resume continues")
    assert_one_line_error(run_here("train", "--resume", str(run_dir)),
                          f"{run_dir} is a behaviour-cloning run: continue it with selfplay bc "
                          "--resume")
    config = (run_dir / "config.yaml").read_bytes()
    assert_one_line_error(run_here("bc", "--game", "tictactoe", "--teachers", "random",
                                   "--run-dir", str(run_dir / "config.yaml"), *QUIET),
                          f"--run-dir {run_dir / 'config.yaml'} is a file, not a folder")
    assert_one_line_error(run_here("bc", "--resume", str(run_dir), "--run-dir",
                                   str(tmp_path / "x")), "give one of them")
    assert (run_dir / "config.yaml").read_bytes() == config


def test_bc_resume_of_a_train_run_names_the_command(trained_run: Path) -> None:
    assert_one_line_error(run_here("bc", "--resume", str(trained_run)),
                          f"{trained_run} is a selfplay train run, not a cloning run: continue "
                          "it with selfplay train --resume")


def test_bc_ctrl_c_checkpoints_then_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "bc"
    proc = subprocess.Popen([*SELFPLAY, "bc", "--game", "tictactoe", "--teachers", "random",
                             "--total-steps", "100000000", "--run-dir", str(run_dir), *QUIET],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 60
    while not (run_dir / "metrics.jsonl").exists() or not (run_dir / "metrics.jsonl").read_text():
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "checkpoint saved" in err
    assert f"continue with: selfplay bc --resume {run_dir}" in err
    resumed = run("bc", "--resume", str(run_dir), "--total-steps", "1", "--json")
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--teachers", "random", "--winners-only"], "error: winners_only needs replays"),
    (["--teachers", "minimax"], "error: unknown tictactoe bot 'minimax'"),
    (["--teachers", "random", "--imitate", "win_or_block"], "error: imitate names"),
    ([], "error: name the teachers"),
    (["--teachers", "random", "--replays", "x"], "error: --teachers (live scripted players) "
                                                 "and --replays"),
    (["--teachers", "random", "--init-from", "no/such/run"],
     "error: init_from: no such checkpoint: no/such/run"),
    (["--teachers", "random", "--set", "bc.student_share=2"],
     "error: bc.student_share must be between 0 and 1, got 2"),
    # guards: --imitate , imitated everyone; a huge validation ate 18 GB and would not stop;
    # a game too large for memory was numpy's traceback
    (["--teachers", "random", "--imitate", ","], "error: --imitate ',' names no player"),
    (["--teachers", "random", "--set", "game.num_envs=2"],
     "error: selfplay bc plays bc.num_envs games at once"),
    (["--teachers", "random", "--set", "bc.validation_steps=1000000000000"],
     "error: validation on bc.validation_steps=1000000000000 steps of 16 games needs"),
    (["--teachers", "random", "--set", "bc.num_envs=10000000000"],
     "error: bc.num_envs must be <= 1,048,576, got 10000000000"),
])
def test_bc_bad_input_errors(tmp_path: Path, args: list[str], message: str) -> None:
    assert_one_line_error(run_here("bc", "--game", "tictactoe", *args, "--run-dir",
                              str(tmp_path / "run"), *QUIET), message)
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("cli") / "run"
    proc = run("train", "--game", "CartPole-v1", "--total-steps", "4096", "--run-dir",
               str(run_dir), "--json", "--set", "checkpoint.every_updates=2", *QUIET)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["global_step"] == 4096 and summary["run_dir"] == str(run_dir)
    return run_dir


def test_train_writes_run_dir(trained_run: Path) -> None:
    assert (trained_run / "config.yaml").is_file()
    assert "CartPole-v1" in (trained_run / "config.yaml").read_text()
    assert list((trained_run / "checkpoints").glob("update_*.pt"))
    lines = (trained_run / "metrics.jsonl").read_text().splitlines()
    assert "loss/approx_kl" in json.loads(lines[-1])


def test_train_with_tensorboard(tmp_path: Path) -> None:
    proc = run("train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
               str(tmp_path / "tb"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "tb" / "tb").glob("events.out.tfevents.*"))


def test_eval_json(trained_run: Path) -> None:
    ckpt = sorted((trained_run / "checkpoints").glob("update_*.pt"))[-1]
    proc = run_here("eval", "--checkpoint", str(ckpt), "--episodes", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    assert {"mean_return", "std_return"} <= set(result) and result["against_itself"] is False


def test_eval_max_steps_and_progress(trained_run: Path) -> None:
    """``eval --max-steps`` cuts each episode; without ``--json`` the episodes finished are
    counted on stderr (a long game looked hung); ``--max-steps 0`` is one line."""
    ckpt = sorted((trained_run / "checkpoints").glob("update_*.pt"))[-1]
    proc = run_here("eval", "--checkpoint", str(ckpt), "--episodes", "3", "--max-steps", "4")
    assert proc.returncode == 0, proc.stderr
    assert "  1/3 episodes" in proc.stderr and "  3/3 episodes" in proc.stderr
    proc = run_here("eval", "--checkpoint", str(ckpt), "--episodes", "2", "--max-steps", "4",
                    "--json")
    assert max(json.loads(proc.stdout)["returns"]) <= 4.0 and "episodes" not in proc.stderr
    assert_one_line_error(run_here("eval", "--checkpoint", str(ckpt), "--max-steps", "0"),
                          "--max-steps must be >= 1, got 0")


def test_eval_takes_a_run_directory(trained_run: Path, tmp_path: Path) -> None:
    """``eval --checkpoint RUN_DIR``: the run's newest checkpoint, named on stderr."""
    newest = sorted((trained_run / "checkpoints").glob("update_*.pt"))[-1]
    proc = run_here("eval", "--checkpoint", str(trained_run), "--episodes", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["checkpoint"] == str(newest)
    assert f"using {newest}" in proc.stderr
    assert_one_line_error(run_here("eval", "--checkpoint", str(tmp_path)), "holds no checkpoint")


def test_eval_video(trained_run: Path, tmp_path: Path) -> None:
    ckpt = sorted((trained_run / "checkpoints").glob("update_*.pt"))[-1]
    video = tmp_path / "out.mp4"
    proc = run("eval", "--checkpoint", str(ckpt), "--episodes", "1", "--video", str(video))
    assert proc.returncode == 0, proc.stderr
    assert video.is_file() and video.stat().st_size > 1000


def test_resume_continues(trained_run: Path) -> None:
    proc = run_here("train", "--resume", str(trained_run), "--total-steps", "6144", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["global_step"] == 6144
    assert "resuming" in proc.stderr


def test_same_command_again_resumes_other_settings_refused(tmp_path: Path) -> None:
    args = ["train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
            str(tmp_path / "run"), "--json", *QUIET]
    assert run(*args).returncode == 0
    again = run_here(*args[:4], "2048", *args[5:])
    assert_one_line_error(again, "already holds a run with other settings (total_steps 1024 "
                                 "-> 2048); use --resume")
    again = run_here(*args, "--set", "ppo.learning_rate=0.0007")
    assert_one_line_error(again, "other settings (ppo.learning_rate 0.001 -> 0.0007); use "
                                 f"--resume {tmp_path / 'run'} to continue it with its saved "
                                 f"config, or pick another --run-dir (--config "
                                 f"{tmp_path / 'run' / 'config.yaml'} starts one with its "
                                 "settings")
    same = run_here(*args)
    assert same.returncode == 0, same.stderr
    assert "already holds this run (same settings): resuming it" in same.stderr
    assert json.loads(same.stdout)["global_step"] == 1024


def test_resume_leaves_config_yaml_alone_and_refuses_one_edited_since(tmp_path: Path) -> None:
    """config.yaml is written when the run starts and again only when ``--total-steps`` gives
    it more steps; a negative count is refused before anything changes; a config.yaml edited
    or emptied since the checkpoint is a one-line error naming the keys, never a traceback or
    a run continued on other shapes."""
    run_dir = tmp_path / "run"
    args = ["train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
            str(run_dir), "--json", *QUIET]
    assert run(*args).returncode == 0
    config = run_dir / "config.yaml"
    written = config.read_bytes()
    os.utime(config, (1, 1))
    again = run_here("train", "--resume", str(run_dir), "--no-progress", "--json")
    assert again.returncode == 0, again.stderr
    assert config.read_bytes() == written and config.stat().st_mtime == 1
    assert_one_line_error(run_here("train", "--resume", str(run_dir), "--total-steps", "-5"),
                          "--total-steps must be >= 1, got -5")
    assert_one_line_error(run_here("train", "--resume", str(run_dir), "--total-steps",
                                   str(10**400)),  # an OverflowError in the update count
                          "--total-steps must be <= 4,611,686,018,427,387,904, got a number "
                          "of about 401 digits")
    assert_one_line_error(run_here("train", "--resume", str(run_dir), "--run-dir",
                                   str(tmp_path / "other")), "give one of them")
    assert config.read_bytes() == written and not (tmp_path / "other").exists()
    edited = yaml.safe_load(written)
    edited["ppo"]["num_steps"] = 32
    config.write_text(yaml.safe_dump(edited, sort_keys=False))
    assert_one_line_error(run_here("train", "--resume", str(run_dir), "--total-steps", "2048"),
                          f"{config} differs from the settings update_0000002.pt was saved "
                          "with (ppo.num_steps)")
    config.write_bytes(b"")
    assert_one_line_error(run_here("train", "--resume", str(run_dir)),
                          f"{config} is empty: the run's settings are lost")
    moved = yaml.safe_load(written)  # files the user moved may be named again
    moved["bc"]["replays"] = str(tmp_path / "replays-moved")
    config.write_text(yaml.safe_dump(moved, sort_keys=False))
    assert run_here("train", "--resume", str(run_dir), "--json").returncode == 0
    config.write_bytes(written)
    more = run_here("train", "--resume", str(run_dir), "--total-steps", "2048", "--json")
    assert more.returncode == 0, more.stderr
    assert json.loads(more.stdout)["global_step"] == 2048
    assert config.read_bytes() == written.replace(b"total_steps: 1024", b"total_steps: 2048")


def test_pruning_never_deletes_the_checkpoint_just_written(tmp_path: Path) -> None:
    """A corrupt newer checkpoint (skipped when resuming) must not count among the ``keep``
    newest: the checkpoints the resumed run writes survive and the run resumes again."""
    run_dir = tmp_path / "run"
    args = ["train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
            str(run_dir), "--json", "--set", "checkpoint.keep=1", "--set",
            "checkpoint.every_updates=1", *QUIET]
    assert run(*args).returncode == 0
    ckpts = run_dir / "checkpoints"
    assert [p.name for p in ckpts.glob("update_*.pt")] == ["update_0000002.pt"]
    (ckpts / "update_0000099.pt").write_bytes(b"")
    more = run_here("train", "--resume", str(run_dir), "--total-steps", "2048", "--json")
    assert more.returncode == 0, more.stderr
    assert "the file is empty; trying an older checkpoint" in more.stderr
    assert sorted(p.name for p in ckpts.glob("update_*.pt")) == [
        "update_0000004.pt", "update_0000099.pt"]
    (ckpts / "update_0000099.pt").unlink()
    last = run_here("train", "--resume", str(run_dir), "--total-steps", "3072", "--json")
    assert last.returncode == 0, last.stderr
    assert "from update_0000004.pt at step 2048" in last.stderr
    keep4 = tmp_path / "keep4"  # fewer than keep: every one kept
    assert run("train", "--game", "CartPole-v1", "--total-steps", "2048", "--run-dir",
               str(keep4), "--set", "checkpoint.keep=4", "--set", "checkpoint.every_updates=1",
               *QUIET).returncode == 0
    assert sorted(p.name for p in (keep4 / "checkpoints").glob("update_*.pt")) == [
        f"update_000000{k}.pt" for k in (1, 2, 3, 4)]
    # a corrupt checkpoint the resumed run passes (not one of its saves) is never counted
    # among the keep newest: it took the place of a loadable one, which was deleted
    keep2 = tmp_path / "keep2"
    args = ["train", "--game", "CartPole-v1", "--run-dir", str(keep2), "--set",
            "checkpoint.keep=2", "--set", "checkpoint.every_updates=2", *QUIET]
    assert run(*args, "--total-steps", "2048").returncode == 0
    (keep2 / "checkpoints" / "update_0000005.pt").write_bytes(b"")
    resumed = run_here("train", "--resume", str(keep2), "--total-steps", "3072")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(p.name for p in (keep2 / "checkpoints").glob("update_*.pt")) == [
        "update_0000004.pt", "update_0000006.pt"]


def test_new_run_never_replaces_the_users_files(tmp_path: Path) -> None:
    """``--run-dir`` naming a folder of the user's own files (the ``--config`` file itself,
    a metrics.jsonl) is refused before anything is written."""
    from league.db import LeagueDB
    from selfplay.config_files import build_config, config_to_yaml

    mine = tmp_path / "config.yaml"
    mine.write_text("base: classic\n")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--run-dir",
                                   str(tmp_path), *QUIET),
                          f"{tmp_path} is not a selfplay run directory but holds config.yaml")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--config", str(mine),
                                   "--run-dir", str(tmp_path), *QUIET),
                          f"--config {mine} is the config.yaml the run writes into --run-dir")
    assert mine.read_text() == "base: classic\n"
    copied = tmp_path / "copied"  # a saved config copied in as the settings file
    copied.mkdir()
    (copied / "config.yaml").write_text(config_to_yaml(build_config("CartPole-v1")))
    assert_one_line_error(run_here("bc", "--game", "CartPole-v1", "--teachers", "x", "--config",
                                   str(copied / "config.yaml"), "--run-dir", str(copied)),
                          "is the config.yaml the run writes into --run-dir")
    league_only = tmp_path / "league-only"  # a league made beforehand is opened, not replaced
    league_only.mkdir()
    with LeagueDB(league_only / "league.db", game="tictactoe"):
        pass
    trained = run_here("train", "--game", "tictactoe", "--total-steps", "256", "--run-dir",
                       str(league_only), *QUIET)
    assert trained.returncode == 0, trained.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.jsonl").write_text('{"mine": 1}\n')
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--run-dir", str(other),
                                   *QUIET), "holds metrics.jsonl, which a run would replace")
    assert (other / "metrics.jsonl").read_text() == '{"mine": 1}\n'
    assert sorted(p.name for p in other.iterdir()) == ["metrics.jsonl"]


def test_run_dir_with_only_a_half_written_checkpoint_starts_afresh(tmp_path: Path) -> None:
    """A run killed while writing its first checkpoint leaves a temporary file; the same
    command then starts the run (nothing to resume), instead of failing."""
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    (ckpts / ".update_0000001.pt.x1y2.tmp").write_bytes(b"half a checkpoint")
    args = ["train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
            str(tmp_path / "run"), "--json", *QUIET]
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["global_step"] == 1024


def test_bad_input_errors(tmp_path: Path) -> None:
    assert_one_line_error(run_here("train", "--game", "micrrts"), "unknown game 'micrrts'")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--set", "ppo.lr=1"),
                          "unknown key 'ppo.lr'")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--config",
                              str(tmp_path / "missing.yaml")), "config file not found")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    assert_one_line_error(run_here("eval", "--checkpoint", str(bad)),
                          f"{bad} is not a selfplay checkpoint (not a file torch.save writes)")
    assert_one_line_error(run_here("train", "--resume", str(tmp_path)), "nothing to resume")
    assert_one_line_error(run_here("record", "--game", "microrts", "--players", "WorkerRush",
                                   "--games", "2", "--out", str(tmp_path / "rec"), "--ray",
                                   "nohost"), "--ray must be local, auto or HOST:PORT")
    unreachable = tmp_path / "rec-unreachable"  # a cluster that refuses: no folder left
    assert_one_line_error(run_here("record", "--game", "microrts", "--players", "WorkerRush",
                                   "LightRush", "--games", "2", "--out", str(unreachable),
                                   "--ray", "127.0.0.1:1"),
                          "cannot reach the Ray cluster at 127.0.0.1:1")
    assert not unreachable.exists()
    recording = ("record", "--game", "microrts", "--players", "WorkerRush", "LightRush")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert_one_line_error(run_here(*recording, "--games", "2", "--out", str(afile)),
                          f"--out {afile} is a file")
    assert afile.read_text() == "mine"
    for flag, value in (("--games", "0"), ("--shard-games", "0"), ("--parallel", "0"),
                        ("--max-steps", "0")):  # --max-steps 0 recorded 2000-cycle games
        assert_one_line_error(run_here(*recording, "--games", "2", "--out",
                                       str(tmp_path / "rec"), flag, value), "must be >= 1")


def test_more_bad_input_errors(tmp_path: Path) -> None:
    """Inputs that once gave tracebacks, or were silently accepted and went wrong."""
    empty = tmp_path / "empty-section.yaml"
    empty.write_text("ppo:\n  # learning_rate: 3e-4\n")  # would drop the tuned settings
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--config", str(empty)),
                          "ppo must be a mapping of settings")
    assert_one_line_error(run_here("train", "--set", "game=3"), "game must be a mapping")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--set",
                              "ppo.max_grad_norm=-1"), "ppo.max_grad_norm must be > 0")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--seed", "-1"),
                          "--seed must be in 0..2**63-1, got -1")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--seed", str(2**70)),
                          f"--seed must be in 0..2**63-1, got {2**70}")
    assert_one_line_error(run_here("train", "--game", ""), "the game name is empty")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--config", str(binary)),
                          "error:")
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"x")
    assert_one_line_error(run_here("eval", "--checkpoint", str(ckpt), "--video",
                              str(tmp_path / "v.xyz")), "use a .mp4 or .gif file name")
    assert_one_line_error(run_here("eval", "--checkpoint", str(ckpt), "--video", str(tmp_path)),
                          "is a directory")
    assert_one_line_error(run_here("eval", "--checkpoint", str(ckpt), "--video",
                                   str(ckpt / "sub" / "v.gif")), f"{ckpt} is a file, not a folder")
    assert_one_line_error(run_here("eval", "--checkpoint", str(ckpt), "--video", "/proc/v.gif"),
                          "--video /proc/v.gif: cannot write to /proc")  # root may, /proc not
    bad_option = tmp_path / "bad-option-run"
    assert_one_line_error(run_here("train", "--game", "tictactoe", "--set",
                              "game.options.no_such_option=1", "--run-dir", str(bad_option)),
                          "no_such_option")
    assert not bad_option.exists()  # no empty run left behind
    assert_one_line_error(run_here("league", "tournament", "--game", "tictactoe", "--players",
                              "random", "win_or_block", "--until-sigma", "-1", "--db",
                              str(tmp_path / "l.db")), "--until-sigma must be in [0.8, 8.33)")
    assert run_here("league", "tournament", "--game", "tictactoe", "--players", "random",
               "win_or_block", "--games-per-pair", "2", "--db",
               str(tmp_path / "l.db")).returncode == 0
    assert_one_line_error(run_here("league", "tournament", "--game", "tictactoe", "--players",
                              "random", "win_or_block", "--processes", "2", "--db",
                              str(tmp_path / "p.db")),
                          "processes > 1 applies only to tournaments of engine bots")
    assert_one_line_error(run_here("league", "tournament", "--game", "tictactoe", "--players",
                              "random", "win_or_block", "--until-sigma", "2", "--min-quality",
                              "1.5", "--db", str(tmp_path / "q.db")), "--min-quality")
    opened = run_here("league", "tournament", "--game", "tictactoe", "--players", "random",
                 "win_or_block", "--games-per-pair", "4", "--until-sigma", "6", "--db",
                 str(tmp_path / "o.db"), "--json")  # a round robin opens the adaptive one
    assert opened.returncode == 0, opened.stderr
    result = json.loads(opened.stdout)
    assert result["tournament"].startswith("rr4+ts:") and result["played"] >= 4
    assert all(p["sigma"] < 6 for p in result["players"])
    assert_one_line_error(run_here("league", "report", "--db", str(tmp_path / "l.db"), "--out",
                              str(tmp_path)), "error:")


def test_network_and_game_mismatches_are_one_line_errors(tmp_path: Path) -> None:
    """A network setting the game cannot take is the user's error, before any run file."""
    run_dir = tmp_path / "no-state"
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--set",
                                   "network.critic_input=state", "--run-dir", str(run_dir)),
                          "CartPole-v1 has no global state")
    assert not run_dir.exists()
    assert_one_line_error(run_here("train", "--game", "CartPole-v1", "--set",
                                   "network.kind=nature_cnn", "--run-dir", str(run_dir)),
                          "'nature_cnn' needs image observations")
    assert_one_line_error(run_here("train", "--game", "tictactoe", "--set",
                                   "network.kind=gridnet", "--run-dir", str(run_dir)),
                          "needs per-cell grid actions")


def test_league_tournament_bad_game_options_with_checkpoint_players(tmp_path: Path) -> None:
    """A game option the game refuses is one line, not every checkpoint player skipped and
    flagged broken; a game length for a family without one is refused by name."""
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    db = tmp_path / "l.db"
    base = ["league", "tournament", "--game", "tictactoe", "--players", "random", str(corrupt),
            "win_or_block", "--games-per-pair", "2", "--db", str(db)]
    assert_one_line_error(run_here(*base, "--map", "x"), "has no maps")
    assert_one_line_error(run_here(*base, "--max-steps", "50"), "has no game length to set")
    proc = run_here(*base, "--json")  # the good command: the corrupt player skipped alone
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped_players"] == [str(corrupt)]


# SIGHUP takes the path SIGTERM takes, and Ctrl-C's is covered by `selfplay bc`'s
# (test_bc_ctrl_c_checkpoints_then_resumes) and the second signal's test: both run in
# `make bench` (the default suite's 8 minutes)
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                 signal.SIGTERM,
                                 pytest.param(signal.SIGHUP, marks=pytest.mark.slow)])
def test_signal_checkpoints_then_exits(tmp_path: Path, sig: signal.Signals) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*SELFPLAY, "train", "--game", "CartPole-v1", "--total-steps",
                             "100000000", "--run-dir", str(run_dir), *QUIET],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 60
    while not (run_dir / "metrics.jsonl").exists() or not (run_dir / "metrics.jsonl").read_text():
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "checkpoint saved" in err
    resumed = run("train", "--resume", str(run_dir), "--total-steps", "1", "--json")
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.slow  # ~11 s (make bench)
def test_train_with_wandb_offline(tmp_path: Path) -> None:
    proc = run("train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
               str(tmp_path / "wb"), "--no-progress", "--set", "log.wandb=true",
               "--set", "log.tensorboard=false")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb"))


def test_games_lists_registry() -> None:
    proc = run_here("games", "--json")
    assert proc.returncode == 0
    names = json.loads(proc.stdout)["games"]
    # a prefix family's games listed one by one (it printed "pettingzoo/<game>" only)
    assert {"CartPole-v1", "HalfCheetah-v5", "microrts", "atari/Pong", "atari/Breakout",
            "pettingzoo/pong_v3", "pettingzoo/boxing_v2"} <= set(names)
    assert not [name for name in names if "<" in name]
    from games.core import GameError
    from games.registry import resolve

    for name in names:  # each name listed is one a command takes
        assert resolve(name).name == name, name
    with pytest.raises(GameError, match=r"known: .*atari/<game>, pettingzoo/<game> \(a "):
        resolve("nosuchgame")  # a typo's error stays short: the families, not 144 games


def test_league_tournament_leaderboard_report(tmp_path: Path) -> None:
    db = tmp_path / "league.db"
    args = ["league", "tournament", "--game", "tictactoe", "--players", "random", "win_or_block",
            "--games-per-pair", "40", "--db", str(db), "--json"]
    first = run(*args)  # as users run it; the rest in this process
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["played"] == 40
    again = run_here(*args)  # re-running resumes: nothing new to play
    assert json.loads(again.stdout)["played"] == 0
    board = run_here("league", "leaderboard", "--db", str(tmp_path), "--json")  # its league.db
    players = json.loads(board.stdout)["players"]
    assert [p["name"] for p in players] == ["win_or_block", "random"]
    assert {"name", "mu", "sigma", "conservative", "elo", "games", "win_rate"} <= set(players[0])
    out = tmp_path / "report.html"
    assert run_here("league", "report", "--db", str(db), "--out", str(out)).returncode == 0
    assert "win_or_block" in out.read_text()
    assert_one_line_error(run_here("league", "leaderboard", "--db", str(tmp_path / "none.db")),
                          "no league database")
    assert_one_line_error(run_here("league", "tournament", "--game", "tictactoe", "--players",
                                   "random", "nobody", "--db", str(db)), "player 'nobody'")


def test_league_tournament_skips_missing_and_corrupt_checkpoints(tmp_path: Path) -> None:
    """Players whose checkpoint is missing or corrupt are reported and skipped; the others
    play, and the same command runs again."""
    db = tmp_path / "league.db"
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    (tmp_path / "empty-run").mkdir()
    args = ["league", "tournament", "--game", "tictactoe", "--players", "random",
            str(tmp_path / "missing.pt"), "win_or_block", str(corrupt), str(tmp_path / "empty-run"),
            "--games-per-pair", "10", "--db", str(db), "--json"]
    for played in (10, 0):
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["played"] == played
        assert sorted(result["skipped_players"]) == sorted(
            [str(tmp_path / "missing.pt"), str(corrupt), "empty-run/no-checkpoint"])
        warnings = [line for line in proc.stderr.splitlines() if "skipping player" in line]
        assert len(warnings) == 3, proc.stderr
        assert any("missing.pt" in w and "not found" in w for w in warnings), warnings
    board = json.loads(run("league", "leaderboard", "--db", str(db), "--json").stdout)
    assert {p["name"] for p in board["players"] if p["games"]} == {"random", "win_or_block"}


def test_league_bad_input_loses_nothing(tmp_path: Path) -> None:
    """League inputs that once gave tracebacks, exited 0 having played nothing, left a new
    database behind, or overwrote the database with a report."""
    db = tmp_path / "league.db"
    tour = ["league", "tournament", "--game", "tictactoe", "--db", str(db)]
    for extra, needle in ((["--players", "random", "Random"], "names random more than once"),
                          (["--players", "random", "nobody"], "player 'nobody'"),
                          (["--players", "random", "win_or_block", "--num-envs", "0"],
                           "--num-envs must be >= 1")):
        assert_one_line_error(run_here(*tour, *extra), needle)
        assert not db.exists()  # refused before the database was made
    empty = run_here(*tour[:-2], "--db", str(tmp_path / "e.db"), "--players", "random",
                     str(tmp_path / "typo.pt"))
    assert empty.returncode != 0 and "Traceback" not in empty.stderr  # why, then the error
    assert empty.stderr.strip().splitlines()[-1].startswith(
        "error: only 1 of the players load (skipped: ")
    from league.db import LeagueDB

    with LeagueDB(tmp_path / "e.db") as made:  # the players it registered go again
        assert made.players() == [] and made.match_count() == 0
    for extra, needle in (
            (["--elo-k", "1e6"], "--elo-k must be in (0, 400]"),  # was an OverflowError
            (["--elo-k", "inf"], "--elo-k must be in (0, 400]"),  # a database that never rates
            (["--max-steps", "0"], "--max-steps must be >= 1"),  # played default lengths
            (["--seed", "-1"], "--seed must be in 0..2**63-1"),  # marked the bots broken
            (["--until-sigma", "0.5"], "--until-sigma must be in [0.8, 8.33)"),  # 100k games
            (["--until-sigma", "nan"], "--until-sigma must be in [0.8, 8.33)"),  # none
            (["--max-steps", "9"], "tictactoe has no game length to set"),
            (["--map", "x"], "has no maps")):
        assert_one_line_error(run_here(*tour, "--players", "random", "win_or_block", *extra),
                              needle)
        assert not db.exists()
    assert run_here(*tour, "--players", "random", "win_or_block", "--games-per-pair", "2",
                    "--json").returncode == 0
    kept = db.read_bytes()
    for out, needle in ((db, "is the league database"), (tmp_path, "is a folder"),
                        (db / "r.html", "is a file, not a folder")):
        assert_one_line_error(run_here("league", "report", "--db", str(db), "--out",
                                       str(out)), needle)
    assert db.read_bytes() == kept
    out = tmp_path / "report.html"
    assert run_here("league", "report", "--db", str(db), "--out", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) & 0o044 == 0o044 & ~current_umask()
    fresh = tmp_path / "fresh.db"  # an empty league
    from league.db import LeagueDB

    LeagueDB(fresh, game="tictactoe").close()
    assert "no players yet" in run_here("league", "leaderboard", "--db", str(fresh)).stdout
    original = db.read_bytes()  # one page at a time damaged: the schema's or the data's
    failed = 0
    for page in range(1, len(original) // 4096):
        data = bytearray(original)
        data[page * 4096:(page + 1) * 4096] = b"\xff" * 4096
        damaged = tmp_path / f"damaged-{page}.db"
        damaged.write_bytes(bytes(data))
        proc = run_here("league", "leaderboard", "--db", str(damaged))
        if proc.returncode:
            assert_one_line_error(proc, f"{damaged}")
            assert "malformed" in proc.stderr
            failed += 1
    assert failed


def test_league_players_named_alike_and_oddly(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Two experiments' run folders of one name play each other (the second under its full
    path); a file named like a bot does not take the bot's name; a --db ending in / is a
    folder; names with a newline or a terminal escape reach the terminal escaped, and a
    broken file's stored reason is whole; a schedule too big to build is refused."""
    monkeypatch.chdir(tmp_path)
    proc = run_here("train", "--game", "tictactoe", "--total-steps", "256", "--run-dir",
                    "expA/run1", "--set", "league.enabled=false", *QUIET)
    assert proc.returncode == 0, proc.stderr
    shutil.copytree("expA", "expB")
    tour = ["league", "tournament", "--game", "tictactoe", "--games-per-pair", "2", "--json"]
    proc = run_here(*tour, "--players", "expA/run1", "expB/run1", "random", "--db", "new/")
    assert proc.returncode == 0, proc.stderr
    names = [p["name"] for p in json.loads(proc.stdout)["players"]]
    b_file = str((tmp_path / "expB/run1/checkpoints/update_0000001.pt").resolve())
    assert sorted(names) == sorted(["run1/update_0000001", b_file, "random"])
    assert (tmp_path / "new" / "league.db").is_file()
    shutil.copy("expA/run1/checkpoints/update_0000001.pt", "random")  # a file named "random"
    for players in (["random", "win_or_block"], ["./random", "win_or_block"]):
        proc = run_here(*tour, "--players", *players, "--db", "new")  # the file, as play --vs
        assert proc.returncode == 0, proc.stderr
        names = [p["name"] for p in json.loads(proc.stdout)["players"]]
        assert sorted(names) == [str(tmp_path / "random"), "win_or_block"]
    from league.db import LeagueDB

    with LeagueDB("new/league.db") as db:  # the bot keeps its name
        assert db.player("random").kind == "bot" and db.player("random").path is None
    Path("bad").mkdir()
    for odd in ("nl\nname.pt", "esc\x1b[31mRED.pt"):
        (tmp_path / "bad" / odd).write_bytes(b"garbage")
    proc = run_here(*tour[:-1], "--players", "bad/nl\nname.pt", "bad/esc\x1b[31mRED.pt",
                    "random", "win_or_block", "--db", "odd.db")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "skipped (missing or corrupt): bad/nl\\nname.pt, bad/esc\\x1b[31mRED.pt" in proc.stdout
    with LeagueDB("odd.db") as db:
        reason = db.player("bad/nl\nname.pt").broken
        assert reason == (f"{tmp_path}/bad/nl\\nname.pt is not a selfplay checkpoint (not a "
                          "file torch.save writes)")
    assert_one_line_error(run_here(*tour, "--players", "random", "win_or_block", "--db",
                                   "expA/run1/config.yaml/x.db"),
                          "expA/run1/config.yaml is a file, not a folder")
    assert_one_line_error(run_here(*tour[:-3], "--games-per-pair", "100000000", "--players",
                                   "random", "win_or_block", "--db", "big.db"),
                          "plans 100,000,000 matches; at most 1,000,000")
    assert not Path("big.db").exists()
    many = [f"p{k}.pt" for k in range(1500)]  # 1,124,250 pairs (missing files: skipped)
    for extra in (["--games-per-pair", "1"], ["--until-sigma", "2", "--games-per-pair", "1"]):
        assert_one_line_error(run_here(*tour[:-3], *extra, "--players", *many, "--db", "b.db"),
                              "plans 1,124,250 matches; at most 1,000,000")
    adaptive = run_here(*tour[:-3], "--until-sigma", "2", "--players", *many, "--db", "b.db")
    assert "only 0 of the players load" in adaptive.stderr  # not refused: no round robin
    proc = run_here("train", "--game", "tictactoe", "--total-steps", "256", "--run-dir", "r2",
                    "--set", "league.db=shared/", "--set", "league.snapshot_every=1", *QUIET)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "shared" / "league.db").is_file()  # the folder's, as --db shared/
    board = run_here("league", "leaderboard", "--db", "shared/", "--json")
    assert board.returncode == 0 and "r2@0000001" in board.stdout, board.stderr


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("where", [["--num-envs", "6"], ["--processes", "2"]])
def test_league_tournament_of_microrts_engine_bots(tmp_path: Path, where: list[str]) -> None:
    db = tmp_path / "bots.db"
    proc = run("league", "tournament", "--game", "microrts", "--players", "workerrush",
               "LightRush", "passive", "--map", "basesWorkers8x8", "--max-steps", "500",
               "--games-per-pair", "2", *where, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["played"] == 6
    assert [p["name"] for p in result["players"]][-1] == "Passive"


def test_league_tournament_elo_k(tmp_path: Path) -> None:
    """``--elo-k`` sets the K of a new database; an existing one keeps its own and refuses
    another, naming both values."""
    from league.db import LeagueDB

    db = tmp_path / "k.db"
    args = ["league", "tournament", "--game", "tictactoe", "--players", "random", "win_or_block",
            "--games-per-pair", "2", "--db", str(db), "--json"]
    assert_one_line_error(run_here(*args, "--elo-k", "0"), "--elo-k must be in (0, 400]")
    assert not db.exists()
    first = run(*args, "--elo-k", "16")
    assert first.returncode == 0, first.stderr
    with LeagueDB(db) as league:
        assert league.config.elo_k == 16
        assert league.replay_ratings() == league.ratings()
    assert_one_line_error(run_here(*args, "--elo-k", "32"), "elo_k 16 (this run asks for 32)")
    again = run_here(*args)  # no --elo-k: the database's own K, the tournament resumes
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["played"] == 0


def test_league_leaderboard_and_report_without_db_or_game(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No --db and no --game: the only database in runs/league/ (of the working directory);
    none or several is a one-line error saying what to do."""
    from league.db import LeagueDB

    monkeypatch.chdir(tmp_path)
    here = run_here  # in this process: seven commands without seven interpreter start-ups

    assert_one_line_error(here("league", "leaderboard"), "no league database in runs/league/")
    assert_one_line_error(here("league", "report", "--out", "r.html"),
                          "selfplay league tournament --game NAME")
    made = here("league", "tournament", "--game", "tictactoe", "--players", "random",
                "win_or_block", "--games-per-pair", "4", "--json")  # runs/league/tictactoe.db
    assert made.returncode == 0, made.stderr
    board = here("league", "leaderboard", "--json")
    assert board.returncode == 0, board.stderr
    assert json.loads(board.stdout)["matches"] == 4
    assert here("league", "report", "--out", "r.html").returncode == 0
    assert "win_or_block" in (tmp_path / "r.html").read_text()
    LeagueDB(tmp_path / "runs" / "league" / "microrts.db", game="microrts").close()
    assert_one_line_error(here("league", "leaderboard"),
                          "2 league databases in runs/league/ (microrts.db, tictactoe.db); "
                          "pick one with --game NAME or --db FILE")
    picked = here("league", "leaderboard", "--game", "tictactoe", "--json")
    assert json.loads(picked.stdout)["matches"] == 4


def test_league_tournament_with_another_max_steps_is_another_tournament(tmp_path: Path) -> None:
    """Games of another length are not counted as played: ``--max-steps`` other than the
    default is part of the tournament id; the same command still resumes."""
    db = tmp_path / "steps.db"

    def tournament(*steps: str) -> dict[str, object]:  # in this process: one JVM for all
        proc = run_here("league", "tournament", "--game", "microrts", "--players",
                        "workerrush", "passive", "--map", "basesWorkers8x8", "--games-per-pair",
                        "1", *steps, "--num-envs", "1", "--db", str(db), "--json")
        assert proc.returncode == 0, proc.stderr
        result: dict[str, object] = json.loads(proc.stdout)
        return result

    short = tournament("--max-steps", "300")
    assert short["played"] == 1 and str(short["tournament"]).endswith(":max_steps=300")
    assert tournament("--max-steps", "300")["played"] == 0  # same command: resumed
    assert tournament("--max-steps", "200")["played"] == 1  # another length: new games
    default = tournament()  # the default length keeps the id of earlier versions
    assert default["played"] == 1 and default["tournament"] == "rr:s0:basesWorkers8x8"
    assert tournament("--max-steps", "5000")["played"] == 0  # the default, spelled out


# SIGTERM's second signal in `make bench` (the default suite's 8 minutes)
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM,
                                                             marks=pytest.mark.slow)])
def test_second_signal_stops_at_once_with_its_status(tmp_path: Path,
                                                     sig: signal.Signals) -> None:
    """A second signal during the update the first one lets finish stops at once: exit status
    128 + the signal (130 for Ctrl-C, 143 for SIGTERM, as a job scheduler expects), one line."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*SELFPLAY, "train", "--game", "CartPole-v1", "--total-steps",
                             "100000000", "--run-dir", str(run_dir), "--set", "ppo.num_steps=20000",
                             *QUIET], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.time() + 60
        while not (run_dir / "config.yaml").exists():  # written just before training starts
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(1.5)  # inside the first update (20,000 steps of every env)
        proc.send_signal(sig)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "finishing update" in line, line
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err, err
    assert not (run_dir / "checkpoints").exists() or not list((run_dir / "checkpoints").iterdir())


@pytest.mark.parametrize(("hidden", "game", "message"), [
    ("ale_py", "atari/Pong", "error: game 'atari/Pong' needs the Python package 'ale_py'; "
                             "install it with: pip install 'selfplay[atari]'"),
    ("pettingzoo", "pettingzoo/pong_v3", "error: game 'pettingzoo/pong_v3' needs the Python "
                                         "package 'pettingzoo'; install it with: pip install "
                                         "'selfplay[pettingzoo]'"),
])
def test_a_missing_optional_package_names_the_extra(tmp_path: Path, hidden: str, game: str,
                                                    message: str) -> None:
    """Packages a factory imports only when called (ale-py's ROM list) or while resolving
    the name are reported like those it imports first: one line naming the extra."""
    code = (f"import sys; sys.modules[{hidden!r}] = None\nfrom selfplay.cli import main\n"
            f"sys.exit(main(['train', '--game', {game!r}, '--run-dir', {str(tmp_path / 'r')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [message], proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["play", "--checkpoint", "x", "--vs", "random", "--games", "abc"],
     "error: selfplay play: argument --games: invalid int value: 'abc' (see selfplay play "
     "--help)"),
    (["eval", "--episodes", "1e3", "--checkpoint", "x"],
     "error: selfplay eval: argument --episodes: invalid"),
])
def test_bad_flag_values_are_one_line(args: list[str], message: str) -> None:
    """Guards: argparse printed its whole usage (five lines) before the error."""
    assert_one_line_error(run_here(*args), message)


def test_torch_allocation_failures_are_told_apart_from_other_runtime_errors() -> None:
    """torch's failed allocation is a RuntimeError (not a MemoryError): main reports it as
    out of memory in one line; any other RuntimeError stays a bug with its traceback."""
    import torch

    from selfplay.cli import out_of_memory

    with pytest.raises(RuntimeError) as failed:
        torch.empty(2**50, dtype=torch.uint8)  # a PiB
    assert out_of_memory(failed.value)
    assert not out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_the_training_summary_line_tells_a_resumed_runs_share() -> None:
    """Guards: a run resumed at step 1152 of 2560 said "trained 2560 steps in 20 updates", and
    one resumed with nothing left to train said the same."""
    from selfplay.cli import trained

    assert trained({"global_step": 2560, "updates": 20, "start_step": 0}) == \
        "trained 2560 steps in 20 updates"
    assert trained({"global_step": 2560, "updates": 20, "start_step": 1152,
                    "start_update": 9}) == ("resumed at step 1152: trained 1408 steps in 11 "
                                            "updates (2560 steps, 20 updates in all)")
    assert trained({"global_step": 2560, "updates": 20, "start_step": 2560,
                    "start_update": 20}).startswith("nothing to train")


def test_play_and_eval_name_the_maps_new_to_the_network() -> None:
    """Guards: ``play``/``eval --map`` on a board the network never trained on said so only in
    ``play --json`` (``trained_on``)."""
    from selfplay.cli import _new_maps

    trained = {"basesWorkers8x8A": [8, 8]}
    assert _new_maps({"maps": ["basesWorkers8x8A"], "trained_on": trained}) == ""
    assert _new_maps({"maps": ["basesWorkers10x10"], "trained_on": trained}) == (
        "; new to the network: basesWorkers10x10 (trained on basesWorkers8x8A 8x8)")
    assert _new_maps({"maps": ["x"], "trained_on": None}) == ""  # saved without boards


def test_video_packages_are_checked_before_any_game(tmp_path, monkeypatch) -> None:
    """Guards: without imageio ``--video`` played every game, then failed with a traceback;
    without imageio-ffmpeg the error named a temp file, not the package."""
    import sys

    from selfplay.cli import _video_path
    from selfplay.cli_common import UserError

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    with pytest.raises(UserError, match=r"needs the imageio_ffmpeg package: pip install "
                                        r"'selfplay\[video\]'"):
        _video_path(str(tmp_path / "v.mp4"))
    assert _video_path(str(tmp_path / "v.gif")) == tmp_path / "v.gif"  # no ffmpeg needed
    monkeypatch.setitem(sys.modules, "imageio", None)
    with pytest.raises(UserError, match="needs the imageio package"):
        _video_path(str(tmp_path / "v.gif"))


@pytest.mark.parametrize("key", ["seed", "num_envs", "name"])
def test_a_game_option_named_like_the_factorys_arguments_is_one_line(key: str) -> None:
    """Guards: ``--set game.options.seed=3`` (a user looking for a map seed) was a TypeError
    traceback, "make() got multiple values for keyword argument 'seed'"."""
    from games.core import GameError
    from games.registry import make_game

    with pytest.raises(GameError, match=rf"game.options.{key} is not a game option"):
        make_game("tictactoe", num_envs=1, seed=0, options={key: 3})


def test_shard_games_without_record_is_refused(tmp_path: Path) -> None:
    """``--shard-games`` only shapes ``--record``'s shards: alone it was silently ignored."""
    missing = str(tmp_path / "none.pt")
    assert_one_line_error(run_here("play", "--checkpoint", missing, "--vs", "random",
                                   "--shard-games", "3"),
                          "--shard-games sets the shards of --record: add --record DIR")
    assert_one_line_error(run_here("league", "tournament", "--game", "tictactoe", "--players",
                                   "random", "win_or_block", "--db", str(tmp_path / "l.db"),
                                   "--shard-games", "3"),
                          "--shard-games sets the shards of --record")
    assert not (tmp_path / "l.db").exists()


def test_resuming_a_run_whose_config_was_deleted_names_the_checkpoints(
        trained_run: Path, tmp_path: Path) -> None:
    """It said "not a selfplay run directory (no config.yaml, no checkpoint)" beside three
    checkpoints."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    (copy / "config.yaml").unlink()
    newest = sorted((copy / "checkpoints").glob("*.pt"))[-1]
    assert_one_line_error(run_here("train", "--resume", str(copy)),
                          f"{copy} has checkpoints but no config.yaml (deleted?)")
    assert_one_line_error(run_here("train", "--resume", str(copy)),
                          f"start a new run from the weights with --init-from {newest}")


def test_an_interrupted_command_with_jax_loaded_ends_at_once(tmp_path: Path) -> None:
    """With JAX loaded, an interrupted command ends its process without interpreter exit,
    whose teardown of JAX's client under a compiler thread still at work crashed it (exit
    139 for 143: Lux play and eval, about half the time); its output is flushed first. A
    caller of main() in Python gets the status instead."""
    run_dir = tmp_path / "run"
    assert run("train", "--game", "tictactoe", "--total-steps", "512", "--run-dir",
               str(run_dir), *QUIET).returncode == 0
    script = tmp_path / "cli.py"
    script.write_text(
        "import atexit, sys\nimport jax  # noqa: F401\nfrom selfplay.cli import main\n"
        "atexit.register(lambda: print('interpreter exit', file=sys.stderr, flush=True))\n"
        f"sys.argv = ['selfplay', 'play', '--checkpoint', {str(run_dir)!r}, '--vs', 'random', "
        "'--games', '100000000']\nsys.exit(main())\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1],
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "using <checkpoint>": the games are under way
        assert "using" in line, line
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert err.strip().endswith("interrupted by SIGTERM") and "interpreter exit" not in err


def test_resuming_a_run_stopped_before_its_first_checkpoint_starts_it_again(
        tmp_path: Path) -> None:
    """--resume of a run with its config.yaml and no checkpoint yet (a Ctrl-C in its first
    update) starts it from the beginning with its saved settings (it said "no checkpoint;
    nothing to resume", while the same command with --run-dir started it again)."""
    run_dir = tmp_path / "run"
    assert run("train", "--game", "CartPole-v1", "--total-steps", "1024", "--run-dir",
               str(run_dir), *QUIET).returncode == 0
    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / "metrics.jsonl").write_text("")
    again = run_here("train", "--resume", str(run_dir), "--total-steps", "2048", "--json")
    assert again.returncode == 0, again.stderr
    assert "has no checkpoint yet (it stopped before its first one): starting it from the " \
        "beginning with its saved settings" in again.stderr
    assert json.loads(again.stdout)["global_step"] == 2048
    assert list((run_dir / "checkpoints").glob("update_*.pt"))
    # the kind of run, without a checkpoint naming it, is read from its settings
    clone = tmp_path / "clone"
    assert run("bc", "--game", "tictactoe", "--teachers", "win_or_block", "--total-steps",
               "512", "--run-dir", str(clone), *QUIET).returncode == 0
    shutil.rmtree(clone / "checkpoints")
    assert_one_line_error(run_here("train", "--resume", str(clone)),
                          f"{clone} is a behaviour-cloning run: continue it with selfplay bc "
                          "--resume")
    assert_one_line_error(run_here("bc", "--resume", str(run_dir)),
                          f"{run_dir} is a selfplay train run, not a cloning run")
    assert not list((clone / "checkpoints").glob("*.pt"))  # refused: nothing trained there


def test_a_run_too_short_for_a_snapshot_says_it_is_not_rated(tmp_path: Path) -> None:
    """A league run that ends before its first snapshot says why the leaderboard does not
    list it (it listed the anchors alone, without a word)."""
    proc = run_here("train", "--game", "tictactoe", "--total-steps", "1024", "--run-dir",
                    str(tmp_path / "run"), "--set", "league.snapshot_every=5",
                    "--set", "league.anchor_calibration_games=0", "--json", *QUIET)
    assert proc.returncode == 0, proc.stderr
    assert ("league: this run has no snapshot yet (one every league.snapshot_every=5 updates; "
            "it has done 1): it is not rated in the league") in proc.stderr
    # the summary holds the last update's league figures too (one rank's lacked them)
    assert json.loads(proc.stdout)["league/opponent_share_selfplay"] == 1.0


def test_a_stop_while_torch_is_imported_is_one_line(tmp_path: Path) -> None:
    """Guards (review): SIGTERM in a command's first second landed inside torch's import;
    the error handler then imported torch again, half-initialized: a traceback, a
    SystemError, or a crash (status 139) instead of "interrupted by SIGTERM" and 143."""
    trip = tmp_path / "trip.py"
    trip.write_text(
        "import os, signal, sys\n"
        "class Trip:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch._utils':  # torch/__init__.py is halfway through\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "sys.meta_path.insert(0, Trip())\n"
        "from selfplay.cli import main\n"
        "sys.exit(main(['train', '--game', 'tictactoe', '--total-steps', '64', '--run-dir',"
        " sys.argv[1]]))\n")
    proc = subprocess.run([sys.executable, str(trip), str(tmp_path / "run")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (143, "interrupted by SIGTERM\n")
