"""The Python surface of lowbit: thin, typed wrappers over the torch ops in torch.ops.lowbit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import _C, _fake, _fake_moe, ascend  # noqa: F401  (_C and the fakes register torch.ops.lowbit)
from ._types import SPLIT_MX_TYPES, QTypeLike, as_quant_type

_SCALE_RULES = {"ocp": 0, "round_up": 1}


def dequantize(
    w: torch.Tensor,
    qtype: QTypeLike,
    k: int | None = None,
    *,
    scales: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Decode a quantized weight to floats.

    Args:
        w: uint8 [N, row_bytes] (or [E, N, row_bytes]) holding the GGUF blocks unchanged, or the
            elements tensor of a split MX type ([N, K] E4M3 bytes / [N, K/2] packed E2M1).
        qtype: the weight's type (QuantType, lower-case name or ggml id).
        k: K, checked against row_bytes when given.
        scales: uint8 E8M0 [N, K/32] (or [E, N, K/32]) for split MX types; None otherwise.
        dtype: torch.float32, torch.bfloat16 or torch.float16.

    Returns:
        [N, K] (or [E, N, K]) in `dtype`; float32 is bit-exact with ggml's reference.
    """
    q = as_quant_type(qtype)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise ValueError(f"k must be a positive int (K of w's rows) or None, got {k!r}")
    return torch.ops.lowbit.dequantize(w, int(q), -1 if k is None else k, scales=scales, dtype=dtype)


def linear(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: QTypeLike,
    *,
    scales: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    route: str = "auto",
    kernel: str | None = None,
) -> torch.Tensor:
    """y = x @ W^T (+ bias) computed from the quantized weight.

    Args:
        x: [..., K] float32, bfloat16 or float16.
        w: quantized weight [N, row_bytes] (see `dequantize`).
        scales: split MX scales [N, K/32].
        bias: optional [N].
        route: "auto" (the dispatcher's choice) or a kernel to force: "mmvq", "dequant_matmul"
            (CUDA) or "cpu_reference" (CPU).
        kernel: the former name of `route`, still accepted.

    Returns:
        [..., N] in x's dtype.
    """
    q = as_quant_type(qtype)
    if kernel is not None:
        if route != "auto" and route != kernel:
            raise ValueError(f"kernel: {kernel!r} contradicts route={route!r}; pass only route")
        route = kernel
    if ascend.is_npu_tensor(x):
        if route != "auto":
            raise ValueError(f"route: {route!r} cannot be forced on an Ascend NPU tensor; use 'auto'")
        return ascend.linear(x, w, q, scales=scales, bias=bias)
    return torch.ops.lowbit.linear(x, w, int(q), scales=scales, bias=bias, route=route)


def quantize(
    w_float: torch.Tensor, qtype: QTypeLike, *, scale_rule: str = "ocp"
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Quantize floats [..., K] to mxfp8_e4m3, mxfp4_split, mxfp4 (GGUF), q8_0 or q8_1.

    Args:
        w_float: floating tensor [..., K]; K a multiple of the type's block.
        qtype: target type.
        scale_rule: MX types only: "ocp" (floor(log2(amax)) - emax, OCP MX v1.0) or "round_up"
            (ceil(log2(amax / max_element)), never saturates).

    Returns:
        (data uint8 [..., row_bytes], scales uint8 [..., K/32]) for split MX types, and
        (blocks uint8 [..., row_bytes], None) for GGUF types. A split MX block holding NaN or Inf
        gets scale 0xFF (NaN) and zero elements; GGUF types raise on non-finite input.
    """
    q = as_quant_type(qtype)
    if scale_rule not in _SCALE_RULES:
        raise ValueError(f"scale_rule must be one of {sorted(_SCALE_RULES)}, got {scale_rule!r}")
    data, scales = torch.ops.lowbit.quantize(w_float, int(q), scale_rule=_SCALE_RULES[scale_rule])
    return data, (scales if q in SPLIT_MX_TYPES else None)


def fused_moe(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    w13_type: QTypeLike,
    w2_type: QTypeLike,
    activation: str = "silu",
    w13_scales: torch.Tensor | None = None,
    w2_scales: torch.Tensor | None = None,
    expert_range: Sequence[int] | None = None,
    num_global_experts: int | None = None,
) -> torch.Tensor:
    """A Mixture-of-Experts layer on quantized expert weights.

    out[t] = sum_j topk_weights[t, j] * W2[e] (act(g) * u), with [g, u] = W13[e] x[t] split in
    halves (the first half is activated) and e = topk_ids[t, j].

    Args:
        x: [T, H] float32, bfloat16 or float16.
        w13: [E, 2I, row_bytes(H)] gate rows then up rows, type `w13_type`.
        w2: [E, H, row_bytes(I)], type `w2_type` (may differ from w13_type).
        topk_weights: [T, top_k] floating.
        topk_ids: [T, top_k] int32 or int64 global expert ids. Ids that are negative, past the last
            expert or outside `expert_range` contribute exactly zero.
        activation: "silu", "gelu" or "gelu_tanh".
        w13_scales, w2_scales: E8M0 scales for split MX types.
        expert_range: (start, end): this rank holds global experts [start, end) (expert
            parallelism); end - start must equal E. Default (0, E).
        num_global_experts: the model's expert count (>= end). Required with expert_range on NPU
            tensors (Ascend's routing op needs it); checked and otherwise unused elsewhere.

    Returns:
        [T, H] in x's dtype.
    """
    a = as_quant_type(w13_type, "w13_type")
    b = as_quant_type(w2_type, "w2_type")
    if ascend.is_npu_tensor(x):
        return ascend.fused_moe(
            x,
            w13,
            w2,
            topk_weights,
            topk_ids,
            w13_type=a,
            w2_type=b,
            activation=activation,
            w13_scales=w13_scales,
            w2_scales=w2_scales,
            expert_range=expert_range,
            num_global_experts=num_global_experts,
        )
    rng = None if expert_range is None else [int(v) for v in expert_range]
    if num_global_experts is not None and (rng is None or int(num_global_experts) < rng[1]):
        raise ValueError(
            f"num_global_experts: needs expert_range and must be >= its end, got {num_global_experts} "
            f"with expert_range {expert_range}"
        )
    return torch.ops.lowbit.fused_moe(
        x,
        w13,
        w2,
        topk_weights,
        topk_ids,
        w13_type=int(a),
        w2_type=int(b),
        activation=activation,
        w13_scales=w13_scales,
        w2_scales=w2_scales,
        expert_range=rng,
    )


def capabilities() -> dict[str, Any]:
    """What this build and machine run: build facts, CUDA devices, and per type its kernels.

    Per type, "kernels" lists what is compiled into this build and "usable" what can run here:
    CUDA kernels only where a CUDA device they were built for is visible and the torch ops have
    CUDA implementations (a build against a CPU-only torch has none). build["cuda_usable"] says
    the same for the build as a whole.
    """
    caps: dict[str, Any] = _C.capabilities()
    caps["build"]["torch_version"] = torch.__version__
    caps["build"]["torch_cuda"] = torch.version.cuda
    torch_ops_cuda = torch._C._dispatch_has_kernel_for_dispatch_key("lowbit::linear", "CUDA")
    caps["build"]["torch_ops_cuda"] = torch_ops_cuda
    if not (torch_ops_cuda and torch.cuda.is_available()):
        caps["build"]["cuda_usable"] = False
        for entry in caps["types"].values():
            for kernel in entry["usable"]:
                if kernel.startswith("cuda_"):
                    entry["usable"][kernel] = False
    caps["npu"] = ascend.probe()
    return caps


def select_kernel(
    qtype: QTypeLike,
    m: int,
    n: int,
    k: int,
    device: torch.device | str | None = None,
    *,
    kernel: str = "auto",
    math: str = "auto",
) -> dict[str, Any]:
    """The plan lowbit.linear runs for x [m, k] and a weight [n, k] on `device`: the same plan.

    Returns {"kernel": "mmvq" | "dequant_matmul" | "cpu_reference", "reason": "...",
    "workspace_bytes": int, "describe": "..."}; for "mmvq" also "passes" and "mmvq" (the pass of up
    to 16 tokens: {"kernel": "dp4a" | "int8_tensor_cores" | "bf16_tensor_cores", "math", "tokens",
    "kernel_tokens", "blocks", "threads", "shared_bytes", "int8_prologue", "workspace_bytes"}),
    "mmvq_last" (the last pass) and "mmvq_kernel" (the first pass's kernel). `kernel` forces a
    kernel and `math` MMVQ's arithmetic, as the ops take them.
    """
    q = as_quant_type(qtype)
    for name, value in (("m", m), ("n", n), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {value!r}")
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    index = -1 if dev.type != "cuda" else (dev.index if dev.index is not None else torch.cuda.current_device())
    plan: dict[str, Any] = _C.plan_linear(int(q), int(m), int(n), int(k), index, kernel, math)
    if "mmvq" in plan:
        plan["mmvq_kernel"] = plan["mmvq"]["kernel"]
    return plan
