"""Dashboards of lecture 01: a live roofline, and prefill/decode times under presets and NVLink.

Compute lives in :mod:`mooncake_lab.experiments.l01_roofline`, drawing in
:mod:`mooncake_lab.plots.roofline`. Every slider picks from a fixed list (powers of two) or a
bounded range, so no setting can crash; all sliders use ``continuous_update=False``.
"""
from __future__ import annotations

import math

import ipywidgets as widgets

from .. import roofline as rf
from ..experiments import l01_roofline as exp
from ..hardware import get_node
from ..models import MODELS, get_model
from ..plots import roofline as plots
from . import Dashboard, model_arg, node_arg, sticky_limit

__all__ = ["RooflineDashboard", "PresetDashboard", "NODE_CHOICES", "PROMPT_CHOICES", "BATCH_CHOICES",
           "CONTEXT_CHOICES", "NVLINK_RANGE_GBS"]

#: Nodes offered (8 GPUs each, hardware.NODES): the paper's A800 node first.
NODE_CHOICES = ("a800x8", "a100x8", "h800x8", "h100x8", "h20x8")
PROMPT_CHOICES = tuple(2 ** k for k in range(7, 18))      # 128 … 131,072 tokens
BATCH_CHOICES = tuple(2 ** k for k in range(0, 11))       # 1 … 1,024 sequences
CONTEXT_CHOICES = tuple(2 ** k for k in range(7, 18))     # 128 … 131,072 tokens per sequence
#: NVLink slider bounds, GB/s bidirectional per GPU: below the A800's 400 … the H100's 900.
NVLINK_RANGE_GBS = (100, 900)
_PRESETS = ("ideal", "calibrated", "modern")
TP_COMM_LABEL = "expose TP all-reduce"
#: What the all-reduce box says under "calibrated", which always exposes the all-reduce (at 67% of NVLink).
TP_COMM_ALWAYS_LABEL = "TP all-reduce: always exposed under calibrated"
#: Every control's label shown in full ("node (8 GPUs)", "context/seq"), not cut to ipywidgets' default
#: 80-pixel description column.
_STYLE = {"description_width": "initial"}
#: The prompt whose prefill time the presets dashboard's readout gives, tokens (the lecture's 8k prompt).
READOUT_PROMPT = 8192


def _tok_options(values) -> list[tuple[str, int]]:
    return [(f"{v // 1024}k" if v >= 1024 else str(v), v) for v in values]


class RooflineDashboard(Dashboard):
    """A live roofline: one prefill point (prompt length) and one decode point (batch × context).

    Controls: ``model``, ``node`` (8-GPU node type), ``preset`` (ideal / calibrated / modern: under a
    non-ideal preset, hollow markers show the FLOP/s actually achieved below the roof),
    ``prompt`` (tokens), ``batch`` (sequences), ``context`` (tokens per decoding sequence).
    """

    title = "Lecture 01 · live roofline: where do prefill and decode sit?"

    def __init__(self, model: str = "LLaMA2-70B", node: str = "a800x8", preset: str = "ideal",
                 prompt: int = 8192, batch: int = 32, context: int = 1024):
        if isinstance(model, str):   # any spelling get_model knows ("llama2-70b"); else the dropdown's
            try:                      # check names the options
                model = get_model(model).name
            except ValueError:
                pass
        super().__init__(model=model, node=node, preset=preset, prompt=prompt, batch=batch, context=context)

    def _build_controls(self) -> dict:
        return {
            "model": widgets.Dropdown(options=list(MODELS), description="model", style=_STYLE),
            "node": widgets.Dropdown(options=NODE_CHOICES, description="node (8 GPUs)", style=_STYLE),
            "preset": widgets.ToggleButtons(options=_PRESETS, description="preset", style=_STYLE),
            "prompt": widgets.SelectionSlider(options=_tok_options(PROMPT_CHOICES), description="prompt",
                                              continuous_update=False, style=_STYLE),
            "batch": widgets.SelectionSlider(options=BATCH_CHOICES, description="decode batch",
                                             continuous_update=False, style=_STYLE),
            "context": widgets.SelectionSlider(options=_tok_options(CONTEXT_CHOICES), description="context/seq",
                                               continuous_update=False, style=_STYLE),
        }

    def _setup(self):
        self.view = plots.RooflineChart(sweep=True, live=True)
        self._per_context: dict = {}    # (model, node, context) → (sweep, decode ridge batch), ≈ 15 ms each
        return self.view.figure

    def _static_key(self):
        return self.view.static_state

    def _update(self):
        m, nd = get_model(self.value("model")), get_node(self.value("node"))
        preset, n, b, ctx = self.value("preset"), self.value("prompt"), self.value("batch"), self.value("context")
        pts = exp.roofline_points(m, nd, lengths=(n,), batches=(b,), context_per_seq=ctx, preset=preset)
        key = (m.name, nd.name, ctx)
        if key not in self._per_context:
            self._per_context[key] = (exp.roofline_sweep(m, nd, "ideal", context_per_seq=ctx),
                                      exp.decode_ridge_batch(m, nd, ctx))
        sweep, rb = self._per_context[key]
        ridge = rf.ridge_point(nd)
        self.readout.value = self._readout(m, nd, pts, ridge, n, b, ctx, rb)
        curve = exp.roofline_curve(nd, exp.ROOFLINE_INTENSITIES)
        # Achieved FLOP/s are shown under every preset (under "ideal" they sit on the roof), and the
        # legend and y label name neither preset nor node (the title does): the background stays put.
        self.view.update(curve, pts, node_label="the node", ridge=ridge,
                         sweep=sweep, show_achieved=True, preset_label=None,
                         title=f"{m.name} on 8×{nd.gpu.name} ({preset} preset)\nprefill of {n:,} "
                               f"tokens, decode of {b} × {ctx:,}-token sequences")

    @staticmethod
    def _readout(m, nd, pts, ridge, n, b, ctx, rb) -> str:
        pre, dec = pts.iloc[0], pts.iloc[1]
        cap = rf.decode_kv_capacity_tokens(m, nd)
        if cap <= 0:
            fits = "<b>does not fit</b>: the weights alone exceed the node's HBM"
        else:
            fits = "fits" if b * ctx <= cap else f"<b>does not fit</b> (capacity {cap:,.0f} tokens)"
        rb_txt = "never (KV reads grow as fast as FLOPs)" if math.isinf(rb) else f"≈ {rb:,.0f}"
        bound = lambda i: "compute-bound" if i >= ridge else "memory-bound"  # noqa: E731
        return (f"ridge {ridge:.0f} FLOP/B · <b>prefill</b> of {n:,} tokens: {pre.intensity:,.0f} FLOP/B "
                f"({bound(pre.intensity)}), {pre.time_s * 1e3:,.1f} ms, MFU {pre.achieved_flops / nd.peak_flops:.0%}"
                f"<br><b>decode</b> {b} × {ctx:,}: {dec.intensity:,.1f} FLOP/B ({bound(dec.intensity)}), "
                f"{dec.time_s * 1e3:,.1f} ms/step, KV {fits}; compute-bound from batch {rb_txt}")


class PresetDashboard(Dashboard):
    """Prefill time & MFU vs length and decode step vs batch on 8×A800 for one preset and NVLink.

    Controls: ``preset``; ``nvlink`` (GB/s, datasheet bidirectional figure; A800 400, A100 600,
    H100 900); ``tp_comm`` (expose the TP all-reduce for ideal/modern, which assume it overlapped;
    calibrated always exposes it); ``context`` (tokens per decoding sequence). The dashed grey
    line is the ideal preset (the physical limit); black diamonds are the A100 TP8 measurements.
    """

    title = "Lecture 01 · presets and NVLink: prefill time, MFU and decode step on 8×A800"

    _KEYWORDS = {"nvlink": "nvlink_gbs"}

    def __init__(self, preset: str = "calibrated", nvlink_gbs: int = 400, tp_comm: bool = False,
                 context: int = 1024, model: str = "LLaMA2-70B", node: str = "a800x8"):
        self._model, self._node = model_arg(model, "PresetDashboard"), node_arg(node, "PresetDashboard")
        super().__init__(preset=preset, nvlink=nvlink_gbs, tp_comm=tp_comm, context=context)

    def _build_controls(self) -> dict:
        lo, hi = NVLINK_RANGE_GBS
        return {
            "preset": widgets.ToggleButtons(options=_PRESETS, description="preset", style=_STYLE),
            "nvlink": widgets.IntSlider(min=lo, max=hi, step=50, description="NVLink GB/s", continuous_update=False,
                                        style=_STYLE),
            "tp_comm": widgets.Checkbox(description=TP_COMM_LABEL, indent=False, layout=widgets.Layout(width="auto"),
                                        style=_STYLE),
            "context": widgets.SelectionSlider(options=_tok_options(CONTEXT_CHOICES[1:9]), description="context/seq",
                                               continuous_update=False, style=_STYLE),
        }

    def _config(self):
        name = self.value("preset")
        box = self.controls["tp_comm"]
        box.disabled = name == "calibrated"   # calibrated always exposes it: the box cannot change anything
        box.description = (TP_COMM_ALWAYS_LABEL if box.disabled else TP_COMM_LABEL)
        preset = exp.with_tp_comm(name) if self.value("tp_comm") else name
        return preset, exp.with_nvlink(self._node, self.value("nvlink"))

    def _setup(self):
        self._measured = exp.measured_prefill_mfu()
        self._ideal_pre = exp.prefill_vs_length(self._model, self._node, presets=("ideal",))
        self.view = plots.PrefillDecodePanels(exp.DEFAULT_LENGTHS, exp.DEFAULT_BATCHES, ref_pre=self._ideal_pre,
                                              ref_label="ideal (physical limit)", measured=self._measured,
                                              node_label=f"{self._model.name} on 8×A800", live=True)
        self._time_ymax = self._step_ymax = None
        self._tables: dict = {}         # control values → (pre, dec, ref_dec, readout), ≈ 10 ms each
        self._scales: dict = {}         # (all-reduce exposed, context) → slowest prefill (s), decode step (ms)
        return self.view.figure

    def _update(self):
        preset, node = self._config()
        ctx, comm = self.value("context"), self.value("tp_comm")
        m = self._model
        key = (getattr(preset, "name", preset), self.value("nvlink"), ctx)
        if key not in self._tables:
            pre = exp.prefill_vs_length(m, node, presets=(preset,))
            self._tables[key] = (pre, exp.decode_vs_batch(m, node, context_per_seq=ctx, presets=(preset,)),
                                 exp.decode_vs_batch(m, node, context_per_seq=ctx, presets=("ideal",)),
                                 self._readout(m, node, preset, pre))
        pre, dec, ref_dec, self.readout.value = self._tables[key]
        # One scale for every preset and NVLink setting (a move shifts the lines, not the axes): the
        # slowest preset at the slowest NVLink, for this all-reduce option and context.
        if (comm, ctx) not in self._scales:
            slow = exp.with_nvlink(self._node, NVLINK_RANGE_GBS[0])
            names = [exp.with_tp_comm(p) if comm else p for p in _PRESETS]
            self._scales[comm, ctx] = (
                float(exp.prefill_vs_length(m, slow, presets=names)["time_s"].max()),
                float(exp.decode_vs_batch(m, slow, context_per_seq=ctx, presets=names)["step_s"].max()) * 1e3)
        slow_pre, slow_dec = self._scales[comm, ctx]
        self._time_ymax = sticky_limit(self._time_ymax, slow_pre, headroom=1.2, shrink_below=0.01)
        self._step_ymax = sticky_limit(self._step_ymax, slow_dec)
        label = f"{key[0]}, NVLink {self.value('nvlink')} GB/s"
        self.view.update(pre, dec, label=label, ref_dec=ref_dec, time_ymax_s=self._time_ymax,
                         step_ymax_ms=self._step_ymax)

    def _readout(self, m, node, preset, pre) -> str:
        n = READOUT_PROMPT
        row = pre[pre["n_new"] == n].iloc[0]
        share = exp.tp_comm_share(m, node, preset)
        pen = exp.nvlink_penalty(n, m, self._node, preset, nvlink_gbs=self.value("nvlink"), reference_gbs=600)
        comm = (f"TP all-reduce = {share:.0%} of per-token prefill time; vs NVLink 600 GB/s (A100): "
                f"{pen * 1e3:+,.0f} ms" if share > 0 else "TP all-reduce assumed overlapped (NVLink has no effect)")
        meas = self._measured[(self._measured["tp"] == 8) & (self._measured["prompt_tokens"] == n)]
        meas_txt = f" (measured, A100 TP8: {meas['measured_s'].iloc[0]:.3f} s)" if len(meas) else ""
        return f"{n // 1024}k prefill: <b>{row.time_s:.3f} s</b>, MFU {row.mfu:.0%}{meas_txt} · {comm}"
