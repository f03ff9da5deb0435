"""ipywidgets dashboards, one module per lecture: controls → experiment → figure.

Conventions: each dashboard is a small class with ``.controls`` (a dict of widgets), ``.readout``
(an HTML line under the controls; empty unless the dashboard writes to it), ``.output`` (where the
figure shows), ``.figure`` (the last matplotlib Figure drawn), ``.png`` (its rendering) and
``.widget`` (what a notebook displays). Controls that run a simulation use
``continuous_update=False``. Tests set ``control.value`` and assert ``.figure`` changed.
"""
from __future__ import annotations

import io

import ipywidgets as widgets
from IPython.display import Image, display

__all__ = ["Dashboard", "render_png"]


def render_png(fig) -> bytes:
    """PNG bytes of ``fig`` from exactly one Agg draw, quickly compressed.

    (``savefig`` and IPython's inline display draw a figure two or three times: once more for the
    layout engine and once for ``bbox_inches="tight"``.)
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image as PILImage  # pillow: a dependency of matplotlib

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    buf = io.BytesIO()
    PILImage.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
        buf, format="png", compress_level=1)
    return buf.getvalue()


class Dashboard:
    """Base class: subclasses define ``_build_controls() -> dict`` and ``_draw() -> Figure``.

    Each move of a control redraws: the figure is rendered once to PNG, and constrained layout runs
    only for the first figure of each shape (later figures reuse its axes positions), which roughly
    halves the time from slider release to picture. The image shows whether or not the inline
    matplotlib backend is active.
    """

    title: str = ""

    def __init__(self):
        self._positions: dict = {}
        self.png = b""
        self.figure = None
        self.n_draws = 0
        self.readout = widgets.HTML()
        self.output = widgets.Output()
        self.controls: dict[str, widgets.Widget] = self._build_controls()
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        header = [widgets.HTML(f"<b>{self.title}</b>")] if self.title else []
        controls = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox(header + [controls, self.readout, self.output])
        self.redraw()

    # -- to override -------------------------------------------------------------------------
    def _build_controls(self) -> dict:
        raise NotImplementedError

    def _draw(self):
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def value(self, name: str):
        return self.controls[name].value

    def _on_change(self, _change) -> None:
        self.redraw()

    def redraw(self) -> None:
        fig = self._draw()
        key = tuple(tuple(ax.get_subplotspec().get_geometry()) if ax.get_subplotspec() else ()
                    for ax in fig.axes)
        frozen = self._positions.get(key)
        if frozen is not None:
            fig.set_layout_engine("none")
            for ax, pos in zip(fig.axes, frozen):
                ax.set_position(pos)
        self.png = render_png(fig)
        if frozen is None:
            self._positions[key] = [ax.get_position() for ax in fig.axes]
        self.figure = fig
        self.n_draws += 1
        self.output.clear_output(wait=True)
        with self.output:
            display(Image(self.png))

    def _ipython_display_(self):
        display(self.widget)
