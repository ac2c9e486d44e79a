"""MX Mixture-of-Experts on torch_npu (ascend-npu-ops.md sections 2, 3, 7), prepared once at load time.

Tensor-parallel path (all experts local), as SGLang's NPUMXFP8MoEMethod runs it:
  1. npu_moe_init_routing_v2, MXFP8 activation quantization fused (quant_mode=3) when w13 is MXFP8;
     for MXFP4 w13 the routing keeps bf16 and npu_dynamic_mx_quant(dst_type=296) follows.
  2. npu_grouped_matmul_swiglu_quant_v2 with the CUMSUM group list: gate/up GEMM, SwiGLU, MX requant.
  3. npu_grouped_matmul with the COUNT group list (group_list_type=1): the down projection.
  4. npu_moe_finalize_routing (drop_pad_mode=2, SGLang's combine) or npu_moe_token_unpermute
     (vllm-ascend's, ``combine="unpermute"``): weighted sum of each token's top-k rows, the weights cast
     to the rows' dtype first.
  Invalid ids (< 0 or >= E) are routed to expert 0 with weight 0 (no host sync), so the combine op
  never sees an excluded row and they contribute exactly zero.
Expert-parallel variant (``expert_range=(start, end)``, the weights hold experts [start, end) of
``num_global_experts``): routing dispatches bf16 (quant_mode=-1) with expert_num = the global count and
active_expert_range=[start, end), activations are quantized inside (npu_dynamic_mx_quant), the same two
grouped matmuls run, and a gather-combine in torch drops the rows of excluded experts
(npu_moe_finalize_routing's EP mode 3 is not documented well enough to rely on).
The gate/up GEMM runs unfused (npu_grouped_matmul, count list, bf16 out -> SwiGLU in torch ->
npu_dynamic_mx_quant) when the fused op cannot take the layer:
  - a swiglu limit / alpha / beta (DeepSeek-V4, MiniMax-M3's SwiGLU-OAI): the fused op has no such argument;
  - 2I % 128 != 0 (the fused MX rule);
  - MXFP8 gate/up with MXFP4 down: the fused op sizes its output [m, n/2] for FP8 input whatever
    quant_dtype says (Ascend/op-plugin op_plugin/ops/opapi/GroupedMatmulSwigluQuantV2NpuOpapi.cpp
    @517f2e7d), so it cannot emit packed FP4 [m, n/4] there;
  - the fused op returned a wrongly sized output once in this process (torch_npu 26.0.0 latches its
    FP4-input choice on the first call: ``static const bool mxfp4_input``, same file @6ffd6e22).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from . import layout
from ._device import torch_npu
from ._dtypes import e8m0_arg, fp4_arg, fp4_bytes, fp8_e4m3, fused_e8m0_arg

logger = logging.getLogger("lowbit.ascend")

ELEMENTS = ("mxfp8", "mxfp4")
SCHEMES = {"w8a8_mxfp8": "mxfp8", "w4a4_mxfp4": "mxfp4"}
FP4_ACTIVATION_ROUND_MODE = "round"
FUSED_SWIGLU_N_MULTIPLE = 128  # npu_grouped_matmul_swiglu_quant_v2 MX mode: n % 128 == 0
COMBINES = ("finalize", "unpermute")

# Set once the fused gate/up op has returned an output of the wrong size in this process (torch_npu
# 26.0.0's latched FP4-input choice): from then on every MX layer runs the gate/up GEMM unfused.
_fused_output_unreliable: str | None = None


@dataclass
class MxExperts:
    """One projection's expert weights in the layout the grouped matmuls read.

    weight: the logical [E, K, N] (float8_e4m3fn) or [E, K/2, N] (packed FP4 uint8) transpose view of the
    stored [E, N, K] / [E, N, K/2]; scale: the logical uint8 [E, ceil(K/64), N, 2] view of the paired
    [E, N, ceil(K/64), 2]."""

    element: str
    weight: torch.Tensor
    scale: torch.Tensor
    k: int
    n: int

    @property
    def experts(self) -> int:
        return self.weight.shape[0]

    @property
    def fp4(self) -> bool:
        return self.element == "mxfp4"

    @classmethod
    def from_stored(cls, element: str, stored: torch.Tensor, paired: torch.Tensor) -> MxExperts:
        k = stored.shape[-1] * (2 if element == "mxfp4" else 1)
        return cls(element, layout.logical_weight(stored), layout.logical_scale(paired), k, stored.shape[-2])

    @classmethod
    def from_float(cls, weight: torch.Tensor, element: str) -> MxExperts:
        """Online: weight [E, N, K] float, quantized on the device along K (OCP rule)."""
        npu = torch_npu()
        if element == "mxfp4":
            stored, paired = npu.npu_dynamic_mx_quant(weight, dst_type=fp4_arg(), round_mode=FP4_ACTIVATION_ROUND_MODE)
        else:
            stored, paired = npu.npu_dynamic_mx_quant(weight, dst_type=torch.float8_e4m3fn)
        return cls.from_stored(element, stored, paired)

    @classmethod
    def from_checkpoint(cls, weight: torch.Tensor, weight_scale: torch.Tensor, element: str, arg: str) -> MxExperts:
        """Offline: weight [E, N, K] float8_e4m3fn / uint8 (MXFP8) or packed [E, N, K/2] (MXFP4), and
        weight_scale [E, N, K/32] E8M0, as the checkpoint stores them."""
        if weight.dim() != 3:
            raise ValueError(
                f"{arg}: must be 3-D [E, N, K{'/2' if element == 'mxfp4' else ''}], got shape {tuple(weight.shape)}"
            )
        k = weight.shape[-1] * (2 if element == "mxfp4" else 1)
        problem = layout.k_alignment_problem(k, fp4=element == "mxfp4")
        if problem:
            raise ValueError(f"{arg}: {problem}")
        expected = (*weight.shape[:2], k // 32)
        if tuple(weight_scale.shape) != expected:
            raise ValueError(f"{arg}_scale: must be [E, N, K/32] = {list(expected)}, got {tuple(weight_scale.shape)}")
        stored = fp4_bytes(weight, arg) if element == "mxfp4" else fp8_e4m3(weight, arg)
        return cls.from_stored(element, stored.contiguous(), layout.pair_scales(weight_scale))

    def local(self, start: int, end: int) -> MxExperts:
        """The experts [start, end) as views (no copy)."""
        return MxExperts(self.element, self.weight[start:end], self.scale[start:end], self.k, self.n)


@dataclass
class Bf16Experts:
    """The fallback: bf16 weights as the logical [E, K, N] transpose view of the stored [E, N, K]."""

    weight: torch.Tensor
    k: int
    n: int
    element: str = "bf16"

    @property
    def experts(self) -> int:
        return self.weight.shape[0]

    @classmethod
    def from_float(cls, weight: torch.Tensor) -> Bf16Experts:
        stored = weight.to(torch.bfloat16).contiguous()
        return cls(layout.logical_weight(stored), stored.shape[-1], stored.shape[-2])

    def local(self, start: int, end: int) -> Bf16Experts:
        return Bf16Experts(self.weight[start:end], self.k, self.n)


Experts = MxExperts | Bf16Experts


def swiglu(gate_up: torch.Tensor, limit: float | None, *, alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    """gate * sigmoid(alpha * gate) * (up + beta) of [M, 2I] (gate = first half), in float32; the defaults
    give silu(gate) * up. With ``limit``: gate clamped to <= limit and up to [-limit, limit] first
    (DeepSeek-V4: limit only; MiniMax-M3's SwiGLU-OAI: limit, alpha and beta = 1.0, as vllm-ascend
    vllm_ascend/models/minimax_m3/minimax_m3.py @182b75ea computes it)."""
    half = gate_up.shape[-1] // 2
    g = gate_up[..., :half].to(torch.float32)
    u = gate_up[..., half:].to(torch.float32)
    if limit is not None:
        g = g.clamp(max=limit)
        u = u.clamp(min=-limit, max=limit)
    if alpha == 1.0 and beta == 0.0:
        return torch.nn.functional.silu(g) * u
    return g * torch.sigmoid(alpha * g) * (u + beta)


class NpuMoE:
    """A prepared MoE layer: w13 [E, 2I, H] (gate rows, then up rows) and w2 [E, H, I] on the NPU.

    ``swiglu_limit`` / ``swiglu_alpha`` / ``swiglu_beta``: the activation ``swiglu`` computes (defaults:
    silu(gate) * up). ``combine``: the tensor-parallel combine op, "finalize" (npu_moe_finalize_routing,
    as SGLang) or "unpermute" (npu_moe_token_unpermute, as vllm-ascend on Ascend 950)."""

    def __init__(
        self,
        w13: Experts,
        w2: Experts,
        *,
        swiglu_limit: float | None = None,
        swiglu_alpha: float = 1.0,
        swiglu_beta: float = 0.0,
        combine: str = "finalize",
        fallback_reason: str | None = None,
    ) -> None:
        if w13.experts != w2.experts:
            raise ValueError(f"w2: has {w2.experts} experts, w13 has {w13.experts}")
        if w13.n != 2 * w2.k or w2.n != w13.k:
            raise ValueError(
                f"w13 / w2: shapes disagree: w13 gives [2I = {w13.n}, H = {w13.k}], w2 gives [H = {w2.n}, I = {w2.k}]"
            )
        if (w13.element == "bf16") != (w2.element == "bf16"):
            raise ValueError("w13 / w2: both projections are MX, or both bf16")
        if swiglu_limit is not None and not swiglu_limit > 0:
            raise ValueError(f"swiglu_limit: must be > 0, got {swiglu_limit}")
        for arg, v in (("swiglu_alpha", swiglu_alpha), ("swiglu_beta", swiglu_beta)):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
                raise ValueError(f"{arg}: must be a finite number, got {v!r}")
        if combine not in COMBINES:
            raise ValueError(f"combine: must be one of {COMBINES}, got {combine!r}")
        self.w13, self.w2 = w13, w2
        self.swiglu_limit = swiglu_limit
        self.swiglu_alpha, self.swiglu_beta = float(swiglu_alpha), float(swiglu_beta)
        self.combine = combine
        self.fallback_reason = fallback_reason
        self.hidden, self.intermediate = w13.k, w2.k
        self.unfused_reason = self._unfused_reason()

    def _unfused_reason(self) -> str | None:
        if self.w13.element == "bf16":
            return "bf16 fallback"
        if self.swiglu_limit is not None:
            return f"swiglu limit {self.swiglu_limit} (the fused op has no clamp argument)"
        if (self.swiglu_alpha, self.swiglu_beta) != (1.0, 0.0):
            return f"swiglu alpha {self.swiglu_alpha} / beta {self.swiglu_beta} (the fused op computes silu(gate) * up)"
        if self.w13.n % FUSED_SWIGLU_N_MULTIPLE:
            return f"2I = {self.w13.n} is not a multiple of {FUSED_SWIGLU_N_MULTIPLE} (fused MX SwiGLU rule)"
        if isinstance(self.w2, MxExperts) and self.w2.fp4 and not self.w13.fp4:
            return "MXFP8 gate/up with MXFP4 down (the fused op cannot emit FP4 from FP8 input)"
        return None

    @property
    def experts(self) -> int:
        return self.w13.experts

    # ---- construction ---------------------------------------------------------------------------

    @classmethod
    def from_float(
        cls,
        w13: torch.Tensor,
        w2: torch.Tensor,
        *,
        scheme: str = "w8a8_mxfp8",
        w2_scheme: str | None = None,
        swiglu_limit: float | None = None,
        swiglu_alpha: float = 1.0,
        swiglu_beta: float = 0.0,
        combine: str = "finalize",
        name: str | None = None,
    ) -> NpuMoE:
        """Online: float w13 [E, 2I, H] and w2 [E, H, I], quantized on the device. ``scheme`` is
        "w8a8_mxfp8" or "w4a4_mxfp4" (``w2_scheme`` defaults to it). When H or I breaks the K alignment
        rule the layer runs in bf16 and logs why. ``swiglu_*`` and ``combine``: see ``NpuMoE``."""
        options = dict(swiglu_limit=swiglu_limit, swiglu_alpha=swiglu_alpha, swiglu_beta=swiglu_beta, combine=combine)
        elements = []
        for arg, s in (("scheme", scheme), ("w2_scheme", w2_scheme or scheme)):
            if s not in SCHEMES:
                raise ValueError(f"{arg}: must be one of {tuple(SCHEMES)}, got {s!r}")
            elements.append(SCHEMES[s])
        for arg, w in (("w13", w13), ("w2", w2)):
            if w.dim() != 3 or w.dtype not in (torch.bfloat16, torch.float16, torch.float32):
                raise ValueError(f"{arg}: must be a float [E, N, K] tensor, got {w.dtype} {tuple(w.shape)}")
        problems = [
            p
            for p in (
                layout.k_alignment_problem(w13.shape[-1], fp4=elements[0] == "mxfp4"),
                layout.k_alignment_problem(w2.shape[-1], fp4=elements[1] == "mxfp4"),
            )
            if p
        ]
        if problems:
            reason = "; ".join(problems)
            logger.warning("MoE layer %s runs in bf16 instead of %s: %s", name or "<unnamed>", scheme, reason)
            return cls(
                Bf16Experts.from_float(w13),
                Bf16Experts.from_float(w2),
                fallback_reason=reason,
                **options,  # type: ignore[arg-type]
            )
        return cls(MxExperts.from_float(w13, elements[0]), MxExperts.from_float(w2, elements[1]), **options)  # type: ignore[arg-type]

    @classmethod
    def from_checkpoint(
        cls,
        w13: torch.Tensor,
        w13_scale: torch.Tensor,
        w2: torch.Tensor,
        w2_scale: torch.Tensor,
        *,
        w13_format: str,
        w2_format: str | None = None,
        swiglu_limit: float | None = None,
        swiglu_alpha: float = 1.0,
        swiglu_beta: float = 0.0,
        combine: str = "finalize",
    ) -> NpuMoE:
        """Offline: pre-quantized experts as the checkpoint stores them: w13 [E, 2I, H] (MXFP8
        float8_e4m3fn / uint8) or [E, 2I, H/2] (packed MXFP4), w13_scale [E, 2I, H/32]; w2 likewise
        with [E, H, I]. Formats are "mxfp8" or "mxfp4"."""
        formats = []
        for arg, f in (("w13_format", w13_format), ("w2_format", w2_format or w13_format)):
            if f not in ELEMENTS:
                raise ValueError(f"{arg}: must be one of {ELEMENTS}, got {f!r}")
            formats.append(f)
        return cls(
            MxExperts.from_checkpoint(w13, w13_scale, formats[0], "w13"),
            MxExperts.from_checkpoint(w2, w2_scale, formats[1], "w2"),
            swiglu_limit=swiglu_limit,
            swiglu_alpha=swiglu_alpha,
            swiglu_beta=swiglu_beta,
            combine=combine,
        )

    # ---- forward --------------------------------------------------------------------------------

    def __call__(
        self,
        x: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        *,
        expert_range: Sequence[int] | None = None,
        num_global_experts: int | None = None,
    ) -> torch.Tensor:
        """x [T, H] bf16 / fp16 / fp32, topk_weights [T, k] float, topk_ids [T, k] int32 / int64 -> [T, H]
        in x's dtype. ``expert_range=(start, end)`` selects the expert-parallel variant: this layer holds
        global experts [start, end) (end - start == E) of ``num_global_experts`` (required then: the routing
        op takes it as expert_num and every id must be below it, as vllm-ascend's dispatcher passes the
        global count); every other id, and every id < 0 or >= num_global_experts, contributes zero."""
        self._check_inputs(x, topk_weights, topk_ids)
        xr = x if x.dtype in (torch.bfloat16, torch.float16) else x.to(torch.bfloat16)
        if expert_range is None:
            if num_global_experts is not None:
                raise ValueError("num_global_experts: only meaningful with expert_range")
            out = self._forward_tp(xr, topk_weights, topk_ids)
        else:
            start, end = (int(v) for v in expert_range)
            if not 0 <= start < end or end - start != self.experts:
                raise ValueError(
                    f"expert_range: must be (start, end) with end - start = E = {self.experts}, "
                    f"got {tuple(expert_range)}"
                )
            if num_global_experts is None or isinstance(num_global_experts, bool):
                raise ValueError(
                    "num_global_experts: required with expert_range (the routing op's expert_num must be the "
                    "global expert count, above every id)"
                )
            if int(num_global_experts) < end:
                raise ValueError(f"num_global_experts: must be >= end = {end}, got {num_global_experts}")
            out = self._forward_ep(xr, topk_weights, topk_ids, start, end, int(num_global_experts))
        return out.to(x.dtype)

    def _check_inputs(self, x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> None:
        if x.dim() != 2 or x.shape[1] != self.hidden or x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"x: must be float [T, H = {self.hidden}], got {x.dtype} {tuple(x.shape)}")
        if topk_ids.dim() != 2 or topk_ids.shape[0] != x.shape[0] or topk_ids.dtype not in (torch.int32, torch.int64):
            raise ValueError(
                f"topk_ids: must be int32/int64 [T = {x.shape[0]}, k], got {topk_ids.dtype} {tuple(topk_ids.shape)}"
            )
        if tuple(topk_weights.shape) != tuple(topk_ids.shape) or not topk_weights.is_floating_point():
            raise ValueError(
                f"topk_weights: must be float {tuple(topk_ids.shape)} like topk_ids, "
                f"got {topk_weights.dtype} {tuple(topk_weights.shape)}"
            )

    def _forward_tp(self, x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        npu = torch_npu()
        tokens, top_k = topk_ids.shape
        experts = self.experts
        # Invalid ids go to expert 0 with weight 0: every routed row is real, and contributes nothing.
        valid = (topk_ids >= 0) & (topk_ids < experts)
        ids = torch.where(valid, topk_ids, 0).to(torch.int32)
        weights = torch.where(valid, topk_weights, torch.zeros_like(topk_weights))
        fuse_fp8_quant = isinstance(self.w13, MxExperts) and not self.w13.fp4
        routed_x, row_idx, counts, routed_scale = npu.npu_moe_init_routing_v2(
            x,
            ids,
            active_num=tokens * top_k,
            expert_num=experts,
            expert_tokens_num_type=1,
            expert_tokens_num_flag=True,
            active_expert_range=[0, experts],
            quant_mode=3 if fuse_fp8_quant else -1,
        )
        if fuse_fp8_quant:
            # [M, CeilAlign(ceil(H/32), 2)] e8m0 -> the paired [M, ceil(H/64), 2] the GEMMs read.
            activation = (routed_x, routed_scale.reshape(routed_scale.shape[0], -1, 2))
        else:
            activation = self._quantize_for(self.w13, routed_x)
        y = self._experts(activation, counts)
        # Both combine ops take the weights in the rows' dtype (torch_npu npu_moe_finalize_routing doc,
        # Ascend/op-plugin docs/en/custom_APIs/torch_npu/torch_npu-npu_moe_finalize_routing.md @6ffd6e22:
        # "scales ... must be identical to that of expanded_permuted_rows"; vllm-ascend and SGLang cast).
        probs = weights.to(y.dtype)
        if self.combine == "unpermute":
            return npu.npu_moe_token_unpermute(y, row_idx, probs)
        return npu.npu_moe_finalize_routing(
            y,
            None,
            None,
            None,
            scales=probs,
            expanded_src_to_dst_row=row_idx,
            export_for_source_row=ids,
            drop_pad_mode=2,
        )

    def _forward_ep(
        self, x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, start: int, end: int, expert_num: int
    ) -> torch.Tensor:
        npu = torch_npu()
        tokens, top_k = topk_ids.shape
        # Ids outside [0, expert_num) are not allowed by the routing op: send them to a local expert with
        # weight 0 (elementwise, no host sync), so they contribute exactly zero.
        valid = (topk_ids >= 0) & (topk_ids < expert_num)
        ids = torch.where(valid, topk_ids, start).to(torch.int32)
        topk_weights = torch.where(valid, topk_weights, torch.zeros_like(topk_weights))
        routed_x, row_idx, counts, _ = npu.npu_moe_init_routing_v2(
            x,
            ids,
            active_num=tokens * top_k,
            expert_num=expert_num,
            expert_tokens_num_type=1,
            expert_tokens_num_flag=True,
            active_expert_range=[start, end],
            quant_mode=-1,
        )
        y = self._experts(self._quantize_for(self.w13, routed_x), counts)
        # Gather-combine: row_idx[t * k + j] is the routed row of (t, j), or -1 for an excluded expert.
        idx = row_idx.to(torch.int64).view(tokens, top_k)
        kept = idx >= 0
        rows = y.index_select(0, torch.where(kept, idx, 0).reshape(-1)).view(tokens, top_k, -1).to(torch.float32)
        rows = torch.where(kept.unsqueeze(-1), rows, 0.0)  # where, not multiply: unused rows hold garbage
        weights = torch.where(kept, topk_weights.to(torch.float32), 0.0)
        return (rows * weights.unsqueeze(-1)).sum(dim=1).to(x.dtype)

    # ---- the two projections --------------------------------------------------------------------

    @staticmethod
    def _quantize_for(experts: Experts, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Activation rows in the element type a projection's GEMM takes: (elements, paired scales)."""
        if isinstance(experts, Bf16Experts):
            return rows.to(torch.bfloat16), None
        npu = torch_npu()
        if experts.fp4:
            return npu.npu_dynamic_mx_quant(rows, dst_type=fp4_arg(), round_mode=FP4_ACTIVATION_ROUND_MODE)
        return npu.npu_dynamic_mx_quant(rows, dst_type=torch.float8_e4m3fn)

    @staticmethod
    def _mx_dtype_kwargs(experts: MxExperts, x_kwarg: str, w_kwarg: str) -> dict[str, int]:
        return {x_kwarg: fp4_arg(), w_kwarg: fp4_arg()} if experts.fp4 else {}

    def _grouped_matmul(
        self, experts: Experts, x: torch.Tensor, x_scale: torch.Tensor | None, counts: torch.Tensor
    ) -> torch.Tensor:
        """One projection over the routed rows with the COUNT group list -> bf16 [M, N]."""
        npu = torch_npu()
        common = dict(split_item=2, group_type=0, group_list_type=1, group_list=counts, output_dtype=torch.bfloat16)
        if isinstance(experts, Bf16Experts):
            return npu.npu_grouped_matmul([x], [experts.weight], **common)[0]
        return npu.npu_grouped_matmul(
            [x],
            [experts.weight],
            scale=[experts.scale],
            per_token_scale=[x_scale],
            scale_dtype=e8m0_arg(),
            per_token_scale_dtype=e8m0_arg(),
            **self._mx_dtype_kwargs(experts, "x_dtype", "weight_dtype"),
            **common,
        )[0]

    def _experts(self, activation: tuple[torch.Tensor, torch.Tensor | None], counts: torch.Tensor) -> torch.Tensor:
        """gate/up GEMM + SwiGLU (fused with the MX requant when allowed), then the down GEMM -> [M, H] bf16."""
        x, x_scale = activation
        if self.unfused_reason is None and _fused_output_unreliable is None:
            h, h_scale = self._fused_gate_up(x, x_scale, counts)
            if h is None:
                return self._experts(activation, counts)  # the fused op is unreliable here: unfused
        else:
            gate_up = self._grouped_matmul(self.w13, x, x_scale, counts)
            activated = swiglu(gate_up, self.swiglu_limit, alpha=self.swiglu_alpha, beta=self.swiglu_beta)
            h, h_scale = self._quantize_for(self.w2, activated.to(torch.bfloat16))
        return self._grouped_matmul(self.w2, h, h_scale, counts)

    def _fused_gate_up(
        self, x: torch.Tensor, x_scale: torch.Tensor | None, counts: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """npu_grouped_matmul_swiglu_quant_v2 -> (h, h_scale), or (None, None) when its output has the wrong
        size: torch_npu 26.0.0 latches whether the input is FP4 on the first call in the process, and a
        later call of the other family gets an output sized for the first. Only shapes are compared (no
        sync); the layer then runs unfused, and so does every later one (logged once)."""
        global _fused_output_unreliable
        assert isinstance(self.w13, MxExperts) and isinstance(self.w2, MxExperts)
        out_dtype = fp4_arg() if self.w2.fp4 else torch.float8_e4m3fn
        h, h_scale = torch_npu().npu_grouped_matmul_swiglu_quant_v2(
            x,
            [self.w13.weight],
            [self.w13.scale],
            x_scale,
            counts.cumsum(0),
            dequant_mode=2,
            quant_mode=2,
            dequant_dtype=torch.float32,
            quant_dtype=out_dtype,
            group_list_type=0,
            weight_scale_dtype=fused_e8m0_arg(),
            x_scale_dtype=fused_e8m0_arg(),
            **self._mx_dtype_kwargs(self.w13, "x_dtype", "weight_dtype"),
        )
        half = self.w13.n // 2
        expected = (x.shape[0], half // 2 if self.w2.fp4 else half)
        if tuple(h.shape) != expected:
            _fused_output_unreliable = (
                f"npu_grouped_matmul_swiglu_quant_v2 returned {tuple(h.shape)} where {expected} was due "
                "(torch_npu 26.0.0 latches its FP4-input choice on the first call; 26.1.0 does not)"
            )
            logger.warning("MX MoE gate/up runs unfused from now on: %s", _fused_output_unreliable)
            return None, None
        return h, h_scale
