"""The lab's supervisor: runs inside the lab's private network namespace (or, opted in, on the host).

``python -m mooncake_lab.store_lab._supervisor READ_FD WRITE_FD PRIVATE`` brings the namespace's
loopback up (PRIVATE=1), then starts ``mooncake_master`` and the worker processes as its own
children (each dies with it: PR_SET_PDEATHSIG), and answers the kernel's requests over the pipes.
When the kernel's end of the pipe closes (the kernel stopped or was killed), or on SIGTERM, it stops
every child by PID and exits; it also watches its parent (the kernel) and does the same, removing
its log folder, within a fraction of a second of the kernel's death — even a SIGKILL.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from . import logs
from ._proto import WORKER_METHODS, Channel, StoreLabError, conn, die_with_parent, reply, serve, stop_pids

# The Transfer Engine looks for a LAN address unless told which one to advertise; in the namespace
# there is only loopback. (It still binds its port on the wildcard address: hence the namespace.)
WORKER_ENV = {"MC_TCP_BIND_ADDRESS": "127.0.0.1", "MC_STORE_CLIENT_SETUP_RETRIES": "3"}

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h


def loopback_up() -> None:
    """``ip link set lo up`` without iproute2: the SIOCSIFFLAGS ioctl on ``lo``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def listening_sockets() -> list[tuple[str, int]]:
    """Every listening TCP socket of this network namespace: (address, port), from /proc/net/tcp{,6}."""
    out = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A":  # TCP_LISTEN
                continue
            hexaddr, hexport = f[1].split(":")
            raw = bytes.fromhex(hexaddr)
            if name == "tcp":
                addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:
                addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
            out.append((addr, int(hexport, 16)))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def master_binary() -> str:
    spec = importlib.util.find_spec("mooncake")
    if spec is None or not spec.submodule_search_locations:
        raise StoreLabError("the mooncake package is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))) / "mooncake_master")


def master_args(binary: str, ports: dict, flags: dict) -> list[str]:
    """``mooncake_master``'s command line: the user's ``flags`` first, the lab's own flags last (the
    last occurrence of a flag wins), so nothing before them can move the lab's addresses or ports."""
    own = [f"--rpc_port={ports['rpc']}", "--rpc_address=127.0.0.1",
           "--enable_http_metadata_server=true", "--http_metadata_server_host=127.0.0.1",
           f"--http_metadata_server_port={ports['metadata']}",
           "--metrics_host=127.0.0.1", f"--metrics_port={ports['metrics']}", "--logtostderr=true"]
    user = [f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in flags.items()]
    return [binary, *user, *own]


class Supervisor:
    #: The requests the kernel may send.
    OPS = ("start_master", "start_workers", "call", "kill", "pids", "http", "listening")
    #: Signals :meth:`kill` sends: each ends a process (a stopped one would leave the lab waiting).
    SIGNALS = (int(signal.SIGKILL), int(signal.SIGTERM))

    def __init__(self):
        self.logdir = logs.claim_logdir(logs.LOG_PREFIX)
        self.master = None
        self.ports: dict[str, int] = {}
        self.workers: dict[str, tuple[subprocess.Popen, Channel]] = {}
        self.current: subprocess.Popen | None = None  # the worker whose answer is awaited

    def cancel(self, *_):
        """SIGUSR1 (the kernel abandoned its call): ask the worker it waits for to stop that work."""
        p = self.current
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGUSR1)

    # --- processes -------------------------------------------------------------------------
    def start_master(self, flags: dict, timeout_s: float = 15.0):
        if self.master is not None:
            raise StoreLabError("the master is already running")
        self.ports = {"rpc": free_port(), "metadata": free_port(), "metrics": free_port()}
        args = master_args(master_binary(), self.ports, flags)
        log = open(self.logdir / "master.log", "wb")
        self.master = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       preexec_fn=die_with_parent, close_fds=True)
        deadline = time.monotonic() + timeout_s
        want = set(self.ports.values())
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                raise StoreLabError(f"mooncake_master exited ({self.master.returncode}): {self.log_tail('master')}")
            if want <= {p for _, p in listening_sockets()}:
                return dict(self.ports, pid=self.master.pid)
            time.sleep(0.05)
        raise StoreLabError(f"mooncake_master did not listen within {timeout_s:g} s: {self.log_tail('master')}")

    def start_workers(self, specs: list, timeout_s: float = 30.0):
        """Start one worker per ``(name, segment_bytes, buffer_bytes)`` — all at once — and set each up."""
        for name, _, _ in specs:
            if name in self.workers:
                raise StoreLabError(f"worker {name!r} already exists")
        for name, _, _ in specs:
            r1, w1 = os.pipe()  # supervisor -> worker
            r2, w2 = os.pipe()  # worker -> supervisor
            log = open(self.logdir / f"{name}.log", "wb")
            p = subprocess.Popen([sys.executable, "-m", "mooncake_lab.store_lab._worker", str(r1), str(w2)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(r1, w2),
                                 preexec_fn=die_with_parent, env=dict(os.environ, **WORKER_ENV))
            os.close(r1)
            os.close(w2)
            self.workers[name] = (p, Channel(r2, w1, f"worker {name!r}", cancel=lambda p=p: (
                p.poll() is None and os.kill(p.pid, signal.SIGUSR1))))
        common = {"hostname": "127.0.0.1", "metadata_server": f"http://127.0.0.1:{self.ports['metadata']}/metadata",
                  "master": f"127.0.0.1:{self.ports['rpc']}"}
        # all set up at once, each in a thread (segments first, in order: node names map to segments)
        done: dict[str, object] = {}

        def setup(name, seg, buf):
            try:
                done[name] = self.workers[name][1].ask(
                    "setup", timeout_s, **dict(common, segment_bytes=seg, buffer_bytes=buf))
            except StoreLabError as err:
                done[name] = err

        threads = [threading.Thread(target=setup, args=spec, daemon=True) for spec in specs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s + 1)
        out = {}
        for name, _, _ in specs:
            got = done.get(name, StoreLabError(f"setup: no answer within {timeout_s:g} s"))
            if isinstance(got, StoreLabError):
                raise StoreLabError(f"worker {name!r}: {got}; log: {self.log_tail(name)}")
            out[name] = {"pid": self.workers[name][0].pid, "segment": got}
        return out

    def call(self, name: str, method: str, kwargs: dict, call_timeout_s: float = 30.0):
        if name not in self.workers:
            raise StoreLabError(f"no worker {name!r}; have {sorted(self.workers)}")
        if method not in WORKER_METHODS or method == "setup":
            raise StoreLabError(f"no request {method!r}; allowed: {', '.join(WORKER_METHODS[1:])}")
        p, ch = self.workers[name]
        if p.poll() is not None:
            raise StoreLabError(f"worker {name!r} is not running (exit {p.returncode})")
        self.current = p
        try:
            return ch.ask(method, call_timeout_s, **kwargs)
        finally:
            self.current = None

    def kill(self, name: str, sig: int = int(signal.SIGKILL), timeout_s: float = 10.0):
        """Send ``sig`` (one of :data:`SIGNALS`) to one process and reap it; SIGKILL if it outlives
        ``timeout_s``. Returns its exit status (negative: the signal that ended it)."""
        if sig not in self.SIGNALS:
            raise StoreLabError(f"signal {sig} is not one that ends a process; allowed: SIGKILL (9), SIGTERM (15)")
        p = self.master if name == "master" else self.workers.get(name, (None,))[0]
        if p is None:
            raise StoreLabError(f"no process {name!r}")
        if p.poll() is not None:  # reaped: its PID may be someone else's now
            raise StoreLabError(f"{name!r} has already stopped (exit {p.returncode})")
        os.kill(p.pid, sig)
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=5)
            raise StoreLabError(f"{name!r} did not exit within {timeout_s:g} s of signal {sig}: it was SIGKILLed") from None
        return p.returncode

    def pids(self):
        out = {n: w[0].pid for n, w in self.workers.items() if w[0].poll() is None}
        if self.master is not None and self.master.poll() is None:
            out["master"] = self.master.pid
        out["supervisor"] = os.getpid()
        return out

    def http(self, path: str, server: str = "metrics", timeout_s: float = 5.0):
        url = f"http://127.0.0.1:{self.ports[server]}{path}"
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.read().decode("utf-8", "replace")

    def listening(self):
        return listening_sockets()

    def log_tail(self, name: str, n: int = 1500) -> str:
        try:
            return (self.logdir / f"{name}.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self):
        """Stop every child by PID: SIGTERM, SIGKILL after 1 s; reap them."""
        stop_pids([w[0] for w in self.workers.values()] + ([self.master] if self.master else []), grace_s=1.0)
        for _, ch in self.workers.values():
            ch.close()
        self.workers.clear()
        self.master = None

    def close(self):
        """:meth:`stop`, then remove the processes' logs (nothing left in /tmp)."""
        self.stop()
        logs.remove(self.logdir)


def watch_parent(parent: int, period_s: float = 0.2) -> None:
    """Background thread: when the kernel (``parent``) is gone — killed, even by SIGKILL — SIGTERM
    this process, whose handler stops every child and removes the log folder."""
    def run():
        while os.getppid() == parent:
            time.sleep(period_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=run, daemon=True, name="watch-kernel").start()


def main(read_fd: int, write_fd: int, private: bool, parent: int) -> None:
    # Ctrl-C (and a Jupyter interrupt, sent to the kernel's process group) is for the kernel: the
    # lab runs in a session of its own and ignores SIGINT anyway; it stops by PID.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rx, tx = conn(read_fd, write_fd)
    sup = Supervisor()

    def on_term(signum, frame):
        sup.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, sup.cancel)
    watch_parent(parent)
    try:
        if private:
            loopback_up()
        reply(tx, 0, "ok", {"pid": os.getpid(), "logdir": str(sup.logdir), "listening": listening_sockets()})
    except Exception as err:
        reply(tx, 0, "err", f"could not bring up the namespace's loopback: {err}")
        sup.close()
        return
    rid = None
    try:
        rid = serve(rx, tx, sup, Supervisor.OPS)
    finally:
        sup.close()
        if rid is not None:
            reply(tx, rid, "ok", None)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]))
