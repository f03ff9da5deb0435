"""Pipe protocol shared by the kernel, the supervisor and the workers (all our own processes).

Messages are pickled over :class:`multiprocessing.connection.Connection` objects wrapped around plain
pipe file descriptors: a request is ``(method, kwargs)``, a reply ``("ok", value)`` or
``("err", message)``. Every wait is bounded (``timeout_s``).
"""
from __future__ import annotations

import ctypes
import os
import signal
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1  # linux/prctl.h


class StoreLabError(RuntimeError):
    """The store (or a process of the lab) failed or did not answer in time."""


def conn(read_fd: int, write_fd: int) -> tuple[Connection, Connection]:
    return Connection(read_fd, writable=False), Connection(write_fd, readable=False)


def ask(rx: Connection, tx: Connection, op: str, timeout_s: float, **kwargs):
    """Send one request and wait at most ``timeout_s`` for its reply."""
    try:
        tx.send((op, kwargs))
        if not rx.poll(timeout_s):
            raise StoreLabError(f"{op}: no answer within {timeout_s:g} s")
        status, value = rx.recv()
    except (EOFError, OSError, BrokenPipeError) as err:
        raise StoreLabError(f"{op}: the process on the other end of the pipe is gone ({err})") from None
    if status != "ok":
        raise StoreLabError(f"{op}: {value}")
    return value


def die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the process that started it dies (PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() == 1:  # parent already gone before prctl took effect
        os._exit(1)


def stop_pids(procs, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``, each :class:`subprocess.Popen` by its PID; reap all."""
    import time

    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=5)
