"""Data-parallel learning (selfplay.data_parallel): two gloo ranks on CPU learn what one process
learns from the same global batch, stay bit-identical, merge their running statistics, and
save (rank 0) and resume their run exactly; ``torchrun`` end to end, resumed by one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from data_parallel_ranks import learn_once, rms_rows, rms_start, run_ranks

from league.db import LeagueDB
from league.snapshots import snapshot_name
from selfplay.checkpoint import list_checkpoints, load_checkpoint
from selfplay.config import ConfigError
from selfplay.config_files import build_config
from selfplay.data_parallel import Ranks, distributed_problems, join_ranks

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every scenario of ``data_parallel_ranks`` run once on two spawned gloo ranks."""
    return run_ranks(tmp_path_factory.mktemp("ranks"))


def test_two_ranks_learn_what_one_process_learns_from_the_global_batch(
        ranks: list[dict[str, Any]]) -> None:
    """3 minibatches x 2 epochs, normalized advantages and values, a different number of
    trained rows on each rank: the weights of 1 process on the whole rollout, to float
    tolerance; both ranks bit-identical."""
    one = learn_once(Ranks())
    two = [r["learn"] for r in ranks]
    assert torch.equal(two[0]["flat"], two[1]["flat"]), "the ranks' weights differ"
    torch.testing.assert_close(two[0]["flat"], one["flat"], atol=1e-6, rtol=0)
    # what a rank learns alone (no all-reduce) is far from it: the check above can fail
    assert float((learn_once(Ranks(), slice(0, 4))["flat"] - one["flat"]).abs().max()) > 1e-4
    for key, value in one["value_rms"].items():
        torch.testing.assert_close(two[0]["value_rms"][key], value, atol=1e-9, rtol=1e-9)
    for key, value in one["metrics"].items():
        assert two[0]["metrics"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_running_statistics_merge_into_those_of_all_ranks_data(
        ranks: list[dict[str, Any]]) -> None:
    reference = rms_start()
    reference.update(torch.cat([rms_rows(0), rms_rows(1)]))
    for rank in ranks:
        for key, value in reference.state_dict().items():
            torch.testing.assert_close(rank["rms"][key], value, atol=1e-10, rtol=1e-10)
    assert all(torch.equal(ranks[0]["rms"][k], ranks[1]["rms"][k]) for k in ranks[0]["rms"])


def test_ranks_episode_means_are_over_all_their_episodes(ranks: list[dict[str, Any]]) -> None:
    """Guards (review): the ranks' episode means were averaged rank by rank, so a rank with one
    finished episode weighed as much as one with hundreds early in a run."""
    for rank in ranks:
        assert rank["averaged"] == {"episodes": 4.0, "episode/return_mean": (10 + 3 * 2) / 4,
                                    "other": 0.5}


def test_two_ranks_resume_their_games_exactly_from_rank_0s_checkpoint(
        ranks: list[dict[str, Any]]) -> None:
    """2 updates, saved, resumed in new trainers: update 3 as in an uninterrupted run, on both
    ranks; the checkpoint holds both ranks' games and the steps of both."""
    for rank in ranks:
        train = rank["train"]
        assert train["exact"], "the games were not restored"
        assert torch.equal(train["resumed"], train["straight"])
        assert train["global_step"] == 3 * 8 * 8  # updates x steps x envs of both ranks
    assert torch.equal(ranks[0]["train"]["resumed"], ranks[1]["train"]["resumed"])
    state = load_checkpoint(Path(ranks[0]["train"]["checkpoint"]))
    assert state["world"] == 2 and len(state["ranks"]) == 1
    assert state["counters"]["global_step"] == 2 * 8 * 8
    assert state["batch"]["obs"].shape[0] == 4 and state["ranks"][0]["batch"]["obs"].shape[0] == 4


def same_table(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two matchmaker states (pool and payoff table) are equal."""
    pa, pb = a["payoff"], b["payoff"]
    return (all(np.array_equal(pa[k], pb[k]) for k in ("ids", "points", "games"))
            and all(np.array_equal(a[k], b[k]) for k in ("kind", "parent", "active"))
            and a["roles"] == b["roles"] and a["main"] == b["main"])


def test_two_ranks_share_one_league_and_resume_it_exactly(
        ranks: list[dict[str, Any]]) -> None:
    """A tic-tac-toe league on two ranks (a snapshot every update, PFSP, a scripted
    opponent, rating games): both ranks sample from the same pool and payoff table after
    every update, which holds the games of both; rank 0 alone writes snapshots and rating
    matches; saved after 2 updates and resumed, the third update is the uninterrupted one's
    on both ranks (weights, table, each env's opponent, the draws' RNG)."""
    leagues = [r["league"] for r in ranks]
    straight = [league["straight"] for league in leagues]
    for update, (t0, t1) in enumerate(zip(straight[0]["tables"], straight[1]["tables"],
                                          strict=True)):
        assert same_table(t0, t1), f"the ranks' tables differ after update {update + 1}"
    table = straight[0]["tables"][-1]["payoff"]
    learner_row = list(table["ids"]).index(-1)
    counted = [s["counted"] for s in straight]
    assert counted[1] > 0 and counted[0] > 0  # each rank played league opponents
    assert table["games"][learner_row].sum() == pytest.approx(sum(counted))
    names = [name for name, kind in straight[0]["players"] if kind == "snapshot"]
    assert len(names) == 3 and straight[0]["players"] == straight[1]["players"]
    assert straight[0]["matches"] > 0  # update 2's rating games, stored by rank 0
    for league, alone in zip(leagues, straight, strict=True):
        resumed = league["resumed"]
        assert torch.equal(resumed["flat"], alone["flat"])
        assert same_table(resumed["table"], alone["tables"][-1])
        np.testing.assert_array_equal(resumed["opponent"], alone["opponent"])
        assert resumed["rng"] == alone["rng"]
    state = load_checkpoint(Path(leagues[0]["resumed"]["checkpoint"]))
    assert state["extra"]["league"]["world"] == 2
    assert len(state["extra"]["league"]["ranks"]) == 1


def test_settings_several_ranks_cannot_train_with_are_named() -> None:
    config = build_config("tictactoe", overrides=["game.num_envs=6",  # league on by default
                                                  "distributed.backend=ray"])
    problems = " ".join(distributed_problems(config, 4))
    assert "game.num_envs=6 is not divisible by the 4 ranks" in problems
    assert "league" not in problems  # the league trains on several ranks
    assert "distributed.address=auto" in problems  # ray, address local: one instance/rank
    assert distributed_problems(config, 1) == []


def _selfplay(*args: str, nproc: int = 1) -> subprocess.CompletedProcess[str]:
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc}", "-m", "selfplay.cli"] if nproc > 1
              else [sys.executable, "-m", "selfplay.cli"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*launch, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow  # three interpreters start for torchrun, then one to resume: ~10 s
def test_torchrun_trains_saves_on_rank_0_and_one_process_resumes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    common = ["--set", "game.num_envs=8", "--set", "ppo.num_steps=8",  # in a league
              "--set", "league.snapshot_every=1", "--set", "league.eval_every=2",
              "--set", "league.eval_process=false", "--set", "log.tensorboard=false",
              "--set", "network.hidden=[32,32]", "--set", "checkpoint.every_updates=1"]
    done = _selfplay("train", "--game", "tictactoe", *common, "--total-steps", "128",
                     "--run-dir", str(run), "--no-progress", nproc=2)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("trained 128 steps in 2 updates") == 1, done.stdout  # rank 0
    # the summary's episodes are every rank's, as logged (it gave rank 0's)
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
            if "snapshot" not in json.loads(line)][-1]
    assert f"mean return {last['episode/return_mean']:.2f}" in done.stdout, done.stdout
    saved = list_checkpoints(run / "checkpoints")
    assert [p.name for p in saved] == ["update_0000001.pt", "update_0000002.pt"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [p.name for p in saved]
    state = load_checkpoint(saved[-1])
    assert state["world"] == 2 and state["counters"]["global_step"] == 128
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # rank 0 logs: its two updates, and its snapshot's rating at the snapshot's step (rated
    # between updates: before the update's record)
    assert [(r["step"], "snapshot" in r) for r in records] == [(64, False), (128, True),
                                                               (128, False)]

    resumed = _selfplay("train", "--resume", str(run), "--total-steps", "256",
                        "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "saved by 2 rank(s), resumed by 1" in resumed.stderr
    # the one rank takes every saved rank's episodes: the count goes on (it went back)
    both = state["episodes"]["count"] + state["ranks"][0]["episodes"]["count"]
    first = next(r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                 if r["step"] == 192 and "snapshot" not in r)  # the resumed run's first update
    assert both > state["episodes"]["count"] and first["episodes"] >= both
    assert ("resumed at step 128: trained 128 steps in 2 updates (256 steps, 4 updates in all)"
            in resumed.stdout)
    final = load_checkpoint(list_checkpoints(run / "checkpoints")[-1])
    assert "world" not in final and final["counters"]["global_step"] == 256
    assert "world" not in final["extra"]["league"]  # one rank's draws now
    with LeagueDB(run / "league.db") as db:  # rank 0's snapshots, then the resumed run's
        assert [p.name for p in db.players() if p.kind == "snapshot"] == [
            snapshot_name(run.name, u) for u in (1, 2, 3, 4)]


def test_a_torchrun_rank_refuses_settings_it_cannot_train_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before joining the process group: one line naming the settings and the fix."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    config = build_config("tictactoe", overrides=["game.num_envs=7"])
    with pytest.raises(ConfigError, match=r"^cannot train on 2 ranks: game.num_envs=7 is not "
                                          r"divisible by the 2 ranks [^\n]*$"):
        join_ranks(config)


@pytest.mark.parametrize("world, rank, message", [
    ("2", "5", "RANK=5 of WORLD_SIZE=2"),  # hung in the rendezvous for 30 minutes
    ("0", "0", "RANK=0 of WORLD_SIZE=0"),  # was taken for one process
    ("1", "1", "RANK=1 of WORLD_SIZE=1"),  # trained, then reported nothing
])
def test_impossible_ranks_are_refused(monkeypatch: pytest.MonkeyPatch, world: str, rank: str,
                                      message: str) -> None:
    from selfplay.data_parallel import world_from_environment

    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setenv("RANK", rank)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(ConfigError, match=message):
        world_from_environment()


def test_a_rank_that_cannot_rendezvous_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: MASTER_ADDR unset under WORLD_SIZE=2 was a ValueError traceback (a port in
    use, a wrong GLOO_SOCKET_IFNAME: RuntimeError / DistNetworkError tracebacks)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(ConfigError, match="rank 0 of 2 could not join the others .*MASTER_ADDR"):
        join_ranks(build_config("CartPole-v1", overrides=["game.num_envs=2"]))


def test_a_rank_whose_peers_never_start_stops_after_the_rendezvous_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: rank 0 of a hand-made 2-rank launch whose rank 1 never started waited torch's
    30-minute collective timeout before saying anything."""
    import socket
    import time
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", str(port))):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="rank 0 of 2 could not join the others .*all "
                                          "WORLD_SIZE ranks start"):
        join_ranks(build_config("CartPole-v1", overrides=[
            "game.num_envs=2", "distributed.rendezvous_timeout_s=2"]))
    assert time.monotonic() - start < 30
    monkeypatch.setenv("MASTER_PORT", "70000")
    with pytest.raises(ConfigError, match="^MASTER_PORT='70000' is not a port number"):
        join_ranks(build_config("CartPole-v1", overrides=["game.num_envs=2"]))


def test_a_rank_whose_rendezvous_never_answers_stops_and_hears_signals(
        tmp_path: Path) -> None:
    """Guards: rank 1 of a hand-made launch whose MASTER_PORT another program held (rank 0 had
    stopped: address in use) hung in C++ past the rendezvous timeout, ignoring Ctrl-C and
    SIGTERM, until kill -9. Now SIGTERM ends it at once and the timeout is one line."""
    import signal
    import socket
    import time

    with socket.socket() as squatter:  # accepts connections, never answers
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(squatter.getsockname()[1])}
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        command = [sys.executable, "-m", "selfplay.cli", "train", "--game", "CartPole-v1",
                   "--no-progress", "--set", "game.num_envs=2"]
        late = subprocess.run([*command, "--set", "distributed.rendezvous_timeout_s=1",
                               "--run-dir", str(tmp_path / "late")], env=env,
                              capture_output=True, text=True, timeout=120)
        assert late.returncode == 2, late.stderr
        assert "rank 1 of 2 could not join the others (RuntimeError: the rendezvous at " \
            "127.0.0.1:" in late.stderr and "did not answer within 1 s" in late.stderr
        stopped = subprocess.Popen([*command, "--run-dir", str(tmp_path / "stopped")], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(8)  # well inside the 600 s rendezvous timeout
        start = time.monotonic()
        stopped.send_signal(signal.SIGTERM)
        _, err = stopped.communicate(timeout=60)
        assert time.monotonic() - start < 5 and stopped.returncode == 143, err
    assert not (tmp_path / "stopped").exists() and not (tmp_path / "late").exists()


def test_async_collection_is_named_among_the_settings_ranks_refuse() -> None:
    """Guards: an async run resumed under torchrun built its game, then advised a setting
    (collection: sync) that --resume cannot take."""
    config = build_config("CartPole-v1", overrides=["game.num_envs=4", "collection=async"])
    assert "resume it with one process, or start a new data-parallel run from its weights" \
        in " ".join(distributed_problems(config, 2))


def test_lost_peers_are_told_from_other_errors() -> None:
    from selfplay.data_parallel import lost_peer

    assert lost_peer(RuntimeError("[../gloo/transport/tcp/pair.cc:537] Read error "
                                  "[127.0.0.1]:1234: Connection reset by peer"))
    assert not lost_peer(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_a_lost_peers_reason_is_one_readable_line() -> None:
    """Guards (review): the lost-rank line carried gloo's C++ source path and was cut
    mid-word at 160 characters ("... This is typically caused by a rem")."""
    from selfplay.data_parallel import peer_reason

    exc = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] "
                       "Read error [127.0.0.1]:60603: Connection reset by peer. This is "
                       "typically caused by a remote process that exited, for example " * 2
                       + "\nsecond line")
    reason = peer_reason(exc)
    assert reason.startswith("Read error [127.0.0.1]:60603: Connection reset by peer.")
    assert "pair.cc" not in reason and reason.endswith(" ...") and len(reason) <= 164
    assert not reason[:-4].endswith(("rem", " "))  # a whole word before the cut


def test_a_refusal_every_rank_reaches_is_printed_once_under_torchrun(monkeypatch, capsys) -> None:
    """Guards (review): "error: cannot train on 2 ranks: ..." came once per rank of a torchrun
    launch (one terminal); ranks started by hand, each in its own terminal, all print it."""
    from selfplay.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29999")
    bad = ["train", "--game", "tictactoe", "--set", "game.num_envs=7", "--set",
           "league.enabled=false", "--total-steps", "64", "--no-progress"]
    for rank, torchrun, printed in (("0", "1", True), ("1", "1", False), ("1", "", True)):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", torchrun)
        assert main(bad) == 2
        err = capsys.readouterr().err
        assert ("error: cannot train on 2 ranks" in err) is printed, (rank, torchrun, err)


def test_the_lost_rank_is_named_and_the_resume_command_fits_the_launch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards (review): the lost-rank line named no rank, and ranks started by hand were told
    to resume with a torchrun command."""
    from selfplay.data_parallel import lost_rank_line
    from selfplay.train import resume_command

    exc = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
                       "[127.0.0.1]:45469: Connection reset by peer")
    assert lost_rank_line(0, 2, exc) == ("rank 1 of this 2-rank run was lost (Read error "
                                         "[127.0.0.1]:45469: Connection reset by peer)")
    assert lost_rank_line(1, 2, exc).startswith("rank 0 of this 2-rank run was lost")
    assert lost_rank_line(2, 4, exc).startswith("another of the 4 ranks of this run was lost")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert resume_command(2) == "torchrun --nproc-per-node 2 -m selfplay.cli train"
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    assert resume_command(2, "bc") == ("start the 2 ranks again as before (WORLD_SIZE, RANK, "
                                       "MASTER_ADDR, MASTER_PORT), each with selfplay bc")
    assert resume_command(1) == "selfplay train"
