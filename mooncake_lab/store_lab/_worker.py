"""One Mooncake Store client process of the lab (a memory node or a segment-less client).

Started by the supervisor, inside the lab's network namespace: ``python -m
mooncake_lab.store_lab._worker READ_FD WRITE_FD``. It holds one ``MooncakeDistributedStore`` and
answers the supervisor's requests. Bulk data never crosses the pipes: values are generated here from
a seed, and only return codes, CRC-32 checksums and timings go back.
"""
from __future__ import annotations

import signal
import sys
import time
import zlib

import numpy as np

from ._proto import WORKER_METHODS as METHODS, conn, reply, serve


def value_bytes(key: str, size: int) -> np.ndarray:
    """The deterministic content of ``key`` (``size`` bytes), so any reader can check it."""
    seed = zlib.crc32(key.encode())
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def expected_crc(key: str, size: int) -> int:
    return zlib.crc32(value_bytes(key, size))


class Cancelled(Exception):
    """The supervisor cancelled this request (SIGUSR1): its caller timed out or was interrupted."""


class Worker:
    def __init__(self):
        self.store = None
        self.buf = None  # registered buffer for the zero-copy APIs
        self.cancelled = False  # set by SIGUSR1; checked between store calls of a request

    def begin(self):
        self.cancelled = False

    def _go_on(self):
        if self.cancelled:
            raise Cancelled("cancelled: the caller timed out or was interrupted")

    def setup(self, hostname, metadata_server, master, segment_bytes, buffer_bytes):
        from mooncake.store import MooncakeDistributedStore

        self.store = MooncakeDistributedStore()
        rc = self.store.setup(hostname, metadata_server, int(segment_bytes), int(buffer_bytes),
                              "tcp", "", master)
        if rc != 0:
            raise RuntimeError(f"setup returned {rc}")
        return self.store.get_hostname()

    def _config(self, replica_num=1, preferred_segment=None, hard_pin=False, soft_pin=False):
        from mooncake.store import ReplicateConfig, SoftPinAction

        cfg = ReplicateConfig()
        cfg.replica_num = int(replica_num)
        if preferred_segment:
            cfg.preferred_segment = preferred_segment
        if hard_pin:
            cfg.with_hard_pin = True
        if soft_pin:
            cfg.soft_pin_action = SoftPinAction.ENABLE
        return cfg

    def _register(self, nbytes):
        if self.buf is None or self.buf.nbytes < nbytes:
            self.buf = np.zeros(nbytes, dtype=np.uint8)
            rc = self.store.register_buffer(self.buf.ctypes.data, self.buf.nbytes)
            if rc != 0:
                raise RuntimeError(f"register_buffer returned {rc}")
        return self.buf.ctypes.data

    def put(self, keys, size, api="put", retries=0, **cfg):
        """Put each key's value (``size`` bytes); returns rc per key, seconds of the store calls."""
        config = self._config(**cfg)
        rcs, secs = [], 0.0
        if api == "put":  # one value in memory at a time
            for k in keys:
                self._go_on()
                v = value_bytes(k, size)
                t0 = time.perf_counter()
                rc = self.store.put(k, v, config)
                for _ in range(retries):
                    if rc == 0:
                        break
                    time.sleep(0.002)
                    rc = self.store.put(k, v, config)
                secs += time.perf_counter() - t0
                rcs.append(rc)
        elif api == "put_batch":  # the batch's bytes are bounded by the kernel (StoreLab.put)
            vals = [value_bytes(k, size) for k in keys]
            t0 = time.perf_counter()
            rc = self.store.put_batch(keys, vals, config)
            secs = time.perf_counter() - t0
            rcs = [rc] * len(keys)
        elif api == "batch_put_from":
            base = self._register(size * len(keys))
            for i, k in enumerate(keys):
                self.buf[i * size:(i + 1) * size] = value_bytes(k, size)
            t0 = time.perf_counter()
            rcs = list(self.store.batch_put_from(keys, [base + i * size for i in range(len(keys))],
                                                 [size] * len(keys), config))
            secs = time.perf_counter() - t0
        else:
            raise ValueError(f"api={api!r}: allowed put, put_batch, batch_put_from")
        return {"rc": [int(r) for r in rcs], "seconds": secs}

    def get(self, keys, size, api="get", check=True):
        """Read keys; returns per key ok (content matches), rc/length, seconds of the store calls."""
        t0 = time.perf_counter()
        if api == "get":  # one value in memory at a time: keep its length and checksum only
            secs, got = 0.0, []
            for k in keys:
                self._go_on()
                t1 = time.perf_counter()
                g = self.store.get(k)
                secs += time.perf_counter() - t1
                got.append((len(g), zlib.crc32(g) if check and len(g) == size else None))
            ok = [n == size and (not check or c == expected_crc(k, size)) for k, (n, c) in zip(keys, got)]
            return {"ok": ok, "rc": [n for n, _ in got], "seconds": secs}
        elif api == "get_batch":
            got = self.store.get_batch(keys)
        elif api == "batch_get_into":
            base = self._register(size * len(keys))
            rcs = self.store.batch_get_into(keys, [base + i * size for i in range(len(keys))],
                                            [size] * len(keys))
            secs = time.perf_counter() - t0
            ok = [bool(r == size and (not check or zlib.crc32(self.buf[i * size:(i + 1) * size])
                                      == expected_crc(k, size))) for i, (k, r) in enumerate(zip(keys, rcs))]
            return {"ok": ok, "rc": [int(r) for r in rcs], "seconds": secs}
        else:
            raise ValueError(f"api={api!r}: allowed get, get_batch, batch_get_into")
        secs = time.perf_counter() - t0
        ok = [len(g) == size and (not check or zlib.crc32(g) == expected_crc(k, size)) for k, g in zip(keys, got)]
        return {"ok": ok, "rc": [len(g) for g in got], "seconds": secs}

    def get_rc(self, key, size):
        """One ``get_into`` (returns the byte count, or the store's negative error code)."""
        base = self._register(size)
        return int(self.store.get_into(key, base, size))

    def is_exist(self, keys):
        out = []
        for k in keys:
            self._go_on()
            out.append(int(self.store.is_exist(k)))
        return out

    def replica_desc(self, key):
        out = []
        for r in self.store.get_replica_desc(key):
            seg = None
            if r.is_memory_replica():
                d = r.get_memory_descriptor().buffer_descriptor
                seg = getattr(d, "transport_endpoint_", None) or getattr(d, "transport_endpoint", None) or str(d)
            out.append({"status": str(r.status), "memory": bool(r.is_memory_replica()), "segment": seg})
        return out

    def replay(self, keys, size, retries=20, **cfg):
        """Replay a key stream with ``is_exist``-before-``put``; returns hit (1) / miss (0) and put rcs."""
        config = self._config(**cfg)
        hits = np.zeros(len(keys), dtype=np.int8)
        fails, first_fail = 0, {}
        value = np.zeros(size, dtype=np.uint8)
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            self._go_on()
            if self.store.is_exist(k) == 1:
                hits[i] = 1
                continue
            rc = self.store.put(k, value, config)
            if rc != 0:
                first_fail[int(rc)] = first_fail.get(int(rc), 0) + 1
            for _ in range(retries):  # a put into a full pool fails at once until eviction makes room
                if rc == 0:
                    break
                time.sleep(0.002)
                rc = self.store.put(k, value, config)
            fails += rc != 0
        return {"hits": hits.tobytes(), "put_failures": int(fails), "first_put_failures": first_fail,
                "seconds": time.perf_counter() - t0}

    def remove_all(self):
        return int(self.store.remove_all(True))


#: The requests a worker serves (the kernel checks a method name against this list first).


def main(read_fd: int, write_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the kernel; the lab stops by PID
    rx, tx = conn(read_fd, write_fd)
    w = Worker()
    signal.signal(signal.SIGUSR1, lambda signum, frame: setattr(w, "cancelled", True))
    rid = serve(rx, tx, w, METHODS, begin=w.begin)
    if w.store is not None:
        w.store.close()
    if rid is not None:
        reply(tx, rid, "ok", None)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
