"""A hands-on lab with the real Mooncake Store (PyPI ``mooncake-transfer-engine-non-cuda``).

:class:`StoreLab` starts ONE supervisor process inside a fresh private network namespace (``unshare
--net`` as root, ``unshare --user --map-root-user --net`` otherwise): it has only its own loopback,
so the master's HTTP metadata server (which binds ``0.0.0.0`` whatever it is told) and the Transfer
Engine's wildcard ports are reachable from nowhere. The supervisor starts ``mooncake_master`` and
one process per store client ("memory nodes" that contribute a DRAM segment, and segment-less
writer/reader clients), and the kernel talks to it over pipes. Every process is stopped by PID on
:meth:`StoreLab.close`, on ``with`` exit and at interpreter exit (atexit); they also die with their
parent (PR_SET_PDEATHSIG) and the supervisor stops its children when the kernel's pipe closes.

Where no namespace can be made, :class:`StoreLab` refuses to start unless
``allow_host_network=True`` or ``MOONCAKE_LAB_STORE_HOST_NETWORK=1`` says to run on the host.
"""
from __future__ import annotations

import atexit
import os
import platform
import shutil
import signal
import subprocess
import sys
import weakref
from functools import lru_cache

from .. import validate as v
from ._proto import StoreLabError, ask, conn, stop_pids

__all__ = ["StoreLab", "StoreLabError", "start_all", "store_status", "isolation", "HOST_NETWORK_ENV", "PACKAGE"]

PACKAGE = "mooncake-transfer-engine-non-cuda"
HOST_NETWORK_ENV = "MOONCAKE_LAB_STORE_HOST_NETWORK"
MiB = 1 << 20

_OPEN: "weakref.WeakSet[StoreLab]" = weakref.WeakSet()


@lru_cache(maxsize=1)
def store_status() -> tuple[bool, str]:
    """(True, version) where ``import mooncake.store`` works in a fresh Python, else (False, why)."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return False, (f"the Mooncake Store wheels exist for Linux x86_64 only (this is {sys.platform} "
                       f"{platform.machine()})")
    try:
        r = subprocess.run([sys.executable, "-c", "import mooncake.store"], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, "importing mooncake.store took over 60 s"
    except OSError as err:
        return False, f"could not start {sys.executable} to import mooncake.store ({err})"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        hint = (" (install Debian's libibverbs1 libnuma1 libcurl4)" if ".so" in last else
                f" (pip install -e \".[store]\" installs {PACKAGE})")
        return False, f"import mooncake.store failed: {last}{hint}"
    from importlib.metadata import version

    return True, version(PACKAGE)


@lru_cache(maxsize=1)
def isolation() -> tuple[list[str] | None, str]:
    """The command prefix that runs a process in a private network namespace, or (None, why not)."""
    exe = shutil.which("unshare")
    if exe is None:
        return None, "the `unshare` program (util-linux) is not installed"
    tries = [[exe, "--net"]] if os.geteuid() == 0 else []
    tries.append([exe, "--user", "--map-root-user", "--net"])
    errors = []
    for cmd in tries:
        try:
            r = subprocess.run(cmd + ["true"], capture_output=True, text=True, timeout=10,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            errors.append(f"{' '.join(cmd)}: timed out")
            continue
        except OSError as err:
            errors.append(f"{' '.join(cmd[1:])}: {err}")
            continue
        if r.returncode == 0:
            return cmd, " ".join(cmd[1:])
        errors.append(f"{' '.join(cmd[1:])}: {r.stderr.strip() or r.returncode}")
    return None, "; ".join(errors)


EXPOSURE = ("the master's RPC port, its HTTP metadata server (bound to 0.0.0.0 whatever it is told), "
            "its metrics port, and every client's Transfer Engine port (wildcard address, random port "
            "in 12300–17000): an unauthenticated KV store anyone on your network could read and write")


def _keys(keys) -> list[str]:
    keys = [keys] if isinstance(keys, str) else list(keys)
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise v.fail("keys", keys, "a non-empty list of non-empty strings")
    return keys


def _size(size) -> int:
    return v.integer(size, "size", lo=1, hi=1 << 30)  # bytes per value


#: Flags the lab sets itself (loopback addresses, its ports, the metadata server): not overridable.
RESERVED_FLAGS = ("rpc_port", "rpc_address", "enable_http_metadata_server", "http_metadata_server_host",
                  "http_metadata_server_port", "metrics_host", "metrics_port", "logtostderr")
#: ``ReplicateConfig`` settings :meth:`StoreLab.put` and :meth:`StoreLab.replay` accept.
CONFIG_KEYS = ("replica_num", "preferred_segment", "hard_pin", "soft_pin")


def _die_with_parent():
    from ._proto import die_with_parent

    die_with_parent()


class StoreLab:
    """The real Mooncake Store on this machine, isolated: ``with StoreLab() as lab: ...``.

    ``nodes`` memory nodes each contribute ``segment_mib`` MiB of DRAM; ``clients`` own no segment,
    so every byte they put or get crosses the Transfer Engine (TCP). ``master_flags`` are passed to
    ``mooncake_master`` (e.g. ``default_kv_lease_ttl="1ms"``, ``client_ttl=3``).
    """

    def __init__(self, nodes: int = 2, segment_mib: int = 64, clients=("writer", "reader"),
                 buffer_mib: int = 64, master_flags: dict | None = None,
                 allow_host_network: bool | None = None, timeout_s: float = 60.0):
        self.nodes = [f"node{i}" for i in range(v.integer(nodes, "nodes", lo=1, hi=8))]
        self.segment_mib = v.integer(segment_mib, "segment_mib", lo=1, hi=4096)
        self.buffer_mib = v.integer(buffer_mib, "buffer_mib", lo=1, hi=4096)
        if isinstance(clients, str) or not isinstance(clients, (list, tuple)):
            raise v.fail("clients", clients, "a list or tuple of client names, e.g. ('writer', 'reader')")
        self.clients = list(clients)
        if len(set(self.clients)) != len(self.clients) or set(self.clients) & set(self.nodes) or \
                not all(isinstance(c, str) and c.isidentifier() for c in self.clients):
            raise v.fail("clients", clients, "distinct names (identifiers), none of them 'nodeN'")
        if master_flags is not None and not isinstance(master_flags, dict):
            raise v.fail("master_flags", master_flags, "a dict of mooncake_master flags, e.g. {'client_ttl': 3}")
        self.master_flags = dict(master_flags or {})
        for k, val in self.master_flags.items():
            if not (isinstance(k, str) and k.isidentifier() and k.islower()):
                raise v.fail("master_flags", k, "mooncake_master flag names (e.g. 'client_ttl')")
            if k in RESERVED_FLAGS:
                raise v.fail("master_flags", k, f"a flag the lab does not set itself (it sets {', '.join(RESERVED_FLAGS)})")
            if not isinstance(val, (str, int, float, bool)) or any(ch.isspace() for ch in str(val)) or str(val) == "":
                raise v.fail(f"master_flags[{k!r}]", val, "a number, a bool or a string without spaces")
        self.timeout_s = v.real(timeout_s, "timeout_s", lo=1, hi=600)
        if allow_host_network is None:
            allow_host_network = os.environ.get(HOST_NETWORK_ENV, "") == "1"
        self.allow_host_network = v.flag(allow_host_network, "allow_host_network")
        self._proc: subprocess.Popen | None = None
        self._rx = self._tx = None
        self.segments: dict[str, str] = {}
        self.pids: dict[str, int] = {}
        self.isolated = False

    # --- life cycle ------------------------------------------------------------------------
    def start(self) -> "StoreLab":
        """Start the supervisor, the master and every node and client; returns ``self``."""
        start_all([self])
        return self

    def _spawn(self) -> None:
        ok, why = store_status()
        if not ok:
            raise StoreLabError(why)
        if self._proc is not None:
            raise StoreLabError("this StoreLab is already started")
        prefix, how = isolation()
        if prefix is None:
            if not self.allow_host_network:
                raise StoreLabError(
                    f"no private network namespace can be made here ({how}); running the store on the "
                    f"host network would expose {EXPOSURE}. Refusing. To run it anyway on a machine "
                    f"you trust, pass StoreLab(allow_host_network=True) or set {HOST_NETWORK_ENV}=1.")
            prefix = []
        self.isolated = bool(prefix)
        r1, w1 = os.pipe()  # kernel -> supervisor
        r2, w2 = os.pipe()  # supervisor -> kernel
        cmd = prefix + [sys.executable, "-m", "mooncake_lab.store_lab._supervisor", str(r1), str(w2),
                        "1" if prefix else "0"]
        # Started from this (the calling) thread: PR_SET_PDEATHSIG fires when the creating thread exits.
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(r1, w2),
                                      preexec_fn=_die_with_parent)
        os.close(r1)
        os.close(w2)
        self._rx, self._tx = conn(r2, w1)
        _OPEN.add(self)

    def _recv(self, what: str):
        if not self._rx.poll(self.timeout_s):
            raise StoreLabError(f"{what}: no answer within {self.timeout_s:g} s")
        try:
            status, value = self._rx.recv()
        except (EOFError, OSError) as err:
            raise StoreLabError(f"{what}: the supervisor is gone ({err})") from None
        if status != "ok":
            raise StoreLabError(f"{what}: {value}")
        return value

    def _specs(self) -> list:
        return [(n, self.segment_mib * MiB, self.buffer_mib * MiB) for n in self.nodes] + \
            [(c, 0, self.buffer_mib * MiB) for c in self.clients]

    def __enter__(self) -> "StoreLab":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process of the lab by PID (the supervisor stops its children first) and wait."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            try:
                self._tx.send(("exit", {}))
                self._rx.poll(8)
            except (OSError, EOFError):
                pass
        # The supervisor stops its children by PID before it exits; were it killed instead, they get
        # SIGKILL from the kernel (PR_SET_PDEATHSIG). Their PIDs are not signalled from here: once
        # they are gone, those numbers may belong to someone else's processes.
        stop_pids([self._proc], grace_s=5)
        for c in (self._rx, self._tx):
            try:
                c.close()
            except OSError:
                pass
        self._proc = None
        _OPEN.discard(self)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # --- requests --------------------------------------------------------------------------
    def _ask(self, op: str, timeout_s: float | None = None, **kwargs):
        if not self.running:
            raise StoreLabError("the lab is not running: use `with StoreLab() as lab:` or lab.start()")
        return ask(self._rx, self._tx, op, timeout_s or self.timeout_s, **kwargs)

    def call(self, who: str, method: str, timeout_s: float | None = None, **kwargs):
        """Ask the store client ``who`` (a node or a client name) to run ``method``."""
        t = timeout_s or self.timeout_s
        return self._ask("call", timeout_s=t + 5, name=who, method=method, kwargs=kwargs, call_timeout_s=t)

    def _config(self, cfg: dict, where: str, extra=()) -> dict:
        """Check ``ReplicateConfig`` settings (:data:`CONFIG_KEYS`) before they reach a worker."""
        for k in cfg:
            if k not in CONFIG_KEYS + tuple(extra):
                raise v.fail(k, cfg[k], f"one of the settings {', '.join(CONFIG_KEYS + tuple(extra))}", where)
        if "replica_num" in cfg:
            v.integer(cfg["replica_num"], "replica_num", lo=1, hi=len(self.nodes), where=where)
        if cfg.get("preferred_segment") is not None:
            v.choice(cfg["preferred_segment"], "preferred_segment", sorted(self.segments.values()), where)
        for k in ("hard_pin", "soft_pin"):
            if k in cfg:
                v.flag(cfg[k], k, where)
        if "retries" in cfg:
            v.integer(cfg["retries"], "retries", lo=0, hi=1000, where=where)
        return cfg

    def put(self, keys, size, who="writer", api="put", **cfg):
        """Put each key's value (``size`` bytes, derived from the key) from client ``who``: rc per key, seconds."""
        return self.call(who, "put", keys=_keys(keys), size=_size(size),
                         api=v.choice(api, "api", ("put", "put_batch", "batch_put_from")),
                         **self._config(cfg, "StoreLab.put", extra=("retries",)))

    def get(self, keys, size, who="reader", api="get", check=True):
        """Read keys on client ``who``; ``ok`` per key says the content matched its checksum."""
        return self.call(who, "get", keys=_keys(keys), size=_size(size),
                         api=v.choice(api, "api", ("get", "get_batch", "batch_get_into")), check=v.flag(check, "check"))

    def get_rc(self, key, size, who="reader"):
        """One ``get_into``: the bytes read, or the store's negative error code."""
        return self.call(who, "get_rc", key=_keys([key])[0], size=_size(size))

    def is_exist(self, keys, who="reader"):
        return self.call(who, "is_exist", keys=_keys(keys))

    def replica_desc(self, key, who="reader"):
        return self.call(who, "replica_desc", key=_keys([key])[0])

    def replay(self, keys, size, who="writer", **cfg):
        """``is_exist``-before-``put`` over ``keys`` in order; ``hits`` is a bool array."""
        import numpy as np

        r = self.call(who, "replay", keys=_keys(keys), size=_size(size),
                      **self._config(cfg, "StoreLab.replay", extra=("retries",)))
        r["hits"] = np.frombuffer(r["hits"], dtype=np.int8).astype(bool)
        return r

    def kill(self, who: str, sig: int = int(signal.SIGKILL)) -> int:
        """Send ``sig`` (default SIGKILL) to one process of the lab (a node, a client or "master")."""
        rc = self._ask("kill", name=who, sig=v.integer(sig, "sig", lo=1, hi=int(signal.SIGRTMAX)))
        self.pids.pop(who, None)
        return rc

    def http(self, path: str, server: str = "metrics") -> str:
        """GET ``path`` from the master's metrics/admin server (or its ``"metadata"`` server)."""
        if not (isinstance(path, str) and path.startswith("/") and path.isprintable() and " " not in path):
            raise v.fail("path", path, "a URL path starting with '/', e.g. '/metrics/summary'", "StoreLab.http")
        return self._ask("http", path=path, server=v.choice(server, "server", ("metrics", "metadata"), "StoreLab.http"))

    def live_pids(self) -> dict[str, int]:
        return self._ask("pids")

    def listening(self) -> list[tuple[str, int]]:
        """Listening TCP sockets (address, port) inside the lab's network namespace."""
        return [tuple(x) for x in self._ask("listening")]


def start_all(labs) -> list:
    """Start several labs at once (their processes start in parallel); on any error all are closed."""
    labs = list(labs)
    try:
        for lab in labs:
            lab._spawn()
        for lab in labs:
            lab.pids["supervisor"] = lab._recv("supervisor start")["pid"]
        for lab in labs:
            lab._tx.send(("start_master", {"flags": lab.master_flags}))
        for lab in labs:
            lab.ports = lab._recv("start_master")
            lab.pids["master"] = lab.ports.pop("pid")
        for lab in labs:
            lab._tx.send(("start_workers", {"specs": lab._specs()}))
        for lab in labs:
            for name, info in lab._recv("start_workers").items():
                lab.pids[name] = info["pid"]
                if name in lab.nodes:
                    lab.segments[name] = info["segment"]
    except BaseException:
        for lab in labs:
            lab.close()
        raise
    return labs


@atexit.register
def _close_all() -> None:
    for lab in list(_OPEN):
        lab.close()
