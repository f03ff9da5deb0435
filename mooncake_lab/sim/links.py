"""The network as a shared resource (``ClusterConfig.network_contention``): the rules both engines follow.

Without contention (``network_contention=False``; the default is True, the paper's setting) every
transfer gets the whole NIC: a fetch of ``n`` tokens takes :func:`~mooncake_lab.roofline.cm_kv_transfer_time`
(``n`` × KV bytes per token / (NIC bandwidth × the preset's RDMA efficiency)) / X, a KV stream to decode
exposes :func:`.kernel._exposed_transfer`. With it (the default), **each prefill node has a send link and a receive link, and each decode node a receive
link**, whose capacity is that same per-node bandwidth (``network_gbps``, else the node's NIC count
× Gbps, × RDMA efficiency: one formula, ``cm_kv_transfer_time``), and transfers reserve them:

* **Remote-prefix fetch** (``kvcentric``, or a student policy's ``view.fetch``) of ``d`` =
  :func:`.cpp_group.group_fetch_time` seconds from instance ``src`` to ``p``: requested when ``p``
  can start the request (``start`` = max(arrival, p's stage 0 free)). The source ``src`` is, of
  the instances holding the pool's best prefix (replicas), the one the fetch can begin from first
  (ties: lowest index; without contention always the lowest-index holder): this is how replicas of
  a hot block spread its fetches. X = 1: one pair, ``src``'s
  send link and ``p``'s receive link. CPP groups (X > 1): stage s of ``p`` reads its layers from
  stage s of ``src`` (:mod:`.cpp_group`), so X node pairs (``src``'s node s → ``p``'s node s),
  each reserving its own two links for ``d``; the fetch ends when the last pair does. *Fetch wait*
  = (latest pair begin) − ``start``; the prefill's chunks enter at start + wait + ``d``.
* **KV stream to decode** of ``x`` = ``cm_kv_transfer_time(L)`` seconds, from the prefill node's
  send link (X > 1: on every stage node's send link at once: each stage sends its layers while the
  decode node receives all of them, so each holds its link for the stream's ``x`` s — a
  conservative choice) to, with ``decode_binding="arrival"`` (the default), the bound decode
  node's receive link: the stream needs one gap free on all of these links (it receives all ``L``
  tokens' KV, so ``x`` s there too). Uncontended it ends at ``R`` = prefill end + exposed transfer (layer-wise:
  ``max(x/l, x − p(1 − 1/l))``), i.e. the ``x`` s of sending ideally occupy ``[R − x, R]``: layer-wise,
  that window starts after the first layer is computed (``R − x ≥ prefill start + p/l``), so the
  data is there. The stream reserves the earliest gap ``[b, b + x]`` with ``b ≥ R − x``; the KV
  reaches decode at ``max(R, b + x)`` (= ``R`` when the links are free: the result without
  contention). *Stream wait* = that − ``R``. Only a request with output > 1 token streams.
* **Decode receive links**: only streams use them (decode nodes receive nothing else), so two
  streams queue there only when they go to the same decode node at overlapping times. With
  ``decode_binding="ready"`` (late binding, reference rule 7) a stream reserves **no** decode
  receive link: its decode instance is chosen only when its KV is ready, i.e. after the stream,
  which is reserved when the request is committed at arrival; reserving it then would need either
  the destination before it is chosen or a stream that moves after it was reserved (breaking the
  rule below that a reservation is never moved). So late binding keeps the stream on the prefill
  side's links alone (an optimistic choice: the destination's link is treated as free).
* **Not on links**: CPP stage-boundary activations keep their own NIC model (``glink`` of
  :mod:`.cpp_group`) and do not share these links.

**Sharing rule: a reservation calendar per link, earliest fit in commit order.** Transfers are
reserved in the order the simulator commits requests (arrival order; a request rejected at
arrival reserves nothing), which is deterministic. Each takes the earliest interval at or after its
data is ready in which *all* its links are free for its whole duration, and keeps it: a reservation
is never moved, so a later transfer can never delay an earlier one (it may fill an earlier gap).
Why this and not flow-level fair sharing: it is deterministic and exact to test (two engines compare
interval ends), a transfer's end is known the moment it is committed (the Conductor can estimate
it, and the kernel stays a single pass over arrivals like ``gfree``), while fair sharing changes
every flow's rate whenever a flow starts or ends (an event per flow change, and ends that move after
they were estimated). Why a calendar and not one "link free at" time (pure FIFO, ``gfree``-like):
a stream is committed at arrival but runs when its prefill ends, maybe minutes later behind the
holder's queue; with one free-at time every later fetch from that node would wait behind it,
although the link is idle until then. Earliest fit costs O(log k) (a binary search for the
first reservation still running) plus the reservations it skips, k = the link's reservations not
yet ended (those ended before the current arrival are dropped).

What it does not model: a transfer never shares a link with another at the same time (no partial
overlap: it waits for a gap of its whole duration, never splits across gaps and never slows down
another); a layer-wise stream is one block of ``x`` s, not ``l`` bursts paced by the prefill;
switch and spine links (a full-bisection fabric: only the nodes' NICs are shared).

A copy is a source only once it is complete: with contention every block stored on an instance
records when it is there (a fetched block when its fetch ends, a computed one when the request's
prefill ends), and a fetch from holder ``q`` begins no earlier than the latest of those times over
the prefix. So a replica that is still being received does not yet relieve the hot holder. (Without
contention, as before, a prefix is fetchable as soon as the request storing it is committed.)

:class:`LinkCalendar` is the plain-Python form the reference uses; the kernel keeps the same
intervals in arrays (:class:`.state.Links`: :func:`.kernel._fit`, :func:`.kernel._book`), one row
per link: P·X prefill send links, P·X prefill receive links, then the D decode receive links.
"""
from __future__ import annotations

from ..validate import fail, real

__all__ = ["LinkCalendar"]


def _span(t, d, where: str) -> tuple[float, float]:
    """A start time (finite, s) and a duration (finite, ≥ 0 s): NaN would never fit (fit_all would loop)."""
    return real(t, "t", where=where), real(d, "d", lo=0.0, where=where)


class LinkCalendar:
    """One link's reservations: disjoint intervals ``[begin, end]`` (s), sorted."""

    def __init__(self):
        self.slots: list[tuple[float, float]] = []

    def fit(self, t: float, d: float) -> float:
        """Earliest ``b ≥ t`` with ``[b, b + d]`` free on this link."""
        t, d = _span(t, d, "LinkCalendar.fit")
        for b, e in self.slots:
            if e <= t:
                continue
            if b >= t + d:
                break
            t = e
        return t

    def book(self, b: float, e: float) -> None:
        """Reserve ``[b, e]`` (a gap :meth:`fit` found)."""
        b = real(b, "b", where="LinkCalendar.book")
        e = real(e, "e", lo=b, where="LinkCalendar.book")
        k = len(self.slots)
        while k > 0 and self.slots[k - 1] > (b, e):  # by begin, then end: the ends stay sorted too
            k -= 1
        self.slots.insert(k, (b, e))

    def backlog(self, a: float) -> float:
        """Seconds reserved after time ``a``."""
        return sum(e - max(b, a) for b, e in self.slots if e > a)


def fit_all(links, t: float, d: float) -> float:
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on every one of ``links`` (in that order)."""
    t, d = _span(t, d, "fit_all")
    if not all(isinstance(link, LinkCalendar) for link in links):
        raise fail("links", links, "a list of LinkCalendar", "fit_all")
    while True:
        b = t
        for link in links:
            b = link.fit(b, d)
        if b == t:
            return b
        t = b
