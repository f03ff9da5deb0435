"""ipywidgets dashboards, one module per lecture: controls → experiment → figure.

Conventions: each dashboard is a small class with ``.controls`` (a dict of widgets), ``.output``
(an ``Output`` widget cleared before each draw), ``.figure`` (the last matplotlib Figure drawn) and
``.widget`` (what a notebook displays). Controls that run a simulation use
``continuous_update=False``. Tests set ``control.value`` and assert ``.figure`` changed.
"""
from __future__ import annotations

import ipywidgets as widgets
from IPython.display import display

__all__ = ["Dashboard"]


class Dashboard:
    """Base class: subclasses define ``_build_controls()`` and ``_draw() -> Figure``."""

    title: str = ""

    def __init__(self):
        self.controls: dict[str, widgets.Widget] = self._build_controls()
        self.output = widgets.Output()
        self.figure = None
        self.n_draws = 0
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        header = [widgets.HTML(f"<b>{self.title}</b>")] if self.title else []
        self.widget = widgets.VBox(header + [widgets.HBox(list(self.controls.values()),
                                             layout=widgets.Layout(flex_flow="row wrap")),
                                             self.output])
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
        self.figure = fig
        self.n_draws += 1
        self.output.clear_output(wait=True)
        with self.output:
            display(fig)

    def _ipython_display_(self):
        display(self.widget)
