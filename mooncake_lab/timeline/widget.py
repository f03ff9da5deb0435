"""The timeline view: ``timeline(result)`` (or several results on one clock) as a widget that plays and
scrubs in the browser. The data (:func:`.lanes.lanes`) is sent once; every frame after that is drawn by
``timeline.js`` on a canvas, so play and scrub never wait for the kernel. The kernel hears of the clock
(:attr:`Timeline.now`), the request a student clicked (:attr:`Timeline.selected`) and the frame rate the
browser measured while playing (:attr:`Timeline.fps`).
"""
from __future__ import annotations

import base64
import math
from pathlib import Path

import anywidget
import numpy as np
import traitlets

from ..validate import fail
from .lanes import Lanes, lanes

__all__ = ["Timeline", "timeline", "payload", "MAX_RUNS", "WINDOWS_S", "SPEEDS"]

#: Runs one view shows on one clock: two side by side is the use (A against B); four still fit a screen.
MAX_RUNS = 4
#: Windows the view offers, s (0 = the whole run) and replay speeds (simulated s per real s): as timeline.js.
WINDOWS_S = (2, 10, 30, 120, 600, 0)
SPEEDS = (1, 2, 5, 10, 30, 60, 120, 300)
_HERE = Path(__file__).parent
_ABBR = {"prefill": "P", "node": "N", "CPP group": "G", "decode": "D"}


def _buf(x: np.ndarray, dtype) -> memoryview:
    return memoryview(np.ascontiguousarray(x, dtype=dtype))


def payload(ln: Lanes, label: str = "") -> dict:
    """What the browser gets of one run: ``meta`` (JSON) and little-endian buffers (float64 times and
    tokens, int32 indices), named as :class:`Lanes`' fields."""
    meta = {"title": label or ln.title, "coupled": ln.coupled, "contention": ln.contention,
            "n_prefill": ln.n_prefill, "n_decode": ln.n_decode, "end_s": ln.end_s, "replay_speed": ln.replay_speed,
            "kv_capacity": ln.kv_capacity, "prefill_abbr": _ABBR[ln.prefill_name], "decode_abbr": _ABBR[ln.decode_name],
            "requests": ln.n_requests}
    out: dict = {"meta": meta}
    for name in ln.__dataclass_fields__:
        v = getattr(ln, name)
        if isinstance(v, np.ndarray):
            f64 = v.dtype.kind == "f" or name.startswith(("pf_cached", "pf_fetched", "pf_computed")) or name == "switches"
            out[name] = _buf(v.ravel(), "<f8" if f64 else "<i4")
    for name in ("queue", "batch", "kv"):
        s = getattr(ln, name)
        out[f"{name}_offsets"] = _buf(s.offsets, "<i4")
        out[f"{name}_t"] = _buf(s.t, "<f8")
        out[f"{name}_level"] = _buf(s.level, "<f8")
        out[f"{name}_slope"] = _buf(s.slope, "<f8")
    return out


class Timeline(anywidget.AnyWidget):
    """Lanes of one or more runs on one clock (see :func:`timeline`)."""

    _esm = _HERE / "timeline.js"
    _css = _HERE / "timeline.css"
    runs = traitlets.List().tag(sync=True)
    now = traitlets.Float(0.0).tag(sync=True)          # s: the clock; the view shows [now − window, now]
    window = traitlets.Float(30.0).tag(sync=True)      # s shown; 0 = the whole run
    speed = traitlets.Float(10.0).tag(sync=True)       # simulated s per real s while playing
    playing = traitlets.Bool(False).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)        # request index clicked (−1: none)
    fps = traitlets.Float(0.0).tag(sync=True)          # frames per second the browser drew while playing
    # (not "style": a DOMWidget's style trait is its Style model, which the front end draws)
    projector = traitlets.Bool(False).tag(sync=True)   # the course's "projector" style: bigger lanes and text

    def __init__(self, lanes_: list[Lanes], labels: list[str], results: list | None = None, **kw):
        self.lanes = lanes_
        self.labels = labels
        self.results = list(results or [])  # the SimResults behind the lanes (for why())
        super().__init__(runs=[payload(ln, lb) for ln, lb in zip(lanes_, labels)], **kw)

    @property
    def end_s(self) -> float:
        """The last moment any run shows, s."""
        return max(ln.end_s for ln in self.lanes)

    @traitlets.validate("now")
    def _valid_now(self, proposal):
        t = float(proposal["value"])
        if not math.isfinite(t):
            raise traitlets.TraitError(f"Timeline.now: got {t!r}; allowed: a time in s, 0 … {self.end_s:.6g}")
        return min(max(t, 0.0), self.end_s) if self.lanes else t

    @traitlets.validate("window", "speed")
    def _valid_choice(self, proposal):
        name, x = proposal["trait"].name, float(proposal["value"])
        allowed, what = {"window": (WINDOWS_S, "s (0 = the whole run)"),
                         "speed": (SPEEDS, "(simulated s per real s)")}[name]
        if x not in allowed:
            raise traitlets.TraitError(f"Timeline.{name}: got {x!r}; allowed: one of {allowed} {what}")
        return x

    def shown(self) -> tuple[float, float]:
        """The window the view shows now, s: [now − window, now], kept inside the run."""
        w = self.window if self.window > 0 else self.end_s
        w = min(w, self.end_s)
        t0 = max(0.0, min(self.now - w, self.end_s - w))
        return t0, t0 + w

    def why(self):
        """A panel under the view that explains the selected request (click one, or press ⏭ next arrival):
        in every run on the clock, the Conductor's terms per instance and why the winner won
        (:func:`mooncake_lab.sim.explain.explain`)."""
        import ipywidgets as w

        panel = w.HTML(value=self.why_html(), layout=w.Layout(max_width="100%", overflow="auto"))
        self.observe(lambda _change: setattr(panel, "value", self.why_html()), names="selected")
        return panel

    def why_html(self) -> str:
        """What :meth:`why` shows for the selected request now (HTML)."""
        import html

        from ..sim.explain import explain

        i = self.selected
        if i < 0:
            return ("<p>Click a request in a prefill lane, or press ⏭ next arrival, to see why it went where it "
                    "went: the Conductor's terms per instance, from the simulator's own numbers.</p>")
        if not self.results:
            return "<p>This view was made without its runs; call timeline(result) to explain requests.</p>"
        parts = []
        for res, label in zip(self.results, self.labels):
            head = f"<h4>{html.escape(label)}</h4>"
            if i >= len(res.trace):
                parts.append(head + f"<p>This run has no request {i} (it has {len(res.trace):,}).</p>")
            elif res.config.coupled:
                parts.append(head + f"<p>Request {i} went to node {int(res.arrays['prefill_inst'][i])}. A coupled "
                             "node runs prefill and decode itself, so there is no Conductor choice to explain.</p>")
            else:
                parts.append(head + explain(res, i)._repr_html_())
        return "".join(parts)

    def static_caption(self) -> str:
        t0, t1 = self.shown()
        runs = "; ".join(self.labels)
        return (f"Timeline of {runs}: {t0:.1f}–{t1:.1f} s. A picture of the view; run the notebook to play and "
                f"scrub it.")

    def picture(self):
        """A still matplotlib figure of the window shown (the first run)."""
        from ..plots.timeline import plot_timeline

        t0, t1 = self.shown()
        return plot_timeline(self.lanes[0], t0, t1, label=self.labels[0])

    def html(self) -> str:
        """A page that plays this view with no kernel and no network: the same script, the data inline
        (base64), the traits as they are now. Open it in any browser, or show it from a projector."""
        import json

        def enc(run):
            return {k: (v if k == "meta" else {"b64": base64.b64encode(bytes(v)).decode("ascii"),
                                              "f64": v.format in ("<d", "d")}) for k, v in run.items()}
        state = {k: getattr(self, k) for k in ("now", "window", "speed", "selected", "projector")}
        state.update(playing=False, fps=0.0)
        data = json.dumps({"runs": [enc(r) for r in self.runs], "state": state})
        return _PAGE.format(css=self._css.read_text(encoding="utf-8") if isinstance(self._css, Path) else self._css,
                            title=" · ".join(self.labels), data=data,
                            js=json.dumps(self._esm.read_text(encoding="utf-8") if isinstance(self._esm, Path) else self._esm))

    def save_html(self, path) -> Path:
        """Write :meth:`html` to ``path`` (``.html``); returns the path."""
        p = Path(path)
        if p.suffix != ".html":
            raise fail("path", p.name, "a file name ending in .html", "Timeline.save_html")
        if not p.parent.is_dir():
            raise fail("path", p.name, f"a file in an existing folder; there is no folder {p.parent}", "Timeline.save_html")
        p.write_text(self.html(), encoding="utf-8")
        return p

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The live widget, and for a page without a kernel a picture of the first run's window."""
        import io

        got = super()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle = dict(got[0] if isinstance(got, tuple) else got)
        fig = self.picture()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        bundle["image/png"] = base64.b64encode(buf.getvalue()).decode("ascii")
        bundle["text/plain"] = self.static_caption()
        return bundle


def timeline(*results, labels=None, window: float = 30.0, now: float | None = None, speed: float = 10.0,
             style: str | None = None) -> Timeline:
    """The timeline view of one or more :class:`~mooncake_lab.sim.SimResult` on one clock.

    ``labels``: one title per run (default: trace, policy and architecture). ``window``: seconds shown,
    one of :data:`WINDOWS_S` (0 = the whole run). ``now``: the clock to start at, s (default: the end of
    the first window). ``speed``: simulated s per real s while playing, one of :data:`SPEEDS`. ``style``:
    ``"notebook"`` or ``"projector"`` (default: the course's current style, :func:`mooncake_lab.plots.style`).
    """
    from ..plots import current_style

    where = "timeline"
    if not results:
        raise fail("results", "nothing", "one or more SimResults (what mooncake_lab.sim.simulate returns)", where)
    if len(results) > MAX_RUNS:
        raise fail("results", f"{len(results)} runs", f"at most {MAX_RUNS} on one clock", where)
    ln = [lanes(r) for r in results]
    if labels is None:
        labels = [x.title for x in ln]
    if isinstance(labels, str) or len(labels) != len(ln) or not all(isinstance(x, str) for x in labels):
        raise fail("labels", labels, f"a list of {len(ln)} str, one per run", where)
    if window not in WINDOWS_S:
        raise fail("window", window, f"one of {WINDOWS_S} s (0 = the whole run)", where)
    if speed not in SPEEDS:
        raise fail("speed", speed, f"one of {SPEEDS} (simulated s per real s)", where)
    style = current_style() if style is None else style
    if style not in ("notebook", "projector"):
        raise fail("style", style, "'notebook' or 'projector'", where)
    end = max(x.end_s for x in ln)
    if now is None:
        now = min(end, window if window > 0 else end)
    if not isinstance(now, int | float) or isinstance(now, bool) or not math.isfinite(now) or not 0 <= now <= end:
        raise fail("now", now, f"a time in s, 0 … {end:.6g} (the run's end)", where)
    return Timeline(ln, list(labels), results=results, window=float(window), now=float(now), speed=float(speed),
                    projector=style == "projector")


# A page for Timeline.html(): a stand-in for the widget's model (get / set / on / save_changes), the data
# decoded from base64 into ArrayBuffers, and the view's own module loaded from a Blob.
_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{css}</style></head>
<body><div id="view"></div>
<script type="module">
const D = {data};
const runs = D.runs.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => {{
  if (k === "meta") return [k, v];
  const s = atob(v.b64), b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return [k, new DataView(b.buffer)];
}})));
const state = Object.assign({{runs}}, D.state), on = {{}};
const model = {{
  get: (k) => state[k],
  set: (k, v) => {{ state[k] = v; (on["change:" + k] || []).forEach((f) => f()); }},
  on: (e, f) => {{ (on[e] = on[e] || []).push(f); }},
  off: () => {{}}, save_changes: () => {{}},
}};
window.timelineModel = model;
const src = {js};
const mod = await import(URL.createObjectURL(new Blob([src], {{type: "text/javascript"}})));
mod.default.render({{model, el: document.getElementById("view")}});
document.body.dataset.ready = "1";
</script></body></html>
"""
