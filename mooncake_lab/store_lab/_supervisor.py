"""The lab's supervisor: runs inside the lab's private network namespace (or, opted in, on the host).

``python -m mooncake_lab.store_lab._supervisor READ_FD WRITE_FD PRIVATE`` brings the namespace's
loopback up (PRIVATE=1), then starts ``mooncake_master`` and the worker processes as its own
children (each dies with it: PR_SET_PDEATHSIG), and answers the kernel's requests over the pipes.
When the kernel's end of the pipe closes (the kernel stopped or was killed), or on SIGTERM, it stops
every child by PID and exits.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ._proto import StoreLabError, ask, conn, die_with_parent, stop_pids

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


class Supervisor:
    def __init__(self):
        self.logdir = Path(tempfile.mkdtemp(prefix="mooncake-store-lab-"))
        self.master = None
        self.ports: dict[str, int] = {}
        self.workers: dict[str, tuple[subprocess.Popen, object, object]] = {}

    # --- processes -------------------------------------------------------------------------
    def start_master(self, flags: dict, timeout_s: float = 15.0):
        if self.master is not None:
            raise StoreLabError("the master is already running")
        self.ports = {"rpc": free_port(), "metadata": free_port(), "metrics": free_port()}
        args = [master_binary(), f"--rpc_port={self.ports['rpc']}", "--rpc_address=127.0.0.1",
                "--enable_http_metadata_server=true", "--http_metadata_server_host=127.0.0.1",
                f"--http_metadata_server_port={self.ports['metadata']}",
                "--metrics_host=127.0.0.1", f"--metrics_port={self.ports['metrics']}",
                "--logtostderr=true"]
        args += [f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in flags.items()]
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
            rx, tx = conn(r2, w1)
            self.workers[name] = (p, rx, tx)
        common = {"hostname": "127.0.0.1", "metadata_server": f"http://127.0.0.1:{self.ports['metadata']}/metadata",
                  "master": f"127.0.0.1:{self.ports['rpc']}"}
        for name, seg, buf in specs:  # segments first, in order: node names map to segments
            self.workers[name][2].send(("setup", dict(common, segment_bytes=seg, buffer_bytes=buf)))
        out, deadline = {}, time.monotonic() + timeout_s
        for name, _, _ in specs:
            p, rx, _ = self.workers[name]
            try:
                if not rx.poll(max(0.0, deadline - time.monotonic())):
                    raise StoreLabError(f"setup: no answer within {timeout_s:g} s")
                status, value = rx.recv()
            except (EOFError, OSError) as err:
                raise StoreLabError(f"worker {name!r} died during setup ({err}); log: {self.log_tail(name)}") from None
            if status != "ok":
                raise StoreLabError(f"worker {name!r}: {value}; log: {self.log_tail(name)}")
            out[name] = {"pid": p.pid, "segment": value}
        return out

    def call(self, name: str, method: str, kwargs: dict, call_timeout_s: float = 30.0):
        if name not in self.workers:
            raise StoreLabError(f"no worker {name!r}; have {sorted(self.workers)}")
        p, rx, tx = self.workers[name]
        if p.poll() is not None:
            raise StoreLabError(f"worker {name!r} is not running (exit {p.returncode})")
        return ask(rx, tx, method, call_timeout_s, **kwargs)

    def kill(self, name: str, sig: int = int(signal.SIGKILL)):
        p = self.master if name == "master" else self.workers.get(name, (None,))[0]
        if p is None:
            raise StoreLabError(f"no process {name!r}")
        if p.poll() is not None:  # reaped: its PID may be someone else's now
            raise StoreLabError(f"{name!r} has already stopped (exit {p.returncode})")
        os.kill(p.pid, sig)
        p.wait(timeout=10)
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
        for _, rx, tx in self.workers.values():
            for c in (rx, tx):
                try:
                    c.close()
                except OSError:
                    pass
        self.workers.clear()
        self.master = None

    def close(self):
        """:meth:`stop`, then remove the processes' logs (nothing left in /tmp)."""
        self.stop()
        shutil.rmtree(self.logdir, ignore_errors=True)


def main(read_fd: int, write_fd: int, private: bool) -> None:
    rx, tx = conn(read_fd, write_fd)
    sup = Supervisor()

    def on_term(signum, frame):
        sup.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        if private:
            loopback_up()
        tx.send(("ok", {"pid": os.getpid(), "listening": listening_sockets()}))
    except Exception as err:
        tx.send(("err", f"could not bring up the namespace's loopback: {err}"))
        return
    try:
        for _ in range(10**7):  # bounded: one request per iteration
            try:
                method, kwargs = rx.recv()
            except (EOFError, OSError):
                break  # the kernel is gone
            if method == "exit":
                break
            try:
                tx.send(("ok", getattr(sup, method)(**kwargs)))
            except Exception as err:
                tx.send(("err", f"{type(err).__name__}: {err}"))
    finally:
        sup.close()
        try:
            tx.send(("ok", None))
        except OSError:
            pass


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1")
