"""Pipe protocol shared by the kernel, the supervisor and the workers (all our own processes).

Messages are pickled over :class:`multiprocessing.connection.Connection` objects wrapped around plain
pipe file descriptors. A request is ``(id, method, kwargs)``, its reply ``(id, "ok", value)`` or
``(id, "err", message)``: a :class:`Channel` sends one request at a time (a lock) and takes only the
reply whose id is its request's, so a reply that comes after its call timed out or was interrupted
(Ctrl-C) is discarded, never returned to a later call. A message is sent or read whole: a Ctrl-C that
arrives meanwhile is raised right after. Every wait is bounded (``timeout_s``).
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import threading
import time
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1  # linux/prctl.h


#: The requests a worker serves ("setup" first: the supervisor's own), in one place for the worker, the
#: supervisor and the kernel (which import this module, not the two process entry points run with -m).
WORKER_METHODS = ("setup", "put", "get", "get_rc", "is_exist", "replica_desc", "replay", "remove_all")


class StoreLabError(RuntimeError):
    """The store (or a process of the lab) failed or did not answer in time."""


class PeerGone(StoreLabError):
    """The other end of a channel closed it: it exited or was killed."""


def conn(read_fd: int, write_fd: int) -> tuple[Connection, Connection]:
    return Connection(read_fd, writable=False), Connection(write_fd, readable=False)


@contextlib.contextmanager
def whole_message():
    """Hold back SIGINT (Ctrl-C, a Jupyter interrupt) while a message crosses a pipe, then raise it:
    half a message would leave the stream unreadable. Other threads never receive SIGINT."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    except ValueError:  # no signal handling in this interpreter (embedded)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if caught:
            if callable(old):
                old(signal.SIGINT, caught[0])
            raise KeyboardInterrupt


class Channel:
    """One request–reply pipe pair to one process (``peer`` names it in errors)."""

    def __init__(self, read_fd: int, write_fd: int, peer: str, cancel=None):
        self.rx, self.tx = conn(read_fd, write_fd)
        self.peer = peer
        self.cancel = cancel  # called when a call is abandoned (timed out, interrupted): stop its work
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.stale = 0  # replies discarded: their call had timed out or was interrupted

    def ask(self, op: str, timeout_s: float, **kwargs):
        """Send one request and wait at most ``timeout_s`` for its own reply (waiting for another
        thread's call on this channel counts too)."""
        deadline = time.monotonic() + timeout_s
        if not self.lock.acquire(timeout=timeout_s):
            raise StoreLabError(f"{op}: {self.peer} was busy with another call for {timeout_s:g} s")
        try:
            try:
                rid = self.post(op, **kwargs)
            except KeyboardInterrupt:   # raised once the request was sent whole: stop its work
                self._abandon()
                raise
            return self.collect(rid, op, timeout_s, deadline)
        finally:
            self.lock.release()

    def post(self, op: str, **kwargs) -> int:
        """Send a request (whole); returns its id for :meth:`collect`. Callers hold :attr:`lock`
        unless no other thread can use the channel yet (while a lab starts)."""
        rid = next(self.ids)
        try:
            with whole_message():
                self.tx.send((rid, op, kwargs))
        except (EOFError, OSError) as err:
            raise PeerGone(f"{op}: {self.peer} is gone ({err or type(err).__name__})") from None
        return rid

    def collect(self, rid: int, op: str, timeout_s: float, deadline: float | None = None):
        """The value of reply ``rid``, waiting at most ``timeout_s`` (or until ``deadline``); replies
        to earlier requests (whose call timed out or was interrupted) are discarded on the way. A call
        abandoned here (timeout, Ctrl-C) asks the peer to stop its work (:attr:`cancel`)."""
        deadline = time.monotonic() + timeout_s if deadline is None else deadline
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not self.rx.poll(left):
                    self._abandon()
                    raise StoreLabError(f"{op}: no answer from {self.peer} within {timeout_s:g} s "
                                        f"(its work was cancelled; a late answer will be discarded)")
                with whole_message():
                    got = self.rx.recv()
                if got[0] == rid:
                    break
                self.stale += 1
        except (EOFError, OSError) as err:
            raise PeerGone(f"{op}: {self.peer} is gone ({err or type(err).__name__})") from None
        except KeyboardInterrupt:
            self._abandon()
            raise
        _, status, value = got
        if status != "ok":
            raise StoreLabError(f"{op}: {value}")
        return value

    def _abandon(self) -> None:
        if self.cancel is not None:
            try:
                self.cancel()
            except OSError:
                pass

    def close(self) -> None:
        for c in (self.rx, self.tx):
            try:
                c.close()
            except OSError:
                pass


def serve(rx: Connection, tx: Connection, handler, methods: tuple[str, ...], begin=None):
    """Answer requests until EOF (returns None) or an ``exit`` request (returns its id, unanswered:
    the caller answers once it has cleaned up). Each ``(id, method, kwargs)`` gets ``(id, "ok",
    handler.method(**kwargs))`` or ``(id, "err", why)``; only ``methods`` are served. ``begin()``
    runs before each request (e.g. clears a cancellation meant for the one before)."""
    for _ in range(10**9):  # bounded: one request per iteration
        try:
            rid, method, kwargs = rx.recv()
        except (EOFError, OSError):
            return None  # the other end is gone
        if method == "exit":
            return rid
        if begin is not None:
            begin()
        if method not in methods:
            out = ("err", f"unknown request {method!r}; allowed: {', '.join(methods)}")
        else:
            try:
                out = ("ok", getattr(handler, method)(**kwargs))
            except Exception as err:  # report, keep serving
                out = ("err", f"{type(err).__name__}: {err}")
        if not reply(tx, rid, *out):
            return None
    return None


def reply(tx: Connection, rid, status: str, value) -> bool:
    """Send one reply; False when the asker is gone."""
    try:
        tx.send((rid, status, value))
        return True
    except (OSError, EOFError):
        return False


def die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the thread that started it ends (PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() == 1:  # parent already gone before prctl took effect
        os._exit(1)


def stop_pids(procs, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``, each :class:`subprocess.Popen` by its PID; reap all."""
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
