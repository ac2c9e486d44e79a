"""Dense MX linear layers on torch_npu (ascend-npu-ops.md section 4), prepared once at load time.

Schemes (activation x weight):
  - "w8a8_mxfp8": MXFP8 x MXFP8 through npu_dynamic_mx_quant + npu_quant_matmul (group_sizes [1, 1, 32]).
  - "w4a4_mxfp4": single-level MXFP4 x MXFP4, FP4 activations quantized with round_mode="round".
  - "w4a4_mxfp4_dual": dual-level MXFP4 (online only, SGLang's dense ``--quantization mxfp4``) through
    npu_dynamic_dual_level_mx_quant + npu_dual_level_quant_matmul, weight in FRACTAL_NZ.
  - "w4a8_mxfp4": MXFP8 activations x MXFP4 weight in FRACTAL_NZ (cast, then transposed), group_sizes [0, 0, 32].
Weights come online (a float weight quantized on the device at load) or offline (a pre-quantized
weight + weight_scale [N, K/32], as ModelSlim-style checkpoints store them). A layer whose K breaks the
alignment rule (``layout.k_alignment_problem``, e.g. K = 4304) runs in bf16 and logs why.
"""

from __future__ import annotations

import logging

import torch

from . import layout
from ._device import torch_npu
from ._dtypes import FORMAT_FRACTAL_NZ, e8m0_arg, e8m0_bytes, fp4_arg, fp4_bytes, fp8_e4m3

logger = logging.getLogger("lowbit.ascend")

SCHEMES = ("w8a8_mxfp8", "w4a4_mxfp4", "w4a4_mxfp4_dual", "w4a8_mxfp4")
FP4_ACTIVATION_ROUND_MODE = "round"  # what SGLang and vllm-ascend pass when quantizing FP4 activations
_FLOATS = (torch.bfloat16, torch.float16, torch.float32)


def _check_float(t: torch.Tensor, arg: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{arg}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _FLOATS:
        raise ValueError(f"{arg}: must be bfloat16, float16 or float32, got {t.dtype}")


# W4A8 (FP8 x FP4) needs K and N multiples of 8 (hicann/ops-nn
# matmul/quant_batch_matmul_v3/docs/aclnnQuantMatmulWeightNz.md @e5c3fa93, MX A8W4 constraints).
W4A8_ALIGNMENT = 8


def _bias_fp32(bias: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """The layer keeps its bias as float32 [N]; each scheme converts it to what its op takes."""
    if bias is None:
        return None
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
        raise ValueError(f"bias: must be a floating tensor [N] = [{n}], got {bias!r:.80}")
    if tuple(bias.shape) != (n,):
        raise ValueError(f"bias: must be [N] = [{n}], got {tuple(bias.shape)}")
    return bias.to(torch.float32).contiguous()


def w4a8_n_problem(n: int) -> str | None:
    """Why N cannot run W4A8 MXFP4 (N % 8 != 0), or None."""
    if n % W4A8_ALIGNMENT:
        return f"N = {n} is not a multiple of {W4A8_ALIGNMENT} (W4A8 MXFP4 matmul rule)"
    return None


def _check_split_weight(weight: torch.Tensor, weight_scale: torch.Tensor, fp4: bool) -> tuple[int, int]:
    """(N, K) of a split MX checkpoint weight [N, K] / [N, K/2] with weight_scale [N, K/32]."""
    if weight.dim() != 2:
        raise ValueError(f"weight: must be 2-D [N, {'K/2' if fp4 else 'K'}], got shape {tuple(weight.shape)}")
    n = weight.shape[0]
    k = weight.shape[1] * (2 if fp4 else 1)
    problem = layout.k_alignment_problem(k, fp4=fp4)
    if problem:
        raise ValueError(f"weight: {problem}; a split MX checkpoint cannot hold this layer")
    if tuple(weight_scale.shape) != (n, k // 32):
        raise ValueError(
            f"weight_scale: must be [N, K/32] = [{n}, {k // 32}] for weight {tuple(weight.shape)}, "
            f"got {tuple(weight_scale.shape)}"
        )
    return n, k


class NpuLinear:
    """A prepared linear layer y = x W^T + b on the NPU. Subclasses hold the weight in the layout their
    torch_npu op reads and implement ``_matmul``."""

    scheme: str = ""

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None) -> None:
        self.in_features = in_features
        self.out_features = out_features
        self.bias = _bias_fp32(bias, out_features)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x [..., K] bfloat16 / float16 / float32 -> [..., N] in x's dtype. ``bias`` [N] overrides the
        prepared one. float32 inputs run with a bfloat16 output (the MX matmuls emit bf16 / fp16)."""
        _check_float(x, "x")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x: last dim must be K = {self.in_features}, got shape {tuple(x.shape)}")
        bias32 = self.bias if bias is None else _bias_fp32(bias, self.out_features)
        x2d = x.reshape(-1, self.in_features)
        out_dtype = x.dtype if x.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        y = self._matmul(x2d, out_dtype, None if bias32 is None else self._op_bias(bias32, out_dtype))
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def _op_bias(self, bias32: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        """The bias as this scheme's op takes it: float32 [N] for the full MX matmuls (aclnnQuantMatmulV5
        MX full quantization: null / FLOAT32, (n,))."""
        return bias32

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_features={self.in_features}, out_features={self.out_features})"


class Bf16Linear(NpuLinear):
    """The fallback: a plain bf16 matmul, for layers the MX path cannot take. ``reason`` says why."""

    scheme = "bf16"

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, reason: str) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias)
        self.weight = weight.to(torch.bfloat16).contiguous()
        self.reason = reason

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        y = torch.nn.functional.linear(x2d.to(torch.bfloat16), self.weight)
        return (y.to(torch.float32) + bias).to(out_dtype) if bias is not None else y.to(out_dtype)


def _mx_quant_matmul(
    layer: NpuLinear,
    x2d: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None,
    *,
    fp4_activations: bool,
    fp4_weight: bool,
    group_sizes: list[int],
) -> torch.Tensor:
    """The single-level MX matmul: npu_dynamic_mx_quant of the activations (MXFP8, or MXFP4 with the
    activation rounding), then npu_quant_matmul against the layer's prepared weight and scale."""
    npu = torch_npu()
    if fp4_activations:
        xq, xs = npu.npu_dynamic_mx_quant(x2d, dst_type=fp4_arg(), round_mode=FP4_ACTIVATION_ROUND_MODE)
    else:
        xq, xs = npu.npu_dynamic_mx_quant(x2d, dst_type=torch.float8_e4m3fn)
    operand_dtypes = {}
    if fp4_activations:
        operand_dtypes["x1_dtype"] = fp4_arg()
    if fp4_weight:
        operand_dtypes["x2_dtype"] = fp4_arg()
    return npu.npu_quant_matmul(
        xq,
        layer.weight,
        layer.scale,
        scale_dtype=e8m0_arg(),
        pertoken_scale=xs,
        pertoken_scale_dtype=e8m0_arg(),
        bias=bias,
        output_dtype=out_dtype,
        **operand_dtypes,
        group_sizes=group_sizes,
    )


class W8A8Mxfp8Linear(NpuLinear):
    """MXFP8 activations x MXFP8 weight. weight: the logical float8_e4m3fn [K, N] transpose view of the
    stored [N, K]; scale: the logical uint8 [ceil(K/64), N, 2] view of the paired [N, ceil(K/64), 2]."""

    scheme = "w8a8_mxfp8"

    def __init__(self, stored: torch.Tensor, paired_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__(stored.shape[1], stored.shape[0], bias)
        self.weight = layout.logical_weight(stored)
        self.scale = layout.logical_scale(paired_scale)

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> W8A8Mxfp8Linear:
        """Online: weight [N, K] float, quantized on the device by npu_dynamic_mx_quant (OCP rule)."""
        stored, paired = torch_npu().npu_dynamic_mx_quant(weight, dst_type=torch.float8_e4m3fn)
        return cls(stored, paired, bias)

    @classmethod
    def from_checkpoint(
        cls, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None = None
    ) -> W8A8Mxfp8Linear:
        """Offline: weight [N, K] float8_e4m3fn (or its uint8 bytes), weight_scale [N, K/32] E8M0."""
        _check_split_weight(weight, weight_scale, fp4=False)
        return cls(fp8_e4m3(weight, "weight").contiguous(), layout.pair_scales(weight_scale), bias)

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        return _mx_quant_matmul(
            self, x2d, out_dtype, bias, fp4_activations=False, fp4_weight=False, group_sizes=[1, 1, 32]
        )


class W4A4Mxfp4Linear(NpuLinear):
    """Single-level MXFP4 activations x MXFP4 weight. weight: the logical uint8 [K/2, N] transpose view
    of the stored packed [N, K/2]; scale as in W8A8Mxfp8Linear."""

    scheme = "w4a4_mxfp4"

    def __init__(self, stored: torch.Tensor, paired_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__(2 * stored.shape[1], stored.shape[0], bias)
        self.weight = layout.logical_weight(stored)
        self.scale = layout.logical_scale(paired_scale)

    @classmethod
    def _quantize_weight(cls, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch_npu().npu_dynamic_mx_quant(weight, dst_type=fp4_arg(), round_mode=FP4_ACTIVATION_ROUND_MODE)

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> NpuLinear:
        """Online: weight [N, K] float, quantized on the device to packed FP4."""
        stored, paired = cls._quantize_weight(weight)
        return cls(stored, paired, bias)

    @classmethod
    def from_checkpoint(
        cls, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None = None
    ) -> NpuLinear:
        """Offline: weight packed E2M1 [N, K/2] (uint8 / int8 / float4_e2m1fn_x2, even element in the low
        nibble), weight_scale [N, K/32] E8M0."""
        _check_split_weight(weight, weight_scale, fp4=True)
        return cls(fp4_bytes(weight, "weight").contiguous(), layout.pair_scales(weight_scale), bias)

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        return _mx_quant_matmul(
            self, x2d, out_dtype, bias, fp4_activations=True, fp4_weight=True, group_sizes=[1, 1, 32]
        )


class W4A8Mxfp4Linear(W4A4Mxfp4Linear):
    """MXFP8 activations x MXFP4 weight. weight: npu_format_cast(stored [N, K/2], FRACTAL_NZ,
    customize_dtype=float8_e4m3fn, input_dtype=296), then the [K/2, N] transpose; scale as in W8A8."""

    scheme = "w4a8_mxfp4"

    def __init__(self, stored: torch.Tensor, paired_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        problem = w4a8_n_problem(stored.shape[0])
        if problem:
            raise ValueError(f"weight: {problem}; use scheme 'w4a4_mxfp4'")
        NpuLinear.__init__(self, 2 * stored.shape[1], stored.shape[0], bias)
        self._bias_by_dtype: dict[torch.dtype, torch.Tensor] = {}
        self.weight = layout.nz_cast_then_transpose(stored, customize_dtype=torch.float8_e4m3fn, input_dtype=fp4_arg())
        self.scale = layout.logical_scale(paired_scale)

    def _op_bias(self, bias32: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        """The A8W4 MX contract: the bias in the output dtype (bf16 / fp16), shape [1, N] (hicann/ops-nn
        matmul/quant_batch_matmul_v3/docs/aclnnQuantMatmulWeightNz.md @e5c3fa93). The prepared bias is
        converted once per output dtype; a per-call bias each call."""
        if bias32 is not self.bias:
            return bias32.to(out_dtype).reshape(1, -1)
        if out_dtype not in self._bias_by_dtype:
            self._bias_by_dtype[out_dtype] = bias32.to(out_dtype).reshape(1, -1).contiguous()
        return self._bias_by_dtype[out_dtype]

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        return _mx_quant_matmul(
            self, x2d, out_dtype, bias, fp4_activations=False, fp4_weight=True, group_sizes=[0, 0, 32]
        )


class W4A4Mxfp4DualLevelLinear(NpuLinear):
    """Dual-level MXFP4 (online only). weight: packed [N, K/2] cast to FRACTAL_NZ through an int8 view
    (not transposed: the op treats it as transposed); level0 [ceil(K/512), N] float32 (transposed,
    contiguous); level1 [N, ceil(K/64), 2] E8M0."""

    scheme = "w4a4_mxfp4_dual"

    def __init__(
        self, stored: torch.Tensor, level0: torch.Tensor, level1: torch.Tensor, bias: torch.Tensor | None
    ) -> None:
        super().__init__(2 * stored.shape[1], stored.shape[0], bias)
        npu = torch_npu()
        self.weight = npu.npu_format_cast(
            stored.contiguous().view(torch.int8), FORMAT_FRACTAL_NZ, customize_dtype=torch.int8
        )
        self.level0 = level0.transpose(0, 1).contiguous()
        self.level1 = e8m0_bytes(level1, "level1").contiguous()

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> W4A4Mxfp4DualLevelLinear:
        """Online: weight [N, K] float, quantized on the device by npu_dynamic_dual_level_mx_quant."""
        stored, level0, level1 = torch_npu().npu_dynamic_dual_level_mx_quant(_half_precision(weight))
        return cls(stored, level0, level1, bias)

    def _matmul(self, x2d: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
        npu = torch_npu()
        xq, x_level0, x_level1 = npu.npu_dynamic_dual_level_mx_quant(_half_precision(x2d))
        return npu.npu_dual_level_quant_matmul(
            xq, self.weight, x_level0, self.level0, x_level1, self.level1, bias=bias, output_dtype=out_dtype
        )


def _half_precision(t: torch.Tensor) -> torch.Tensor:
    """Dual-level quantization takes bf16 / fp16; float32 goes through bf16."""
    return t if t.dtype in (torch.bfloat16, torch.float16) else t.to(torch.bfloat16)


_CLASSES: dict[str, type[NpuLinear]] = {
    "w8a8_mxfp8": W8A8Mxfp8Linear,
    "w4a4_mxfp4": W4A4Mxfp4Linear,
    "w4a4_mxfp4_dual": W4A4Mxfp4DualLevelLinear,
    "w4a8_mxfp4": W4A8Mxfp4Linear,
}


def prepare_linear(
    weight: torch.Tensor,
    scheme: str,
    *,
    weight_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    name: str | None = None,
) -> NpuLinear:
    """Prepare a dense layer for the NPU.

    Args:
        weight: online: float [N, K] (bf16 / fp16 / fp32), quantized here on the device. Offline: the
            checkpoint's quantized weight, float8_e4m3fn / uint8 [N, K] (MXFP8) or packed E2M1
            uint8 / int8 / float4_e2m1fn_x2 [N, K/2] (MXFP4).
        scheme: one of SCHEMES.
        weight_scale: offline only: E8M0 [N, K/32] (uint8 or float8_e8m0fnu). None means online.
        bias: optional [N], kept as float32 and passed as each scheme's op takes it (float32 [N]; W4A8:
            the output dtype, [1, N]).
        name: the layer's name, for the fallback log line.

    Returns:
        The prepared layer; a Bf16Linear (logged at WARNING) when an online weight's K breaks the MX
        alignment rule, or its N the W4A8 rule (N % 8). An offline W4A8 weight with N % 8 != 0 raises.
    """
    if scheme not in _CLASSES:
        raise ValueError(f"scheme: must be one of {SCHEMES}, got {scheme!r}")
    cls = _CLASSES[scheme]
    if weight_scale is None:
        _check_float(weight, "weight")
        if weight.dim() != 2:
            raise ValueError(f"weight: must be 2-D [N, K], got shape {tuple(weight.shape)}")
        problem = layout.k_alignment_problem(weight.shape[1], fp4=scheme != "w8a8_mxfp8")
        if not problem and scheme == "w4a8_mxfp4":
            problem = w4a8_n_problem(weight.shape[0])
        if problem:
            logger.warning("layer %s runs in bf16 instead of %s: %s", name or "<unnamed>", scheme, problem)
            return Bf16Linear(weight, bias, problem)
        return cls.from_float(weight, bias)  # type: ignore[attr-defined]
    if scheme == "w4a4_mxfp4_dual":
        raise ValueError("scheme: w4a4_mxfp4_dual is online only (pass a float weight and no weight_scale)")
    return cls.from_checkpoint(weight, weight_scale, bias)  # type: ignore[attr-defined]
