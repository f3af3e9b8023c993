"""The JVM's fault handlers, kept as the JVM installed them.

HotSpot takes SIGSEGV, SIGBUS, SIGFPE and SIGILL for its ordinary work: compiled Java code
meets a null reference or a safepoint by faulting, and the JVM's handler, reading the fault's
details (``SA_SIGINFO``), turns the fault into a ``NullPointerException`` or a pause. A library
loaded later that re-installs the handler it finds with ``signal()`` drops ``SA_SIGINFO``:
pygame does so when it is imported (luxai_s2 and gymnasium's rendering import it). From then
on the JVM's handler reads garbage as the fault's details, and the next such fault spins the
process at 100 % CPU or kills it (``SIGSEGV`` in compiled code, ``si_signo: ... (INVALID)`` in
the JVM's crash log). Python's ``faulthandler``, which ``ray.init`` enables, takes the signals
over entirely: the next fault is a "Fatal Python error".

:func:`capture` records the handlers once the JVM has started; :func:`restore` puts back any
that another library changed. The engine's entry points (a game's construction, reset, step,
restart, bot change and close; bot matches) call it before their Java calls (four
``sigaction`` calls, under a microsecond). Where the C library offers no ``sigaction``
(Windows), both do nothing.
"""

from __future__ import annotations

import atexit
import ctypes
import signal
import sys
import threading
from typing import Any

FAULT_SIGNALS: tuple[int, ...] = tuple(
    int(getattr(signal, name)) for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
    if hasattr(signal, name))
"""the signals the JVM handles for its own work"""

_STRUCT_BYTES = 256  # more than any platform's ``struct sigaction`` (152 bytes on Linux x86-64)
_FLAGS_AT = {"linux": 136, "darwin": 12}
"""where ``sa_flags`` lies in ``struct sigaction`` (after the handler and the mask: glibc's mask
is 128 bytes, of which the kernel fills 8; the rest is left as it was, so it is not compared)"""

_sigaction: Any = None
_saved: dict[int, ctypes.Array[ctypes.c_char]] = {}
_scratch = ctypes.create_string_buffer(_STRUCT_BYTES)
_lock = threading.Lock()
_compared: tuple[slice, ...] = ()


def _libc_sigaction() -> Any:
    """The C library's ``sigaction``, or None where there is none or its layout is not known."""
    if sys.platform not in _FLAGS_AT or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None  # the layouts above are those of 64-bit Linux and macOS
    try:
        function = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError, TypeError):  # Windows: no process-wide C namespace
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def capture() -> None:
    """Record the fault handlers as they are now (call right after the JVM has started) and
    have them put back at interpreter exit, before JPype stops the JVM (Java runs then)."""
    global _sigaction, _compared
    function = _libc_sigaction()
    if function is None:
        return
    flags_at = _FLAGS_AT[sys.platform]
    _compared = (slice(0, 16), slice(flags_at, flags_at + 4))  # handler, mask's first word, flags
    for sig in FAULT_SIGNALS:
        saved = ctypes.create_string_buffer(_STRUCT_BYTES)
        if function(sig, None, saved) == 0:
            _saved[sig] = saved
    if _sigaction is None:
        atexit.register(restore)  # runs before JPype's own handler, registered earlier
    _sigaction = function


def restore() -> tuple[int, ...]:
    """Put back each recorded handler that was changed since :func:`capture`; the signals
    put back."""
    if _sigaction is None:
        return ()
    changed = []
    with _lock:  # one scratch buffer; ctypes lets other threads run during the calls
        for sig, saved in _saved.items():
            _sigaction(sig, None, _scratch)
            now, then = _scratch.raw, saved.raw
            if any(now[part] != then[part] for part in _compared):
                _sigaction(sig, saved, None)
                changed.append(sig)
    return tuple(changed)
