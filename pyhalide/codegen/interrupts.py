"""Ctrl-C during a realize: native code polls a flag that a native SIGINT handler sets.

Python runs its signal handlers between bytecodes, so a KeyboardInterrupt would wait for the
generated function to return. Instead, a tiny JIT-compiled handler is put in front of Python's
own C-level SIGINT handler: it sets `_flag` and then calls Python's handler, so Python still sees
the signal. Generated code reads the flag (through the address in its scalars array) at each
iteration of its outermost loops and whenever a parallel task takes an iteration, and returns
INTERRUPTED; the caller then lets Python raise the KeyboardInterrupt, and the process stays
usable. Where Python ignores SIGINT or leaves the default (the process dies), or where
`signal.signal` replaced the handler since, nothing is chained (until the next run reinstalls).
Linux only: elsewhere the flag is never set and a realize runs to its end, as before.
"""

from __future__ import annotations

import _signal  # signal.getsignal without the enum conversion: this runs at every realize
import ctypes
import signal
import sys
import threading

INTERRUPTED = -1  # the generated function's return code; assert failures are positive

_flag = ctypes.c_int32(0)
FLAG_ADDRESS = ctypes.addressof(_flag)
_SA_SIGINFO = 4
_SIGINT = int(signal.SIGINT)
_lock = threading.Lock()
_chained_to: list = [None]  # the Python-level handler in force when ours was installed
_keep: list = []  # the JIT-compiled handlers, alive for the life of the process


class _Sigaction(ctypes.Structure):  # glibc's struct sigaction on Linux
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


def _handler_ir(previous: int) -> str:
    return (f"define void @pyhalide_on_sigint(i32 %sig) {{\n"
            f"  store atomic volatile i32 1, ptr inttoptr (i64 {FLAG_ADDRESS} to ptr) monotonic, align 4\n"
            f"  call void inttoptr (i64 {previous} to ptr)(i32 %sig)\n"
            f"  ret void\n}}\n")


def _install() -> None:
    """Chain our handler in front of the C-level SIGINT handler Python installed (under _lock)."""
    from .jit import JITFunction

    libc = ctypes.CDLL(None, use_errno=True)
    old = _Sigaction()
    if libc.sigaction(signal.SIGINT, None, ctypes.byref(old)) != 0:
        return
    if old.handler in (None, 0, 1) or old.flags & _SA_SIGINFO:
        return  # SIG_DFL, SIG_IGN, or a three-argument handler not Python's
    if _keep and old.handler == _keep[-1].address:
        return
    fn = JITFunction(_handler_ir(old.handler), "pyhalide_on_sigint", disk_cache=False)
    new = _Sigaction()
    new.handler, new.mask, new.flags, new.restorer = fn.address, old.mask, old.flags, old.restorer
    if libc.sigaction(signal.SIGINT, ctypes.byref(new), None) == 0:
        _keep.append(fn)


def arm() -> None:
    """Before a run: clear the flag, and chain the handler if Python's changed since (cheap)."""
    _flag.value = 0
    current = _signal.getsignal(_SIGINT)
    if current is not _chained_to[0] and sys.platform.startswith("linux"):
        with _lock:
            if current is not _chained_to[0]:
                _chained_to[0] = current
                if callable(current):
                    _install()


def raise_interrupt() -> None:
    """After a run that stopped at a poll: Python's handler has the signal pending; run it now."""
    _flag.value = 0
    if threading.current_thread() is threading.main_thread():
        ctypes.pythonapi.PyErr_CheckSignals()  # raises what the handler raises (KeyboardInterrupt)
    raise KeyboardInterrupt("realize interrupted; its outputs are incomplete")
