"""npu_dynamic_mx_quant, npu_dynamic_dual_level_mx_quant and npu_format_cast on CPU tensors
(ascend-npu-ops.md sections 1, 4 "Dual-level", 5)."""

from __future__ import annotations

import torch

from . import _mx
from ._dtypes import FP4X2, dtype_name, require_dtype
from ._nz import FORMAT_ND, FORMAT_NZ, FORMAT_NZ_C0_16, NzStorage, c0_for, covers_its_storage, nd_to_nz
from ._state import STATE

_FLOAT_INPUTS = (torch.float16, torch.bfloat16, torch.float32)


def _check_float_input(t: torch.Tensor, arg: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{arg}: expected a Tensor, got {type(t).__name__}")
    if t.dtype not in _FLOAT_INPUTS:
        raise ValueError(f"{arg}: must be float16, bfloat16 or float32, got {t.dtype}")


def npu_dynamic_mx_quant(
    input: torch.Tensor,
    *,
    axis: int = -1,
    round_mode: str = "rint",
    dst_type: object = 296,
    block_size: int = 32,
    scale_alg: int | None = 0,
    dst_type_max: float = 0.0,
    max_low_bound: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MX quantization along ``axis``. Returns (y, mxscale):
    y: float8 of input's shape, or uint8 with the last dim halved for FP4 (packed along the last dim,
    even element low); mxscale: uint8 E8M0, the axis dim replaced by ceil(ceil(L/block)/2) and a new
    last dim of 2 (pairs of consecutive blocks, odd counts padded with 0x00)."""
    STATE.record(
        "npu_dynamic_mx_quant",
        dict(
            input=input,
            axis=axis,
            round_mode=round_mode,
            dst_type=dst_type,
            block_size=block_size,
            scale_alg=scale_alg,
            dst_type_max=dst_type_max,
            max_low_bound=max_low_bound,
        ),
    )
    _check_float_input(input, "input")
    if not 1 <= input.dim() <= 7:
        raise ValueError(f"input: must have 1 to 7 dims, got {input.dim()}")
    element = require_dtype(dst_type, "dst_type", ("float8_e4m3fn", "float8_e5m2", FP4X2))
    if element == FP4X2 and isinstance(dst_type, torch.dtype):
        # The op halves y's last dim only for the codes 296 / 297 (Ascend/op-plugin
        # op_plugin/ops/opapi/DynamicMxQuantKernelNpuOpApi.cpp @517f2e7d); torch's dtype would give an
        # unpacked [.., K] output the packed data does not fill.
        raise ValueError("dst_type: pass 296 (torch_npu.float4_e2m1fn_x2) for FP4, not torch.float4_e2m1fn_x2")
    if block_size % 32 or not 32 <= block_size <= 1024:
        raise ValueError(f"block_size: must be a multiple of 32 in [32, 1024], got {block_size}")
    axis = axis % input.dim()
    length = input.shape[axis]
    if input.dtype == torch.float32 and (block_size != 32 or length < 32):
        raise ValueError(f"input: float32 needs block_size 32 and an axis length >= 32, got {block_size}, {length}")
    if element == FP4X2 and input.shape[-1] % 2:
        raise ValueError(f"input: FP4 output packs the last dim in pairs, so it must be even, got {input.shape[-1]}")
    scale_alg = 0 if scale_alg is None else scale_alg
    if scale_alg == 0:
        rule = "ocp_floor"
    elif scale_alg == 1:
        if element == FP4X2:
            raise ValueError("scale_alg: 1 is for FP8 destinations only")
        rule = "round_up"
    else:
        raise NotImplementedError(f"scale_alg={scale_alg} is not emulated (neither SGLang nor vllm-ascend uses it)")
    if dst_type_max != 0.0:
        raise NotImplementedError("dst_type_max belongs to scale_alg=2, which is not emulated")

    moved = input.movedim(axis, -1)
    elements, codes = _mx.mx_quantize_last(
        moved, element, rule=rule, round_mode=round_mode, block=block_size, max_low_bound=max_low_bound
    )
    elements = elements.movedim(-1, axis).contiguous()
    y = _mx.pack_fp4(elements) if element == FP4X2 else elements
    # Pairs of consecutive blocks along the axis, the pair index in the axis position, the pair last.
    paired = _mx.pair_last(codes)  # [..., pairs, 2] with the axis moved last
    mxscale = paired.movedim(-2, axis).contiguous() if axis != input.dim() - 1 else paired.contiguous()
    STATE.calls[-1].outputs = (y, mxscale)
    return y, mxscale


def npu_dynamic_dual_level_mx_quant(
    input: torch.Tensor, *, smooth_scale: torch.Tensor | None = None, round_mode: str = "rint"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dual-level MXFP4 quantization along the last dim. Returns (y uint8 [..., K/2],
    level0 float32 [..., ceil(K/512)] = amax per 512 / 6, level1 uint8 E8M0 [..., ceil(K/64), 2] = the
    OCP floor rule (emax 2) per 32 applied to temp = cast_to_input_dtype(x / level0))."""
    STATE.record("npu_dynamic_dual_level_mx_quant", dict(input=input, smooth_scale=smooth_scale, round_mode=round_mode))
    _check_float_input(input, "input")
    if input.dtype == torch.float32:
        raise ValueError("input: dual-level quantization takes float16 or bfloat16")
    k = input.shape[-1]
    if k % 2:
        raise ValueError(f"input: the last dim must be even (packed FP4), got {k}")
    x = input if smooth_scale is None else (input.to(torch.float32) * smooth_scale.to(torch.float32)).to(input.dtype)
    groups = -(-k // 512)
    level0 = (_mx.block_amax(x, 512) / 6.0).to(torch.float32)  # [..., groups]
    per_element = level0.repeat_interleave(512, dim=-1)[..., :k]
    temp = torch.where(per_element > 0, x.to(torch.float32) / per_element, 0.0).to(input.dtype)
    codes_el, codes = _mx.mx_quantize_last(temp, FP4X2, rule="ocp_floor", round_mode=round_mode)
    assert level0.shape[-1] == groups
    outputs = (_mx.pack_fp4(codes_el), level0.contiguous(), _mx.pair_last(codes).contiguous())
    STATE.calls[-1].outputs = outputs
    return outputs


def npu_format_cast(
    input: torch.Tensor, acl_format: int, *, customize_dtype: object = None, input_dtype: object = None
) -> torch.Tensor:
    """ND -> FRACTAL_NZ (29) or back (2). The NZ result keeps the logical shape; its storage is tagged NZ.

    Ascend/pytorch torch_npu/csrc/aten/common/FormatCastKernelNpu.cpp @9e73e708, MaybeUseAclnnNpuFormatCast:
    - Ascend 950 (IsAclnnOnly): no view check; CANN computes the storage of the logical tensor, and for a
      4-bit input_dtype (296 / 297) the last storage dim is halved and the format reported as
      FRACTAL_NZ_C0_16 (50): a packed FP4 row tile of 32 elements is 16 bytes.
    - 910B path: a view / non-contiguous source is returned unchanged (IsViewTensor: the cast is
      skipped), so a caller that transposes before casting ends up with an ND weight."""
    call = STATE.record(
        "npu_format_cast",
        dict(input=input, acl_format=acl_format, customize_dtype=customize_dtype, input_dtype=input_dtype),
    )
    custom = dtype_name(customize_dtype, "customize_dtype")
    declared = dtype_name(input_dtype, "input_dtype")
    if acl_format == FORMAT_ND:
        record = STATE.nz_record(input)
        call.args["skipped"] = record is None
        if record is None:
            return input
        out = input.clone()  # a fresh ND storage with the same logical values
        call.outputs = out
        return out
    if acl_format != FORMAT_NZ:
        raise NotImplementedError(f"acl_format: only ND (2) and FRACTAL_NZ (29) are emulated, got {acl_format}")
    if STATE.nz_record(input) is not None or (not STATE.ascend_950 and not covers_its_storage(input)):
        call.args["skipped"] = True
        return input
    call.args["skipped"] = False
    if input.dim() < 2:
        raise ValueError(f"input: FRACTAL_NZ needs at least 2 dims, got shape {tuple(input.shape)}")
    out = input.contiguous().clone()  # the logical values, in a storage of their own
    tile_itemsize = 1 if custom in ("float8_e4m3fn", "float8_e5m2", "int8", "uint8") else out.element_size()
    c0 = c0_for(tile_itemsize)
    npu_format = FORMAT_NZ
    four_bit = declared in (FP4X2, "float4_e1m2fn_x2", "int4")
    if four_bit and STATE.ascend_950:
        c0, npu_format = c0 // 2, FORMAT_NZ_C0_16  # the 4-bit element tile, halved to bytes
    STATE.nz_storages[out.untyped_storage().data_ptr()] = NzStorage(
        base=out,
        tiles=nd_to_nz(out.view(torch.uint8) if out.element_size() == 1 else out, c0),
        c0=c0,
        customize_dtype=custom,
        input_dtype=declared,
        npu_format=npu_format,
    )
    call.outputs = out
    return out


def get_npu_format(input: torch.Tensor) -> int:
    return STATE.format_of(input)
