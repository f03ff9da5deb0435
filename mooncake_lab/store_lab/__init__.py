"""A hands-on lab with the real Mooncake Store (PyPI ``mooncake-transfer-engine-non-cuda``).

:class:`StoreLab` starts ONE supervisor process inside a fresh private network namespace (``unshare
--net`` as root, ``unshare --user --map-root-user --net`` otherwise): it has only its own loopback,
so the master's HTTP metadata server (which binds ``0.0.0.0`` whatever it is told) and the Transfer
Engine's wildcard ports are reachable from nowhere. The supervisor starts ``mooncake_master`` and
one process per store client ("memory nodes" that contribute a DRAM segment, and segment-less
writer/reader clients), and the kernel talks to it over pipes (each request has an id its reply
echoes: a late reply is discarded, never returned to the next call). Every process is stopped by PID
on :meth:`StoreLab.close`, on ``with`` exit and at interpreter exit (atexit). The supervisor runs in a
session of its own (Ctrl-C and Jupyter interrupts reach the kernel, not the lab); it watches the
kernel and, when the kernel dies (even by SIGKILL), stops its children and removes its log folder.
Its children die with it (PR_SET_PDEATHSIG); were it SIGKILLed, the kernel removes the folder.

Where no namespace can be made, :class:`StoreLab` refuses to start unless
``allow_host_network=True`` or ``MOONCAKE_LAB_STORE_HOST_NETWORK=1`` says to run on the host.
"""
from __future__ import annotations

import atexit
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import weakref
from functools import lru_cache

from .. import validate as v
from . import logs
from ._proto import WORKER_METHODS, Channel, PeerGone, StoreLabError, stop_pids

__all__ = ["StoreLab", "StoreLabError", "start_all", "store_status", "isolation", "HOST_NETWORK_ENV", "PACKAGE",
           "memory_budget_mib", "MIN_SEGMENT_MIB", "MAX_BATCH_BYTES", "MAX_KEYS", "MAX_KEY_CHARS"]

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


#: The store's smallest segment: ``setup`` of a memory node with less fails (−600, seen with 0.3.13.post1).
MIN_SEGMENT_MIB = 16
#: Bytes one call may hold in a worker at once (a batch API keeps all its values; ``put``/``get`` one).
MAX_BATCH_BYTES = 256 * MiB
#: Keys per call, characters per key: the key list crosses two pipes.
MAX_KEYS, MAX_KEY_CHARS = 1_000_000, 1024
#: The most memory all the labs of one kernel may ask for (segments + buffers), MiB; also at most
#: half of what the machine has available when a lab starts (:func:`memory_budget_mib`).
MAX_LAB_MIB = 8192


def memory_budget_mib() -> int:
    """MiB the labs of this kernel may use: min(:data:`MAX_LAB_MIB`, half of MemAvailable)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return min(MAX_LAB_MIB, int(line.split()[1]) // 1024 // 2)
    except (OSError, ValueError, IndexError):
        pass
    return MAX_LAB_MIB


def _keys(keys, where: str) -> list[str]:
    if isinstance(keys, str):
        keys = [keys]
    elif not isinstance(keys, (list, tuple)):
        raise v.fail("keys", keys, "a key (str) or a list of keys", where)
    if not 1 <= len(keys) <= MAX_KEYS:
        raise v.fail("keys", f"{len(keys)} keys", f"1 to {MAX_KEYS:,} keys per call", where)
    for i, k in enumerate(keys):
        if not (isinstance(k, str) and 0 < len(k) <= MAX_KEY_CHARS and k.isprintable()):
            raise v.fail("keys", k, f"non-empty printable strings of at most {MAX_KEY_CHARS} characters", where, i)
    return list(keys)


#: Flags the lab sets itself (loopback addresses, its ports, the metadata server): not overridable.
#: They also come last on the master's command line (the last occurrence wins).
RESERVED_FLAGS = ("rpc_port", "rpc_address", "enable_http_metadata_server", "http_metadata_server_host",
                  "http_metadata_server_port", "metrics_host", "metrics_port", "logtostderr")
#: gflags' own flags: each reads flags from elsewhere (a file, the environment), hides errors or exits,
#: so any of them could set a reserved flag behind the lab's back.
META_FLAGS = ("flagfile", "fromenv", "tryfromenv", "undefok", "help", "helpfull", "helpshort", "helpxml",
              "helpon", "helpmatch", "helppackage", "version", "tab_completion_columns", "tab_completion_word")


def master_flag(k, val) -> None:
    """Refuse a ``master_flags`` entry that is not a plain flag the lab leaves to the user."""
    where = "StoreLab"
    if not (isinstance(k, str) and k.isidentifier() and k.isascii() and k.islower()):
        raise v.fail("master_flags", k, "mooncake_master flag names (e.g. 'client_ttl')", where)
    if k in RESERVED_FLAGS or (k.startswith("no") and k[2:] in RESERVED_FLAGS):
        raise v.fail("master_flags", k, f"a flag the lab does not set itself (it sets {', '.join(RESERVED_FLAGS)})",
                     where)
    if k in META_FLAGS:
        raise v.fail("master_flags", k, f"a mooncake_master flag, not one of gflags' own ({', '.join(META_FLAGS)}): "
                                        "they read flags from a file or the environment", where)
    if isinstance(val, bool) or (isinstance(val, (int, float)) and not isinstance(val, bool)):
        if isinstance(val, float) and not math.isfinite(val):
            raise v.fail(f"master_flags[{k!r}]", val, "a finite number", where)
        return
    if not (isinstance(val, str) and val and val.isprintable() and not any(ch.isspace() for ch in val)):
        raise v.fail(f"master_flags[{k!r}]", val, "a number, a bool or a non-empty string without spaces", where)
#: ``ReplicateConfig`` settings :meth:`StoreLab.put` and :meth:`StoreLab.replay` accept.
CONFIG_KEYS = ("replica_num", "preferred_segment", "hard_pin", "soft_pin")


def _key(key, where: str) -> str:
    if not isinstance(key, str):
        raise v.fail("key", key, "one key (a non-empty string)", where)
    return _keys([key], where)[0]


class StoreLab:
    """The real Mooncake Store on this machine, isolated: ``with StoreLab() as lab: ...``.

    ``nodes`` memory nodes each contribute ``segment_mib`` MiB of DRAM; ``clients`` own no segment,
    so every byte they put or get crosses the Transfer Engine (TCP). ``master_flags`` are passed to
    ``mooncake_master`` (e.g. ``default_kv_lease_ttl="1ms"``, ``client_ttl=3``).
    """

    def __init__(self, nodes: int = 2, segment_mib: int = 64, clients=("writer", "reader"),
                 buffer_mib: int = 64, master_flags: dict | None = None,
                 allow_host_network: bool | None = None, timeout_s: float = 60.0):
        where = "StoreLab"
        self.nodes = [f"node{i}" for i in range(v.integer(nodes, "nodes", lo=1, hi=8, where=where))]
        self.segment_mib = v.integer(segment_mib, "segment_mib", lo=MIN_SEGMENT_MIB, hi=MAX_LAB_MIB, where=where)
        self.buffer_mib = v.integer(buffer_mib, "buffer_mib", lo=1, hi=MAX_LAB_MIB, where=where)
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
            master_flag(k, val)
        if self.memory_mib > MAX_LAB_MIB:
            raise v.fail("nodes, segment_mib, buffer_mib", self._memory_formula(),
                         f"at most {MAX_LAB_MIB:,} MiB for a lab (segments + buffers)", where)
        self.timeout_s = v.real(timeout_s, "timeout_s", lo=1, hi=600, where=where)
        if allow_host_network is None:
            allow_host_network = os.environ.get(HOST_NETWORK_ENV, "") == "1"
        self.allow_host_network = v.flag(allow_host_network, "allow_host_network", where)
        self._proc: subprocess.Popen | None = None
        self._ch: Channel | None = None
        self.logdir: str | None = None
        self.segments: dict[str, str] = {}
        self.pids: dict[str, int] = {}
        self.isolated = False

    @property
    def memory_mib(self) -> int:
        """MiB the lab asks for: every node's segment plus every client's (nodes' too) buffer."""
        return len(self.nodes) * self.segment_mib + (len(self.nodes) + len(self.clients)) * self.buffer_mib

    def _memory_formula(self) -> str:
        return (f"{len(self.nodes)} × {self.segment_mib} + {len(self.nodes) + len(self.clients)} × "
                f"{self.buffer_mib} = {self.memory_mib:,} MiB")

    # --- life cycle ------------------------------------------------------------------------
    def start(self) -> "StoreLab":
        """Start the supervisor, the master and every node and client; returns ``self``."""
        start_all([self])
        return self

    def _spawn(self, others_mib: int = 0) -> None:
        ok, why = store_status()
        if not ok:
            raise StoreLabError(why)
        budget = memory_budget_mib()
        if others_mib + self.memory_mib > budget:
            raise StoreLabError(
                f"StoreLab: this lab asks for {self._memory_formula()} (nodes × segment_mib + nodes and "
                f"clients × buffer_mib), {others_mib:,} MiB more are held by this kernel's other labs, and "
                f"the labs may use {budget:,} MiB here (half the available memory, at most {MAX_LAB_MIB:,}): "
                f"ask for less, or close() another lab")
        logs.sweep(logs.LOG_PREFIX)   # folders of labs whose kernel and supervisor were both killed
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
                        "1" if prefix else "0", str(os.getpid())]
        # A session of its own: Ctrl-C / a Jupyter interrupt (sent to the kernel's process group) does
        # not reach it. No PR_SET_PDEATHSIG: it fires when the *thread* that started the child ends
        # (a lab started from a thread would die with it); the supervisor watches the kernel instead.
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(r1, w2), start_new_session=True)
        os.close(r1)
        os.close(w2)
        self._ch = Channel(r2, w1, "the lab's supervisor", cancel=self._cancel)
        _OPEN.add(self)

    def _cancel(self) -> None:
        """A call was abandoned (timeout, Ctrl-C): the supervisor asks the busy worker to stop it."""
        if self._proc is not None and self._proc.poll() is None:   # our child, not yet reaped
            os.kill(self._proc.pid, signal.SIGUSR1)

    def _specs(self) -> list:
        return [(n, self.segment_mib * MiB, self.buffer_mib * MiB) for n in self.nodes] + \
            [(c, 0, self.buffer_mib * MiB) for c in self.clients]

    def __enter__(self) -> "StoreLab":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process of the lab by PID (the supervisor stops its children first), wait, and
        remove the lab's log folder if the supervisor could not."""
        if self._proc is None:
            return
        interrupted = None
        if self._proc.poll() is None:
            try:
                self._ch.ask("exit", 8)
            except StoreLabError:
                pass
            except KeyboardInterrupt as err:  # finish stopping the lab first, then raise it
                interrupted = err
        # The supervisor stops its children by PID before it exits; were it killed instead, they get
        # SIGKILL from the kernel (PR_SET_PDEATHSIG). Their PIDs are not signalled from here: once
        # they are gone, those numbers may belong to someone else's processes.
        stop_pids([self._proc], grace_s=5)
        self._ch.close()
        logs.remove(self.logdir)
        self._proc = self._ch = self.logdir = None
        _OPEN.discard(self)
        if interrupted is not None:
            raise interrupted

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # --- requests --------------------------------------------------------------------------
    def _ask(self, op: str, timeout_s: float | None = None, **kwargs):
        if not self.running:
            why = "" if self._proc is None else f" (its supervisor exited: {self._proc.returncode}; close() it and start a new one)"
            raise StoreLabError(f"the lab is not running{why}: use `with StoreLab() as lab:` or lab.start()")
        try:
            return self._ch.ask(op, timeout_s or self.timeout_s, **kwargs)
        except PeerGone:
            # the channel broke: if the supervisor is exiting (killed, say), say so rather than "gone"
            try:
                self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                raise
            raise StoreLabError(f"the lab is not running (its supervisor exited: {self._proc.returncode}; close() it "
                                "and start a new one)") from None

    def call(self, who: str, method: str, timeout_s: float | None = None, **kwargs):
        """Ask the store client ``who`` (a node or a client name) to run ``method`` (one of the
        worker's requests: put, get, get_rc, is_exist, replica_desc, replay, remove_all)."""
        where = "StoreLab.call"
        v.choice(who, "who", self.nodes + self.clients, where)
        v.choice(method, "method", WORKER_METHODS[1:], where)
        t = self.timeout_s if timeout_s is None else v.real(timeout_s, "timeout_s", lo=1, hi=600, where=where)
        return self._ask("call", timeout_s=t + 5, name=who, method=method, kwargs=kwargs, call_timeout_s=t)

    def _size(self, size, n_keys: int, batch: bool, where: str) -> int:
        """``size`` bytes per value: at most one node's segment (nothing larger can be stored), and
        a batch's values together at most :data:`MAX_BATCH_BYTES` (they are held at once)."""
        size = v.integer(size, "size", lo=1, hi=self.segment_mib * MiB, where=where)
        if batch and size * n_keys > MAX_BATCH_BYTES:
            raise v.fail("size", size, f"at most {MAX_BATCH_BYTES // MiB} MiB per batch call: {n_keys:,} keys × "
                                       f"{size:,} B = {size * n_keys / MiB:,.0f} MiB; split the keys", where)
        return size

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
        where = "StoreLab.put"
        keys = _keys(keys, where)
        api = v.choice(api, "api", ("put", "put_batch", "batch_put_from"), where)
        return self.call(who, "put", keys=keys, size=self._size(size, len(keys), api != "put", where), api=api,
                         **self._config(cfg, where, extra=("retries",)))

    def get(self, keys, size, who="reader", api="get", check=True):
        """Read keys on client ``who``; ``ok`` per key says the content matched its checksum."""
        where = "StoreLab.get"
        keys = _keys(keys, where)
        api = v.choice(api, "api", ("get", "get_batch", "batch_get_into"), where)
        return self.call(who, "get", keys=keys, size=self._size(size, len(keys), api != "get", where), api=api,
                         check=v.flag(check, "check", where))

    def get_rc(self, key, size, who="reader"):
        """One ``get_into``: the bytes read, or the store's negative error code."""
        where = "StoreLab.get_rc"
        return self.call(who, "get_rc", key=_key(key, where), size=self._size(size, 1, False, where))

    def is_exist(self, keys, who="reader"):
        return self.call(who, "is_exist", keys=_keys(keys, "StoreLab.is_exist"))

    def replica_desc(self, key, who="reader"):
        return self.call(who, "replica_desc", key=_key(key, "StoreLab.replica_desc"))

    def replay(self, keys, size, who="writer", **cfg):
        """``is_exist``-before-``put`` over ``keys`` in order; ``hits`` is a bool array."""
        import numpy as np

        where = "StoreLab.replay"
        keys = _keys(keys, where)
        r = self.call(who, "replay", keys=keys, size=self._size(size, len(keys), False, where),
                      **self._config(cfg, where, extra=("retries",)))
        r["hits"] = np.frombuffer(r["hits"], dtype=np.int8).astype(bool)
        return r

    def kill(self, who: str, sig: int = int(signal.SIGKILL)) -> int:
        """Send ``sig`` (SIGKILL, the default, or SIGTERM) to one process of the lab (a node, a client
        or "master") and wait for it to end; returns its exit status."""
        where = "StoreLab.kill"
        v.choice(who, "who", self.nodes + self.clients + ["master"], where)
        sig = int(sig) if isinstance(sig, int) and not isinstance(sig, bool) else sig   # signal.SIGKILL too
        sig = v.choice(sig, "sig", (int(signal.SIGKILL), int(signal.SIGTERM)), where)
        rc = self._ask("kill", name=who, sig=int(sig))
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
    """Start several labs at once (their processes start in parallel); on any error all are closed.
    A lab that is already running is refused (and left running)."""
    labs = list(labs)
    for i, lab in enumerate(labs):
        if not isinstance(lab, StoreLab):
            raise v.fail("labs", lab, "StoreLab objects (not yet started)", "start_all", i)
        if lab._proc is not None:
            state = (f"running (supervisor PID {lab._proc.pid})" if lab.running else
                     "started once already (its supervisor has exited)")
            raise StoreLabError(f"start: this StoreLab is {state}; it is left as it is: use it, or close() it "
                                f"and start() again")
    if len({id(lab) for lab in labs}) != len(labs):
        raise v.fail("labs", "the same StoreLab twice", "distinct labs", "start_all")

    def step(op: str, make_kwargs):
        posted = [(lab, lab._ch.post(op, **make_kwargs(lab))) for lab in labs]
        return [(lab, lab._ch.collect(rid, op, lab.timeout_s)) for lab, rid in posted]

    try:
        held = sum(lab.memory_mib for lab in list(_OPEN) if lab.running)
        for lab in labs:
            lab._spawn(held)
            held += lab.memory_mib
        for lab in labs:
            hello = lab._ch.collect(0, "supervisor start", lab.timeout_s)
            lab.pids["supervisor"], lab.logdir = hello["pid"], hello["logdir"]
        for lab, ports in step("start_master", lambda lab: {"flags": lab.master_flags}):
            lab.ports = ports
            lab.pids["master"] = ports.pop("pid")
        for lab, got in step("start_workers", lambda lab: {"specs": lab._specs()}):
            for name, info in got.items():
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
