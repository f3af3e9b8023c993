"""Shared helpers for the microRTS tests (the real engine; fetched on first use)."""

from __future__ import annotations

import os

import pytest

from games.microrts import make
from games.microrts.adapter import MicroRTSVecGame

# The Ray cluster tests run in a pytest process of their own (tests/distributed/test_ray_suite.py):
# a process that joined a Ray cluster and also runs a JVM crashed now and then (SIGSEGV) in a
# later test's in-process microRTS game
RAY_TESTS_HERE = "SELFPLAY_RAY_TESTS_HERE"
collect_ignore = [] if os.environ.get(RAY_TESTS_HERE) else ["test_microrts_ray_workers.py"]


@pytest.fixture(scope="session")
def engine_home():
    """The engine folder (downloads the gym-microrts sdist once per machine)."""
    from games.microrts.engine import ensure_engine

    return ensure_engine()


@pytest.fixture
def make_game(engine_home):
    """``make_game(num_envs, **options)``; every game is closed after the test."""
    games: list[MicroRTSVecGame] = []

    def factory(num_envs: int = 2, **options) -> MicroRTSVecGame:
        options.setdefault("map", "basesWorkers8x8")
        game = make("microrts", num_envs=num_envs, seed=0, **options)
        games.append(game)
        return game

    yield factory
    for game in games:
        game.close()

