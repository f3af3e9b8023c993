"""Reaching Ray: a private local instance for one run, the cluster on this machine, or a
cluster's head node, with one-line errors instead of hangs.

A private instance (``address="local"``) suits small machines: no dashboard, a small object
store, its files in a temp folder of its own, Ray's token authentication off (Ray 2.59+ turns
it on for local instances and writes under the home folder) and no usage reports. A cluster
address is checked with a plain TCP connection first, so an unreachable head fails within the
timeout with its address named.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from games.core import GameError
from games.registry import PLUGINS_VARIABLE, WARNED_VARIABLE

RAY_EXTRA = "pip install 'selfplay[ray]'"
RAY_JOB_CONFIG_VARIABLE = "RAY_JOB_CONFIG_JSON_ENV_VAR"
"""set by Ray in the driver of a job submitted with ``ray job submit``"""
INLINE_REPLIES = {"max_direct_call_object_size": 8 * 2**20}
"""A private instance passes actor arguments and replies up to 8 MiB inside the call itself
instead of through the object store (Ray's default limit is 100 kB): a microRTS step of two
workers with ~850 kB replies took ~2.8 ms instead of ~4.3 ms (``BENCHMARKS.md``). A cluster
gets the same with ``ray start --system-config='{"max_direct_call_object_size": 8388608}'``."""


def import_ray() -> ModuleType:
    """The ``ray`` module; a one-line :class:`GameError` naming the extra when missing. Ray's
    crash handler stays off (read as Ray loads): it would take the SIGSEGV a JVM in this
    process raises on purpose (microRTS games), crashing it."""
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ModuleNotFoundError as exc:
        raise GameError(f"distributed.backend=ray needs Ray, which is not installed: "
                        f"{RAY_EXTRA}") from exc
    return ray


@dataclass
class RaySession:
    """A connection to Ray; :meth:`close` shuts down what this session started."""

    ray: ModuleType
    address: str
    owned: bool
    temp_dir: Path | None = None
    # RAY_TMPDIR as this session set it, taken away on close (it named the removed folder for
    # the process's later sessions and children)
    set_tmpdir: str | None = None

    def close(self) -> None:
        """Shut down what this session started, deaf to SIGINT and SIGTERM meanwhile: a
        second Ctrl-C ("stop at once") cut the shutdown short and left Ray's agents running."""
        with signals_held():
            if self.owned and self.ray.is_initialized():
                self.ray.shutdown()
            if self.temp_dir is not None:
                # a start-up that failed midway can leave processes shutdown() does not know
                # of: those naming this instance's folder
                kill_processes_of(self.temp_dir)
                shutil.rmtree(self.temp_dir, ignore_errors=True)
            if self.set_tmpdir is not None and os.environ.get("RAY_TMPDIR") == self.set_tmpdir:
                del os.environ["RAY_TMPDIR"]


def kill_processes_of(folder: Path) -> int:
    """SIGKILL the processes this one started, directly or not, whose command line names
    ``folder`` (a private Ray instance's: its session lives there), and everything they
    started (Ray's agents rename themselves ``ray::...``); how many. Another process naming
    the folder (a ``tail`` of its logs) is left alone. Linux (``/proc``) only: elsewhere
    none."""
    proc, needle = Path("/proc"), str(folder).encode()
    if not proc.is_dir():
        return 0
    children: dict[int, list[int]] = {}
    names: dict[int, bytes] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2:].split()[1])
            names[int(entry.name)] = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(entry.name))

    def tree(pid: int) -> list[int]:
        below = [pid]
        for child in children.get(pid, []):
            below += tree(child)
        return below

    mine = tree(os.getpid())[1:]
    victims = {pid for root in mine if needle in names.get(root, b"") for pid in tree(root)}
    for pid in victims:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(victims)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside (in the main thread; elsewhere nothing changes),
    their handlers restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred(came: list[int]) -> Iterator[None]:
    """SIGINT and SIGTERM held back inside (in the main thread): appended to ``came``, and a
    handler the block installs for them refused (``ray.init`` installs one that exits at
    once, mid-start, leaving processes no shutdown knows); the handlers as they were after
    it. The caller delivers what came (:func:`deliver`) once it has cleaned up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    install = signal.signal
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def note(signum: int, _frame: object) -> None:
        came.append(signum)

    def guarded(signum: Any, handler: Any) -> Any:
        if signum in STOP_SIGNALS:
            return signal.getsignal(signum)
        return install(signum, handler)

    for sig in STOP_SIGNALS:
        install(sig, note)
    signal.signal = guarded  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.signal = install  # type: ignore[assignment]
        for sig, handler in previous.items():
            install(sig, handler if handler is not None else signal.SIG_DFL)


def deliver(came: list[int]) -> None:
    """Send the held signals ``came`` again, to the handlers now in place; if they return
    (a handler that only notes it), a :class:`GameError` (what was starting is gone)."""
    for signum in dict.fromkeys(came):
        signal.raise_signal(signum)
    if came:
        raise GameError(f"{signal.Signals(came[0]).name} came while Ray was starting; it "
                        "was shut down")


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """SIGINT's and SIGTERM's handlers as they were before the block: ``ray.init`` installs
    its own (SIGTERM: exit at once), which would bypass selfplay's checkpoint-then-stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)


# Ray puts AF_UNIX sockets at <folder>/session_<date>_<time>_<micros>_<pid>/sockets/plasma_store
# and such a path holds at most 107 bytes
SOCKET_PATH_LIMIT = 107
SOCKET_SUFFIX = len("/session_2026-11-30_21-34-03_156239_4194304/sockets/plasma_store")


def local_instance_folder() -> Path:
    """A new folder for a local Ray instance: under $TMPDIR when its sockets' paths fit there,
    else under /tmp (a deep $TMPDIR, such as a test's or a job scheduler's, failed the start)."""
    base = Path(tempfile.gettempdir())
    probe = base / "selfplay-ray-xxxxxxxx"
    if len(os.fsencode(probe)) + SOCKET_SUFFIX > SOCKET_PATH_LIMIT:
        base = Path("/tmp")
    return Path(tempfile.mkdtemp(prefix="selfplay-ray-", dir=base))


def connect(address: str = "local", num_cpus: int | None = None, object_store_mb: int = 256,
            timeout_s: float = 20.0) -> RaySession:
    """Join Ray at ``address`` (``local``, ``auto`` or ``HOST:PORT``); an instance already
    joined by this process is reused (and left running)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's crash handler would take SIGSEGV from a JVM in this process (microRTS: the JVM of
    # in-process games or rating games), which uses it for its own ends: the JVM then crashed.
    # Read when Ray's core is loaded: set before the import
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    ray = import_ray()
    if ray.is_initialized():
        return RaySession(ray, address, owned=False)
    quiet: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address == "local":
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        temp = local_instance_folder()
        set_tmpdir = None
        if "RAY_TMPDIR" not in os.environ:
            os.environ["RAY_TMPDIR"] = set_tmpdir = str(temp)
        cpus = num_cpus or os.cpu_count() or 1
        session = RaySession(ray, address, owned=True, temp_dir=temp, set_tmpdir=set_tmpdir)
        came: list[int] = []  # a Ctrl-C or SIGTERM during the start: it ends whole first
        try:
            with signals_deferred(came):
                ray.init(num_cpus=cpus, num_gpus=0,
                         object_store_memory=object_store_mb * 2**20, include_dashboard=False,
                         _temp_dir=str(temp), object_spilling_directory=str(temp / "spill"),
                         _system_config=INLINE_REPLIES, **quiet)
        except BaseException as exc:  # a half-started instance goes too
            session.close()
            if isinstance(exc, Exception):  # Ray raises many kinds
                raise GameError(f"could not start a local Ray instance: {exc}") from exc
            raise
        if came:
            session.close()
            deliver(came)
        return session
    if address != "auto":
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                pass
        except OSError as exc:
            raise GameError(f"cannot reach the Ray cluster at {address} within {timeout_s:g} s: "
                            f"{exc.strerror or exc}") from exc
    where = ("no Ray cluster runs on this machine (start one with `ray start --head`; a single "
             "process may use distributed.address=local instead)" if address == "auto" else
             f"cannot join the Ray cluster at {address}")
    with handlers_kept():
        error = (_probe(address, timeout_s)
                 or _init_within(ray, timeout_s, address=address, runtime_env=job_env(),
                                 **quiet))
    if error is not None:
        raise GameError(f"{where}: {error}")
    return RaySession(ray, address, owned=True)


def job_env() -> dict[str, Any] | None:
    """The run's Ray ``runtime_env``: the game plugins this process loads
    (``$SELFPLAY_FAMILIES``), which a cluster's workers, started by its own nodes, do not
    inherit (their modules must be importable there); None when there are none, or when this
    process is a Ray job's driver (``ray job submit``: the job's own runtime_env set its
    variables, for its workers too, and Ray refuses a second one naming them)."""
    if os.environ.get(RAY_JOB_CONFIG_VARIABLE):
        return None
    forwarded = {name: os.environ[name] for name in (PLUGINS_VARIABLE, WARNED_VARIABLE)
                 if os.environ.get(name)}
    return {"env_vars": forwarded} if forwarded else None


_PROBE = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, "
          "configure_logging=False); ray.shutdown()")


def _probe(address: str, timeout_s: float) -> str | None:
    """Join the cluster at ``address`` from a child process first: a join that cannot finish
    (a silent or foreign address) keeps retrying and logging in the process that started it,
    so it is started where it can be killed. The error's one line, or None if it joined."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, address], capture_output=True,
                              text=True, timeout=timeout_s, env={**os.environ})
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:g} s"
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line.split(":")[0]]
    return (errors or lines or [f"the probe exited with status {proc.returncode}"])[-1][:300]


@contextlib.contextmanager
def _quiet_join() -> Iterator[None]:
    """While joining from a helper thread, hold back what Ray prints on the way: its Python
    warning that a non-main thread sets no SIGTERM handler (selfplay handles SIGTERM itself),
    and its C++ client's retry lines, written straight to file descriptor 2. Both go to a log
    file (``$TMPDIR/selfplay-ray-connect-<uid>.log``) so the run's error stays one line; the join's
    own outcome is reported by the caller."""
    logger = logging.getLogger("ray")
    level = logger.level
    logger.setLevel(logging.ERROR)
    sys.stderr.flush()
    saved = os.dup(2)
    try:  # one per user: another's file of that name cannot be opened
        log = os.open(Path(tempfile.gettempdir()) / f"selfplay-ray-connect-{os.geteuid()}.log",
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        log = os.open(os.devnull, os.O_WRONLY)
    os.dup2(log, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)
        logger.setLevel(level)


def _init_within(ray: ModuleType, timeout_s: float, **kwargs: Any) -> str | None:
    """``ray.init(**kwargs)`` given ``timeout_s`` seconds (Ray itself retries a silent head
    for about 20 s); the error's one line, or None once joined. A joining that outlives the
    timeout is left to a daemon thread: the run stops with the error anyway."""
    outcome: list[str | None] = []

    def join() -> None:
        try:
            ray.init(**kwargs)
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds
            outcome.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    thread = threading.Thread(target=join, daemon=True, name="ray-connect")
    with _quiet_join():
        thread.start()
        thread.join(timeout_s)
    if not outcome:
        return f"no answer within {timeout_s:g} s"
    return outcome[0]
