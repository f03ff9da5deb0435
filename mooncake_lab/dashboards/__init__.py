"""ipywidgets dashboards, one module per lecture: controls → experiment → figure.

Conventions: each dashboard is a small class with ``.controls`` (a dict of widgets), ``.notice``
(an HTML line under them saying which value a control refused, empty after a good move), ``.readout``
(an HTML line under the controls; empty unless the dashboard writes to it), ``.output`` (where the
figure shows), ``.figure`` (the matplotlib Figure shown), ``.png`` (its rendering) and
``.widget`` (what a notebook displays). Controls that run a simulation use
``continuous_update=False``. Tests set ``control.value`` and assert the figure changed.

Speed (DESIGN §5: ≤ 150 ms from slider release to picture). Drawing text is what makes matplotlib
slow (≈ 1 ms per label on this machine), so a dashboard builds its figure **once**
(:meth:`Dashboard._setup`) and on each move only updates its artists' data
(:meth:`Dashboard._update`). Artists that change are marked *animated* (:meth:`Dashboard.dynamic`);
everything else — axes, ticks, labels, legends — is drawn once into a background image that each
move reuses (matplotlib's blitting), and redrawn only when an axis limit, scale, title or label
changed (the last few backgrounds are kept, so going back to a recent view is fast too). Sticky axis
limits (:func:`sticky_limit`) keep that rare, and let a student compare moves against a fixed scale.

Simulations that cost more than the budget allows (coupled engines at overload, three policies
at once, another trace) are computed ahead: a dashboard may list the runs its next moves are likely
to need (:meth:`Dashboard._prefetch_jobs`); after each move they run one by one in a low-priority
background thread (:class:`~mooncake_lab.experiments.common.Prefetch`) while the student looks, and
a move then finds them memoised. ``MOONCAKE_LAB_PREFETCH=0`` in the environment switches this off.

Bad values (:func:`control_value`). A dashboard's keyword arguments set its controls, each checked
against what the control can hold (a slider's range, a dropdown's options) before anything is
computed: ``OverloadDashboard(trace="toolagent")`` raises ``ValueError("OverloadDashboard(trace=...):
got 'toolagent'; allowed: one of 'toolagent-like', 'conversation'")``. Later, every change of a
control (from code or the browser) goes through the same check first: a value the control cannot
hold (NaN, None, ±inf, out of range, a string for a number, an unknown option) is refused — the
control keeps its value, the figure stays as it is and right, and the dashboard's :attr:`notice` line
says what was refused and what is allowed. Nothing is clamped silently, and no bad value reaches a
computation.
"""
from __future__ import annotations

import base64
import functools
import html
import io
import math
import os
import struct
import zlib

import ipywidgets as widgets
import numpy as np
from IPython.display import Image, display

from ..validate import InputError, describe, fail, flag, integer, option, real

__all__ = ["Dashboard", "control_value", "model_arg", "node_arg", "on_this_machine", "prefetch_enabled", "render_png", "nice_ceiling",
           "sticky_limit", "sticky_decades"]

_SELECTIONS = (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons, widgets.SelectionSlider,
               widgets.Select)

#: Backgrounds kept per dashboard (≈ 1–3 MB each): going back to a view or scale seen recently
#: needs no full redraw.
_MAX_BACKGROUNDS = 8


def _png(canvas) -> bytes:
    """PNG of the canvas: RGB, unfiltered rows, zlib level 1 (about 2× faster than Pillow's encoder,
    which filters every row; the figure background is opaque, so alpha carries nothing)."""
    w, h = canvas.get_width_height()
    rgba = np.asarray(canvas.buffer_rgba())
    if rgba[..., 3].min() < 255:   # a transparent figure: keep alpha, let Pillow encode it
        from PIL import Image as PILImage  # pillow: a dependency of matplotlib

        buf = io.BytesIO()
        PILImage.fromarray(rgba, "RGBA").save(buf, format="png", compress_level=1)
        return buf.getvalue()
    rows = np.zeros((h, 1 + 3 * w), dtype=np.uint8)   # filter byte 0 ("none") then R, G, B per pixel
    rows[:, 1:] = rgba[..., :3].reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)   # 8-bit RGB, deflate, no filter, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
            + chunk(b"IEND", b""))


def _shown_value(w) -> str:
    """A control's value as its front end shows it: a selection's label, a slider's readout, on/off."""
    if isinstance(w, widgets.Checkbox | widgets.ToggleButton):
        return "on" if w.value else "off"
    label = getattr(w, "label", None)
    if isinstance(label, str):
        return label
    if isinstance(w.value, float):
        try:
            return format(w.value, getattr(w, "readout_format", "") or "g")
        except ValueError:
            return f"{w.value:g}"
    return str(w.value)


def render_png(fig) -> bytes:
    """PNG bytes of ``fig`` from exactly one Agg draw, quickly compressed.

    (``savefig`` and IPython's inline display draw a figure two or three times: once more for the
    layout engine and once for ``bbox_inches="tight"``.)
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return _png(canvas)


def nice_ceiling(x: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k that is ≥ ``x`` (``x`` > 0)."""
    if not (x > 0 and math.isfinite(x)):
        return 1.0
    k = math.floor(math.log10(x))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * 10.0 ** k >= x * (1 - 1e-12):
            return m * 10.0 ** k
    return 10.0 ** (k + 1)


def sticky_limit(current: float | None, needed: float, headroom: float = 1.1, shrink_below: float = 0.3) -> float:
    """An upper axis limit that changes only when it must: kept while ``needed`` fits under
    ``current`` and fills more than ``shrink_below`` of it; else ``nice_ceiling(needed × headroom)``."""
    if current is not None and shrink_below * current <= needed <= current:
        return current
    return nice_ceiling(needed * headroom)


def sticky_decades(current: tuple | None, lo: float, hi: float) -> tuple:
    """Log-axis limits at whole decades around ``[lo, hi]`` (> 0), kept while the data still
    reaches within 1.3 decades (× 20) of each end (:func:`sticky_limit` on each end)."""
    cur_lo, cur_hi = current or (None, None)
    top = sticky_limit(cur_hi, hi, headroom=1.0, shrink_below=0.05)
    bottom = 1.0 / sticky_limit(None if cur_lo is None else 1.0 / cur_lo, 1.0 / lo, headroom=1.0, shrink_below=0.05)
    return 10.0 ** math.floor(math.log10(bottom) + 1e-9), 10.0 ** math.ceil(math.log10(top) - 1e-9)


@functools.cache
def _guarded_class(cls: type) -> type:
    """``cls`` whose new ``value`` — assigned from code (``w.value = x``) or sent by a browser
    (``set_state`` → ``set_trait``) — first passes the instance's ``_accept_value(w, value) ->
    (ok, value)`` (set by :meth:`Dashboard._guard`), before traitlets' own checks (whose errors name
    neither the control nor what it allows, and which clamp); a refused value is not assigned."""
    def __setattr__(self, key, value):
        accept = self.__dict__.get("_accept_value") if key == "value" else None
        if accept is not None:
            ok, value = accept(self, value)
            if not ok:
                return
        super(guarded, self).__setattr__(key, value)

    def set_trait(self, name, value):
        accept = self.__dict__.get("_accept_value") if name == "value" else None
        if accept is not None:
            ok, value = accept(self, value)
            if not ok:
                return
        super(guarded, self).set_trait(name, value)

    guarded = type(cls)(cls.__name__, (cls,), {"__setattr__": __setattr__, "set_trait": set_trait,
                                               "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return guarded


def control_value(w: widgets.Widget, value, name: str, where: str = ""):
    """``value`` as control ``w`` holds it (an option as listed; an int for an int slider), or
    :class:`~mooncake_lab.validate.InputError` naming ``where.name``, the value and what ``w`` allows:
    one of its options; a finite number in a slider's [min, max] (a log slider: base**min …
    base**max); True or False for a checkbox. Nothing is clamped."""
    if isinstance(w, _SELECTIONS):
        opts = [o[1] if isinstance(o, tuple) else o for o in w.options]
        return option(value, name, opts, where)
    if isinstance(w, (widgets.Checkbox, widgets.ToggleButton)):
        return flag(value, name, where)
    if isinstance(w, widgets.FloatLogSlider):
        lo, hi = w.base ** w.min, w.base ** w.max
        v = real(value, name, lo=lo * (1 - 1e-9), hi=hi * (1 + 1e-9), where=where)  # (base**x rounds)
        return min(max(v, lo), hi)
    if isinstance(w, (widgets.IntSlider, widgets.BoundedIntText)):
        return integer(value, name, lo=w.min, hi=w.max, where=where)
    if isinstance(w, (widgets.FloatSlider, widgets.BoundedFloatText)):
        return real(value, name, lo=w.min, hi=w.max, where=where)
    raise TypeError(f"control_value: no check for a {type(w).__name__} ({where}.{name}); add one")


def model_arg(model, where: str):
    """A dashboard's ``model=`` argument as a :class:`~mooncake_lab.models.ModelConfig` (any spelling
    :func:`~mooncake_lab.models.get_model` knows), or a ValueError naming ``where`` and the models."""
    from ..models import MODELS, ModelConfig, get_model

    try:
        if not isinstance(model, (str, ModelConfig)):
            raise TypeError(model)
        return get_model(model)
    except Exception:  # noqa: BLE001 - a name it does not know, or not a name at all
        raise fail(f"{where}(model=...)", model, "one of " + ", ".join(map(repr, MODELS))) from None


def node_arg(node, where: str):
    """A dashboard's ``node=`` argument as a :class:`~mooncake_lab.hardware.Node`, or a ValueError
    naming ``where`` and the nodes."""
    from ..hardware import NODES, Node, get_node

    try:
        if not isinstance(node, (str, Node)):
            raise TypeError(node)
        return get_node(node)
    except Exception:  # noqa: BLE001
        raise fail(f"{where}(node=...)", node, "one of " + ", ".join(map(repr, NODES))) from None


def on_this_machine(trace_name: str) -> bool:
    """Whether trace ``trace_name`` loads without a download: a synthetic preset, or a released
    trace found locally (what a dashboard may load ahead in the background)."""
    from .. import synthetic, trace_data

    return trace_name in synthetic.PRESETS or trace_data.find_local(trace_name) is not None


def prefetch_enabled() -> bool:
    """False when the environment variable ``MOONCAKE_LAB_PREFETCH`` is 0 / false / no / off."""
    return os.environ.get("MOONCAKE_LAB_PREFETCH", "1").strip().lower() not in ("0", "false", "no", "off")


class Dashboard:
    """Base class: subclasses define ``_build_controls() -> dict``, ``_setup() -> Figure`` (build the
    figure and its artists once, marking with :meth:`dynamic` the ones that change) and ``_update()``
    (set the current data on them).

    A subclass's constructor passes its keyword arguments on as ``super().__init__(control=value,
    ...)``: each is checked against its control (:func:`control_value`; a ``ValueError`` naming the
    dashboard, the keyword and what is allowed) and set before the first draw; :attr:`_KEYWORDS` names
    the keyword where it differs from the control's name. Controls are built without these values.

    Each move renders the figure once to PNG. The image shows whether or not the inline matplotlib
    backend is active.
    """

    title: str = ""
    #: control name → the constructor keyword that sets it, where they differ (for error messages)
    _KEYWORDS: dict = {}

    def __init__(self, **values):
        self.png = b""
        self.figure = None
        self.n_draws = 0
        self.n_full_draws = 0      # renders that redrew the static background
        self.n_refused = 0         # control changes refused (values the control cannot hold)
        self._canvas = None
        self._backgrounds: dict = {}   # background key → saved pixels (the latest _MAX_BACKGROUNDS)
        self._laid_out = False
        self._restoring = False
        self.readout = widgets.HTML()
        self.notice = widgets.HTML()   # what the last refused change was (empty after a good move)
        self.output = widgets.Output()
        self.controls: dict[str, widgets.Widget] = self._build_controls()
        cls = type(self).__name__
        for name in values:
            if name not in self.controls:
                raise fail(name, values[name], "a keyword naming one of its controls: " + ", ".join(self.controls), cls)
        for name, value in values.items():   # every one checked before any is set
            kw = self._KEYWORDS.get(name, name)
            values[name] = control_value(self.controls[name], value, f"{cls}({kw}=...)")
        for name, value in values.items():
            self.controls[name].value = value
        for name, w in self.controls.items():
            self._guard(name, w)
            w.observe(self._on_change, names="value")
        header = [widgets.HTML(f"<b>{self.title}</b>")] if self.title else []
        controls = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox(header + [controls, self.notice, self.readout, self.output])
        self.prefetch = None   # runs computed ahead for the next moves (see the module docstring)
        self.redraw()

    def _guard(self, name: str, w: widgets.Widget) -> None:
        """Check every new value of control ``w`` (:func:`control_value`) before it is set: one it
        cannot hold is refused — ``w`` keeps its value, so nothing observes a change and nothing is
        computed — and :attr:`notice` says what was refused and what is allowed."""
        where = type(self).__name__

        def accept(obj, value) -> tuple[bool, object]:
            try:
                return True, control_value(obj, value, name, where)
            except InputError as err:
                self._refuse(obj, f"{err}. Kept {name} = {describe(obj.value)}.")
                return False, obj.value

        w.__class__ = _guarded_class(type(w))
        w._accept_value = accept

    def _refuse(self, w: widgets.Widget, message: str) -> None:
        self.n_refused += 1
        self.notice.value = f'<span style="color:#b00020">⚠ {html.escape(message)}</span>'
        try:   # a browser that sent the value shows the kept one again
            w.send_state("value")
        except Exception:  # noqa: BLE001 - no front end (tests, scripts)
            pass

    # -- to override -------------------------------------------------------------------------
    def _build_controls(self) -> dict:
        raise NotImplementedError

    def _setup(self):
        raise NotImplementedError

    def _update(self) -> None:
        raise NotImplementedError

    def _prefetch_jobs(self, values: dict) -> list:
        """The runs the next moves from control ``values`` (a snapshot: this runs in the background
        thread) are likely to need, likeliest first: ``(trace, speed, ClusterConfig)`` tuples, or
        functions without arguments (e.g. loading a trace and a table of it)."""
        return []

    def _start_prefetch(self) -> None:
        """Compute ahead for the current state (after each move), dropping what was queued before."""
        if type(self)._prefetch_jobs is Dashboard._prefetch_jobs or not prefetch_enabled():
            return
        from ..experiments.common import Prefetch

        if self.prefetch is not None:
            self.prefetch.cancel()
        values = {k: w.value for k, w in self.controls.items()}
        self.prefetch = Prefetch(lambda: self._prefetch_jobs(values))

    def _static_key(self):
        """Anything else (besides axis limits, scales, titles and labels) whose change means the
        background must be redrawn — e.g. the value of a control that relabels ticks."""
        return None

    # -- shared ------------------------------------------------------------------------------
    def value(self, name: str):
        return self.controls[name].value

    @staticmethod
    def dynamic(*artists):
        """Mark ``artists`` as changing on every move (drawn over the cached background)."""
        for a in artists:
            a.set_animated(True)
        return artists[0] if len(artists) == 1 else artists

    def _on_change(self, change) -> None:
        if self._restoring:
            return
        try:
            self.redraw()
        except Exception as err:
            # a value the control holds but the computation failed on: put the control back (the
            # figure then shows what the controls say), say so, and raise (a bug to fix)
            self.notice.value = (f'<span style="color:#b00020">⚠ {html.escape(type(err).__name__)} at '
                                 f'{html.escape(describe(change["new"]))}: {html.escape(str(err)[:200])}</span>')
            self._restoring = True
            try:
                change["owner"].value = change["old"]
            finally:
                self._restoring = False
            self.redraw()
            raise
        if self.notice.value:
            self.notice.value = ""

    def redraw(self) -> None:
        from ..plots import figure_style

        if self.figure is None:
            self.figure = self._setup()
        with figure_style(self.figure):
            self._update()
            self.png = self._render()
        self.n_draws += 1
        self.output.clear_output(wait=True)
        with self.output:
            display(Image(self.png))
        self._start_prefetch()

    def _background_key(self) -> str:
        fig = self.figure
        key = [self._static_key(), tuple(fig.get_size_inches())]
        sup = getattr(fig, "_suptitle", None)
        key.append(sup.get_text() if sup is not None and not sup.get_animated() else None)
        for ax in fig.axes:
            texts = (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label)  # noqa: SLF001
            key.append((ax.get_visible(), None if ax.xaxis.get_animated() else ax.get_xlim(),
                        None if ax.yaxis.get_animated() else ax.get_ylim(), ax.get_xscale(), ax.get_yscale(),
                        tuple(t.get_text() for t in texts if not t.get_animated())))
        return repr(key)

    def _dynamic_artists(self) -> list:
        fig = self.figure
        arts = [a for a in fig.get_children() if a.get_animated()]
        for ax in fig.axes:
            if ax.get_visible():
                arts += [a for a in ax.get_children() if a.get_animated()]
        return sorted(arts, key=lambda a: a.get_zorder())

    def _render(self, force_background: bool = False) -> bytes:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = self.figure
        if self._canvas is None:
            self._canvas = FigureCanvasAgg(fig)
        canvas = self._canvas
        key = self._background_key()
        background = None if force_background else self._backgrounds.get(key)
        if background is None:
            canvas.draw()                       # the background: animated artists are skipped
            if not self._laid_out:              # freeze the first layout: later draws reuse it
                fig.set_layout_engine("none")
                self._laid_out = True
            self._backgrounds.pop(key, None)
            self._backgrounds[key] = canvas.copy_from_bbox(fig.bbox)
            while len(self._backgrounds) > _MAX_BACKGROUNDS:
                self._backgrounds.pop(next(iter(self._backgrounds)))
            self.n_full_draws += 1
        else:
            self._backgrounds[key] = self._backgrounds.pop(key)   # most recently used last
            canvas.restore_region(background)
        renderer = canvas.get_renderer()
        for a in self._dynamic_artists():
            if a.get_visible():
                a.draw(renderer)
        return _png(canvas)

    def background_is_current(self) -> bool:
        """For tests: does the image shown equal a full redraw of the figure as it is now?"""
        from ..plots import figure_style

        with figure_style(self.figure):
            return self._render(force_background=True) == self.png

    def static_caption(self) -> str:
        """One line naming the dashboard and its controls' values, for a picture of it shown without a kernel."""
        shown = ", ".join(f"{(w.description or name).rstrip(': ')} = {_shown_value(w)}"
                          for name, w in self.controls.items())
        head = f"{self.title} — " if self.title else ""
        return f"{head}{shown}. A picture of the dashboard; run the notebook to move its controls."

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The live widget, and for a page without a kernel (``make course``, a notebook viewer) a
        picture of it as drawn now with :meth:`static_caption` (front ends with widgets show the widget)."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["image/png"] = base64.b64encode(self.png).decode("ascii")
        bundle["text/plain"] = self.static_caption()
        return bundle
