"""The wheel is complete: installed from it (not editable), selfplay finds its default settings."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(ROOT)],
                   check=True, cwd=build, timeout=300)
    (path,) = out.glob("selfplay-*.whl")
    return path


def test_wheel_carries_every_family_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.name for p in (ROOT / "hyperparams").glob("*.yaml"))
    assert "microrts.yaml" in shipped
    for name in shipped:
        assert f"hyperparams/{name}" in names, name


def test_installed_wheel_trains_with_the_family_defaults(wheel: Path, tmp_path: Path) -> None:
    """From a plain (non-editable) install, in a folder with no checkout, the microRTS defaults
    are the YAML file's: 24 envs, 16x16, the league on."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    script = ("import json, selfplay, selfplay.config as c; "
              "cfg = c.build_config('microrts'); "
              "print(json.dumps([selfplay.__file__, str(c.HYPERPARAMS_DIR), cfg.game.num_envs, "
              "cfg.game.options['map'], cfg.league.enabled]))")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(target),
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    module, folder, num_envs, map_name, league = json.loads(done.stdout.strip().splitlines()[-1])
    assert module.startswith(str(target)) and folder.startswith(str(target))
    assert (num_envs, map_name, league) == (24, "basesWorkers16x16", True)
