"""Transformer model shapes and what they cost: parameters, weight bytes, KV bytes, FLOPs.

Counting conventions (units: FLOP, bytes, tokens):

* A matmul with a weight of ``k × m`` costs ``2·k·m`` FLOP per token. Linear FLOPs per token =
  2 × (matmul weights of all layers, MoE: only the *active* experts). Norms, biases, softmax and
  activations are ignored (< 0.1%).
* The LM head costs ``2·vocab·d`` per token and is counted separately (it is not negligible for
  large vocabularies: 0.52 GFLOP/token for LLaMA2-70B, 2.1 for LLaMA3-70B). In a prefill we count
  it for every token, as the seed lecture and public calculators do (engines often compute only
  the last token's logits; :meth:`ModelConfig.prefill_flops_breakdown` lists it apart).
* Causal attention for ``n`` new tokens after ``c`` cached ones: new token ``i`` attends to
  ``c + i`` keys, so scores + values cost ``2·L·H·(d_qk + d_v)·n·(c + n/2)``
  (= ``4·L·d_head·H·n·(c + n/2)`` for MHA/GQA; the ½ is the causal mask).
* KV bytes per token: MHA/GQA ``2·L·H_kv·d_head·s``; MLA stores one compressed latent plus a
  RoPE key per layer: ``L·(kv_lora_rank + d_rope)·s``.
* MLA attention has two forms. A prefill decompresses the latent into per-head keys and values
  (the un-absorbed form: ``2·L·H·(d_qk + d_v)`` per pair, 5.0 MFLOP for DeepSeek-V3). A decode step
  reads only the cached latent, so it attends in the *absorbed* form (the key up-projection folded
  into the query, the value up-projection applied after the sum): every head scores against the
  ``kv_lora_rank + d_rope`` = 576-value latent and sums the 512-value latent,
  ``2·L·H·(kv_lora_rank + d_rope + kv_lora_rank)`` per attended key (DeepSeek-V3: 17.0 MFLOP,
  ≈ 242 FLOP per KV byte). Per token both forms apply the same up-projections (to the new key
  and value, or to the query and the output), so the linear count is the same.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .validate import InputError, _is_real, describe, integer, real

__all__ = ["ModelConfig", "MODELS", "get_model", "LLAMA2_70B", "LLAMA2_7B", "LLAMA3_70B",
           "OPT_13B", "DEEPSEEK_V3", "DEEPSEEK_V3_FP8", "fast25_eq1_prefill_flops"]


#: Largest token/batch count a cost formula takes: 10**15, far past any context (DeepSeek-V3: 128k)
#: or fleet, yet far from float overflow (attention is quadratic: (10**15)² × 10**7 FLOP ≪ 1e308).
MAX_COUNT = 10**15


def _check_count(name: str, value, *, minimum: int) -> float:
    """Validate a token/batch count: a finite real number in [``minimum``, MAX_COUNT]; returns it as float."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if not _is_real(value):
        raise InputError(f"{name} must be a number >= {minimum}, got {describe(value)}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v) or v < minimum:
        raise InputError(f"{name} must be a finite number >= {minimum}, got {describe(value)}")
    if v > MAX_COUNT:
        raise InputError(f"{name} must be a finite number in [{minimum}, 10**15], got {describe(value)}")
    return v


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer (all dimensions in elements, sizes in bytes).

    ``attention`` is "mha", "gqa" or "mla". For MLA, ``kv_lora_rank``, ``q_lora_rank``,
    ``d_rope`` (RoPE key dim, shared by all heads), ``d_nope`` (per-head no-RoPE q/k dim) and
    ``d_v`` (per-head value dim) describe the projections. For MoE, ``n_experts`` routed
    experts of width ``d_ff_expert``, ``top_k`` active per token, ``n_shared_experts`` always on,
    and the first ``n_dense_layers`` use a dense FFN of width ``d_ff``.
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab: int
    ffn: str = "swiglu"              # "swiglu" (3 matrices) or "gelu" (2 matrices, OPT)
    attention: str = "gqa"           # "mha", "gqa" or "mla"
    tied_embeddings: bool = False
    bias: bool = False               # OPT has biases on every linear layer
    max_positions: int = 0           # > 0: learned position embeddings (OPT)
    bytes_per_param: int = 2         # BF16/FP16 weights
    kv_bytes_per_elem: int = 2       # BF16/FP16 KV cache
    # MLA
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    d_rope: int = 0
    d_nope: int = 0
    d_v: int = 0
    # MoE
    n_experts: int = 0
    top_k: int = 0
    n_shared_experts: int = 0
    d_ff_expert: int = 0
    n_dense_layers: int = 0
    source: str = ""

    # --- shapes --------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def d_qk(self) -> int:
        """Per-head query/key dimension used in the score dot product."""
        return self.d_nope + self.d_rope if self.attention == "mla" else self.d_head

    @property
    def d_value(self) -> int:
        """Per-head value dimension."""
        return self.d_v if self.attention == "mla" else self.d_head

    @property
    def gqa_ratio(self) -> float:
        """Query heads per KV head (1 for MHA; 8 for LLaMA2-70B)."""
        return self.n_heads / self.n_kv_heads

    def _attn_params_per_layer(self) -> int:
        d, H = self.d_model, self.n_heads
        if self.attention == "mla":
            q = (d * self.q_lora_rank + self.q_lora_rank * H * self.d_qk) if self.q_lora_rank else d * H * self.d_qk
            kv = d * (self.kv_lora_rank + self.d_rope) + self.kv_lora_rank * H * (self.d_nope + self.d_v)
            return q + kv + H * self.d_v * d
        return d * H * self.d_head + 2 * d * self.n_kv_heads * self.d_head + H * self.d_head * d

    def _ffn_params(self, width: int) -> int:
        return (3 if self.ffn == "swiglu" else 2) * self.d_model * width

    def _ffn_params_total(self, active: bool) -> int:
        if not self.is_moe:
            return self.n_layers * self._ffn_params(self.d_ff)
        n_moe = self.n_layers - self.n_dense_layers
        experts = (self.top_k if active else self.n_experts) + self.n_shared_experts
        router = self.n_experts * self.d_model
        return (self.n_dense_layers * self._ffn_params(self.d_ff)
                + n_moe * (experts * self._ffn_params(self.d_ff_expert) + router))

    def layer_matmul_params(self, active: bool = True) -> int:
        """Matmul weights of all transformer layers (MoE: active experts only if ``active``)."""
        return self.n_layers * self._attn_params_per_layer() + self._ffn_params_total(active)

    def parameters(self) -> int:
        """Total parameter count (embeddings, LM head unless tied, layers, norms, biases)."""
        d = self.d_model
        n = self.layer_matmul_params(active=False) + self.vocab * d
        if not self.tied_embeddings:
            n += self.vocab * d
        n += self.max_positions * d
        norm_per = 2 * d if self.ffn == "swiglu" else 4 * d     # RMSNorm weight vs LayerNorm w+b
        n += self.n_layers * norm_per + norm_per // 2
        if self.bias:  # q,k,v,o biases + FFN biases (OPT)
            n += self.n_layers * (3 * self.n_heads * self.d_head + d + self.d_ff + d)
        return n

    def active_parameters(self) -> int:
        """Parameters touched per token (MoE: active experts only)."""
        return self.parameters() - self.layer_matmul_params(False) + self.layer_matmul_params(True)

    def weight_bytes(self) -> float:
        """Bytes of all weights resident in HBM."""
        return float(self.parameters() * self.bytes_per_param)

    def expert_bytes(self) -> float:
        """Bytes of one routed expert summed over all MoE layers (0 for dense models)."""
        if not self.is_moe:
            return 0.0
        return float((self.n_layers - self.n_dense_layers) * self._ffn_params(self.d_ff_expert)
                     * self.bytes_per_param)

    def streamed_weight_bytes_dense(self) -> float:
        """Weight bytes a forward pass reads regardless of routing: everything except the input
        embedding table (only the batch's rows are read) and the routed experts."""
        all_but_embed = self.weight_bytes() - self.vocab * self.d_model * self.bytes_per_param * (
            0 if self.tied_embeddings else 1)
        return all_but_embed - self.n_experts * self.expert_bytes()

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token over all layers (LLaMA2-70B: 327,680 B = 320 KiB)."""
        if self.attention == "mla":
            return float(self.n_layers * (self.kv_lora_rank + self.d_rope) * self.kv_bytes_per_elem)
        return float(2 * self.n_layers * self.n_kv_heads * self.d_head * self.kv_bytes_per_elem)

    # --- FLOPs ---------------------------------------------------------------------------------
    def linear_flops_per_token(self) -> float:
        """2 × active matmul weights of the layers, FLOP per token (LM head excluded)."""
        return 2.0 * self.layer_matmul_params(active=True)

    def lm_head_flops_per_token(self) -> float:
        """2·vocab·d FLOP per token."""
        return 2.0 * self.vocab * self.d_model

    def attention_flops_coefficient(self) -> float:
        """FLOP per (new token × attended key): ``2·L·H·(d_qk + d_v)`` (= 4·L·H·d_head for MHA/GQA)."""
        return 2.0 * self.n_layers * self.n_heads * (self.d_qk + self.d_value)

    def decode_attention_flops_coefficient(self) -> float:
        """FLOP per (decoding token × attended key) in a decode step: for MLA the absorbed form,
        ``2·L·H·(kv_lora_rank + d_rope + kv_lora_rank)`` (DeepSeek-V3: 2·61·128·(576 + 512) ≈
        17.0 MFLOP), since decode reads the compressed latent only; MHA/GQA as in prefill."""
        if self.attention == "mla":
            return 2.0 * self.n_layers * self.n_heads * (2 * self.kv_lora_rank + self.d_rope)
        return self.attention_flops_coefficient()

    def prefill_flops_breakdown(self, n_new, n_cached=0) -> dict[str, float]:
        """FLOPs of a prefill of ``n_new`` tokens after ``n_cached`` cached ones, by term.

        Returns ``{"linear", "attention", "lm_head", "total"}`` in FLOP.
        """
        n = _check_count("n_new", n_new, minimum=1)
        c = _check_count("n_cached", n_cached, minimum=0)
        lin = n * self.linear_flops_per_token()
        att = self.attention_flops_coefficient() * n * (c + n / 2.0)
        head = n * self.lm_head_flops_per_token()
        return {"linear": lin, "attention": att, "lm_head": head, "total": lin + att + head}

    def prefill_flops(self, n_new, n_cached=0) -> float:
        """Total prefill FLOPs (linear + causal attention + LM head)."""
        return self.prefill_flops_breakdown(n_new, n_cached)["total"]

    def decode_flops(self, batch_size, context_tokens) -> float:
        """FLOPs of one decode step: ``batch_size`` new tokens attending to ``context_tokens``
        keys in total (summed over the batch); attention per key by
        :meth:`decode_attention_flops_coefficient` (MLA: the absorbed form)."""
        b = _check_count("batch_size", batch_size, minimum=1)
        ctx = _check_count("context_tokens", context_tokens, minimum=0)
        return (b * (self.linear_flops_per_token() + self.lm_head_flops_per_token())
                + self.decode_attention_flops_coefficient() * ctx)

    def expected_experts_touched(self, n_tokens) -> float:
        """Expected distinct routed experts per MoE layer for ``n_tokens`` tokens under uniform
        routing: ``E·(1 − (1 − k/E)^n)`` (0 for dense models)."""
        if not self.is_moe:
            return 0.0
        n = _check_count("n_tokens", n_tokens, minimum=0)
        return self.n_experts * (1.0 - (1.0 - self.top_k / self.n_experts) ** n)

    def decode_bytes(self, batch_size, context_tokens) -> float:
        """HBM bytes of one decode step: streamed weights (MoE: touched experts) + KV read."""
        b = _check_count("batch_size", batch_size, minimum=1)
        ctx = _check_count("context_tokens", context_tokens, minimum=0)
        return (self.streamed_weight_bytes_dense() + self.expert_bytes() * self.expected_experts_touched(b)
                + self.kv_bytes_per_token() * ctx)


def fast25_eq1_prefill_flops(n_tokens, n_layers: int = 80, d: int = 8192, a: float = 4.0,
                             b: float = 22.0) -> float:
    """FAST'25 Eq. 1: prefill FLOPs ``l·(a·n²·d + b·n·d²)`` (defaults: LLaMA3-70B, a=4, b=22).

    The paper's shortcut (no causal ½, b folds linear layers with GQA and SwiGLU, no LM head);
    compare with :meth:`ModelConfig.prefill_flops`.
    """
    n = _check_count("n_tokens", n_tokens, minimum=1)
    n_layers = integer(n_layers, "n_layers", lo=1, hi=10_000, where="fast25_eq1_prefill_flops")
    d = integer(d, "d", lo=1, hi=10**6, where="fast25_eq1_prefill_flops")
    a = real(a, "a", lo=0, hi=1e6, where="fast25_eq1_prefill_flops")
    b = real(b, "b", lo=0, hi=1e6, where="fast25_eq1_prefill_flops")
    return n_layers * (a * n * n * d + b * n * d * d)


# --- catalog -------------------------------------------------------------------------------------
LLAMA2_70B = ModelConfig(
    "LLaMA2-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128, d_ff=28672,
    vocab=32000, attention="gqa",
    source="Hugging Face meta-llama/Llama-2-70b-hf config.json")
LLAMA2_7B = ModelConfig(
    "LLaMA2-7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, d_head=128, d_ff=11008,
    vocab=32000, attention="mha",
    source="Hugging Face meta-llama/Llama-2-7b-hf config.json")
LLAMA3_70B = ModelConfig(
    "LLaMA3-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128, d_ff=28672,
    vocab=128256, attention="gqa",
    source="Hugging Face meta-llama/Meta-Llama-3-70B config.json (FAST'25's dummy model)")
OPT_13B = ModelConfig(
    "OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, d_head=128, d_ff=20480,
    vocab=50272, ffn="gelu", attention="mha", tied_embeddings=True, bias=True,
    max_positions=2050,  # 2048 + OPT's offset of 2
    source="Hugging Face facebook/opt-13b config.json")
DEEPSEEK_V3 = ModelConfig(
    "DeepSeek-V3", n_layers=61, d_model=7168, n_heads=128, n_kv_heads=128, d_head=128, d_ff=18432,
    vocab=129280, attention="mla",
    kv_lora_rank=512, q_lora_rank=1536, d_rope=64, d_nope=128, d_v=128,
    n_experts=256, top_k=8, n_shared_experts=1, d_ff_expert=2048, n_dense_layers=3,
    source="Hugging Face deepseek-ai/DeepSeek-V3 config.json (MTP module not counted)")

#: DeepSeek-V3 as DeepSeek released it: FP8 weights, BF16 KV cache. The checkpoint's config.json sets
#: ``quantization_config = {"fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}``: the
#: layers' linear weights are 1-byte E4M3 with one FP32 scale per 128 × 128 block (+0.02%). The
#: embeddings, LM head, norms and router stay BF16 in the checkpoint (+0.3% of the weights); we count
#: every weight at 1 byte, which gives the "671 GB" of the release. The KV cache stays BF16: DeepSeek's
#: reference inference code (deepseek-ai/DeepSeek-V3@1c6947e6ab906b2e6052d90b2c1808c14ed126df:
#: inference/generate.py sets ``torch.set_default_dtype(torch.bfloat16)``; inference/model.py's MLA
#: allocates its ``kv_cache`` (512 latent) and ``pe_cache`` (64 RoPE key) buffers in that default dtype).
#: Only bytes change: FLOP counts are the BF16 model's, and the roofline still runs at BF16 peaks.
DEEPSEEK_V3_FP8 = dataclasses.replace(
    DEEPSEEK_V3, name="DeepSeek-V3-FP8", bytes_per_param=1, kv_bytes_per_elem=2,
    source="Hugging Face deepseek-ai/DeepSeek-V3 config.json (quantization_config: FP8 E4M3 weights, "
           "128×128 block scales); KV in BF16 as deepseek-ai/DeepSeek-V3@1c6947e6:inference/generate.py "
           "and inference/model.py store it (MTP module not counted)")

MODELS: dict[str, ModelConfig] = {m.name: m for m in (LLAMA2_70B, LLAMA2_7B, LLAMA3_70B, OPT_13B,
                                                      DEEPSEEK_V3, DEEPSEEK_V3_FP8)}


def _norm(s: str) -> str:
    return "".join(ch for ch in str(s).lower() if ch.isalnum())


_MODEL_KEYS = {_norm(k): m for k, m in MODELS.items()}
_MODEL_KEYS.update({"llama70b": LLAMA2_70B, "llama270b": LLAMA2_70B, "opt13b": OPT_13B,
                    "deepseekv3": DEEPSEEK_V3, "dsv3": DEEPSEEK_V3, "dsv3fp8": DEEPSEEK_V3_FP8})


def get_model(name: str | ModelConfig) -> ModelConfig:
    """Look a model up by name (case and punctuation insensitive: "llama2-70b", "LLaMA2_70B")."""
    if isinstance(name, ModelConfig):
        return name
    key = _norm(name)
    if key in _MODEL_KEYS:
        return _MODEL_KEYS[key]
    raise ValueError(f"model: unknown model {describe(name)}; allowed: {', '.join(MODELS)}")
