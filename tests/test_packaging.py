"""The wheel is complete: installed from it (not editable), selfplay finds its default settings
and every package of the checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("selfplay", "games", "league")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the tracked files (no build/ or egg-info in the checkout,
    no stale modules from an earlier build)."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(source)],
                   check=True, cwd=source, timeout=300)
    (path,) = out.glob("selfplay-*.whl")
    return path


def test_wheel_carries_every_package_and_family_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.name for p in (ROOT / "hyperparams").glob("*.yaml"))
    assert "microrts.yaml" in shipped
    for name in shipped:
        assert f"selfplay/hyperparams/{name}" in names, name
    assert not any(n.startswith("hyperparams/") for n in names)  # not a top-level package
    assert not any(n.startswith("tools/") for n in names)  # the checkout's scripts stay there
    for top in PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            assert init.relative_to(ROOT).as_posix() in names, init


def test_installed_wheel_trains_with_the_family_defaults(wheel: Path, tmp_path: Path) -> None:
    """From a plain (non-editable) install, in a folder with no checkout, the microRTS defaults
    are the YAML file's: 24 envs, 16x16, the league on."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    script = ("import json, selfplay, selfplay.config_files as c; "
              "cfg = c.build_config('microrts'); "
              "print(json.dumps([selfplay.__file__, str(c.HYPERPARAMS_DIR), cfg.game.num_envs, "
              "cfg.game.options['map'], cfg.league.enabled]))")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(target),
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    module, folder, num_envs, map_name, league = json.loads(done.stdout.strip().splitlines()[-1])
    assert module.startswith(str(target))
    assert Path(folder) == target / "selfplay" / "hyperparams"
    assert (num_envs, map_name, league) == (24, "basesWorkers16x16", True)
