"""The Ray cluster tests (tests/games/microrts/test_microrts_ray_workers.py) in a pytest process
of their own, so that no later test shares a process with a Ray cluster's driver (a JVM in such
a process crashed now and then)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests/games/microrts/test_microrts_ray_workers.py"


def run_ray_tests(markers: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", markers, MODULE], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "SELFPLAY_RAY_TESTS_HERE": "1"}, timeout=900)
    report = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    assert " passed" in proc.stdout and " failed" not in proc.stdout, report


def test_the_ray_cluster_tests_pass() -> None:
    run_ray_tests("not slow")


@pytest.mark.slow
def test_the_slow_ray_cluster_tests_pass() -> None:
    run_ray_tests("slow")
