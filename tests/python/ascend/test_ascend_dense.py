"""Dense MX layers through the Ascend backend on the torch_npu emulator: the op sequence and argument
contracts, and the outputs against lowbit's CPU reference within the MX quantization error."""

from __future__ import annotations

import gc
import logging

import lowbit
import lowbit.ascend as ascend
import pytest
import torch
from ascend_helpers import (
    ACT_FP4_BOUND,
    ACT_FP8_BOUND,
    BOUNDS_ONLINE,
    assert_tight,
    dequant,
    dequant_paired,
    device_values,
    rel_err,
)
from lowbit import QuantType

E8M0, FP4 = 293, 296


def _inputs(trng: torch.Generator, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(m, k, generator=trng).to(torch.bfloat16)
    w = (torch.randn(n, k, generator=trng) / k**0.5).to(torch.bfloat16)
    bias = torch.randn(n, generator=trng)
    return x, w, bias


def _check_scale_view(info, n: int, k: int) -> None:
    """The weight scale reaches the matmul as the logical [ceil(K/64), N, 2] transpose view of [N, G, 2]."""
    g = -(-k // 64)
    assert info.shape == (g, n, 2) and info.stride == (2, 2 * g, 1) and not info.contiguous


# ---- online: float weights quantized on the device ---------------------------------------------------


@pytest.mark.parametrize("m, n, k", [(1, 64, 96), (7, 48, 256)])  # K = 96: K/32 = 3, odd
def test_w8a8_mxfp8_online(npu, trng, m: int, n: int, k: int) -> None:
    x, w, bias = _inputs(trng, m, n, k)
    layer = ascend.prepare_linear(w, "w8a8_mxfp8", bias=bias)
    y = layer(npu.to(x))
    assert npu.ops() == ["npu_dynamic_mx_quant", "npu_dynamic_mx_quant", "npu_quant_matmul"]
    wq_call, xq_call, mm = npu.state.calls
    assert wq_call["dst_type"] == torch.float8_e4m3fn and xq_call["dst_type"] == torch.float8_e4m3fn
    w_stored, w_paired = wq_call.outputs
    assert mm.info["x1"].dtype == torch.float8_e4m3fn and mm.info["x1"].shape == (m, k)
    x2 = mm.info["x2"]
    assert x2.shape == (k, n) and x2.transposed and x2.npu_format == 2  # a strided view, no .contiguous()
    assert x2.storage_ptr == w_stored.untyped_storage().data_ptr()
    _check_scale_view(mm.info["scale"], n, k)
    assert mm.info["scale"].storage_ptr == w_paired.untyped_storage().data_ptr()
    assert mm["scale_dtype"] == E8M0 and mm["pertoken_scale_dtype"] == E8M0
    assert mm["group_sizes"] == [1, 1, 32] and mm["output_dtype"] == torch.bfloat16
    assert mm.info["bias"].dtype == torch.float32 and mm["x1_dtype"] is None and mm["x2_dtype"] is None
    if k // 32 % 2:
        assert (w_paired[:, -1, 1] == 0).all()
    assert y.dtype == torch.bfloat16 and y.shape == (m, n)
    x_deq = dequant_paired(*xq_call.outputs, QuantType.MXFP8_E4M3)
    w_deq = dequant_paired(w_stored, w_paired, QuantType.MXFP8_E4M3)
    assert_tight(y, x_deq, w_deq, bias)
    ref = x.double() @ w.double().t() + bias.double()
    assert rel_err(y, ref) <= BOUNDS_ONLINE["w8a8_mxfp8"]


@pytest.mark.parametrize("m, n, k", [(3, 64, 96), (9, 32, 192)])
def test_w4a4_mxfp4_single_level_online(npu, trng, m: int, n: int, k: int) -> None:
    x, w, bias = _inputs(trng, m, n, k)
    y = ascend.prepare_linear(w, "w4a4_mxfp4", bias=bias)(npu.to(x))
    assert npu.ops() == ["npu_dynamic_mx_quant", "npu_dynamic_mx_quant", "npu_quant_matmul"]
    wq_call, xq_call, mm = npu.state.calls
    for q in (wq_call, xq_call):
        assert q["dst_type"] == FP4 and q["round_mode"] == "round"
    assert mm["x1_dtype"] == FP4 and mm["x2_dtype"] == FP4 and mm["group_sizes"] == [1, 1, 32]
    assert mm.info["x1"].dtype == torch.uint8 and mm.info["x1"].shape == (m, k // 2)
    x2 = mm.info["x2"]
    assert x2.shape == (k // 2, n) and x2.transposed and x2.dtype == torch.uint8 and x2.npu_format == 2
    _check_scale_view(mm.info["scale"], n, k)
    # x through the emulator's decoder, w through lowbit's: a nibble order the two disagree on shows
    # (with one decoder for both, a swap would cancel in the dot product).
    assert_tight(y, device_values(*xq_call.outputs), dequant_paired(*wq_call.outputs, QuantType.MXFP4_SPLIT), bias)
    assert rel_err(y, x.double() @ w.double().t() + bias.double()) <= BOUNDS_ONLINE["w4a4_mxfp4"]


@pytest.mark.parametrize("m, n, k", [(2, 64, 96), (8, 48, 224)])
def test_w4a8_mxfp4_online_casts_to_nz_before_transposing(npu, trng, m: int, n: int, k: int) -> None:
    x, w, bias = _inputs(trng, m, n, k)
    y = ascend.prepare_linear(w, "w4a8_mxfp4", bias=bias)(npu.to(x))
    assert npu.ops() == ["npu_dynamic_mx_quant", "npu_format_cast", "npu_dynamic_mx_quant", "npu_quant_matmul"]
    wq_call, cast, xq_call, mm = npu.state.calls
    w_stored, w_paired = wq_call.outputs
    # The cast got the contiguous stored [N, K/2] (not a view, so torch_npu does not skip it) ...
    assert cast.info["input"].shape == (n, k // 2) and cast.info["input"].contiguous and not cast["skipped"]
    assert cast["acl_format"] == 29 and cast["customize_dtype"] == torch.float8_e4m3fn and cast["input_dtype"] == FP4
    # ... and the matmul sees the transpose of the NZ tensor; the scale stays ND.
    x2 = mm.info["x2"]  # on the 950 a cast FP4 weight reports FRACTAL_NZ_C0_16 (50)
    assert x2.npu_format == 50 and x2.transposed and x2.shape == (k // 2, n)
    assert x2.storage_ptr == cast.outputs.untyped_storage().data_ptr()
    assert mm.info["scale"].npu_format == 2
    _check_scale_view(mm.info["scale"], n, k)
    assert xq_call["dst_type"] == torch.float8_e4m3fn and mm.info["x1"].dtype == torch.float8_e4m3fn
    assert mm["x2_dtype"] == FP4 and mm["x1_dtype"] is None and mm["group_sizes"] == [0, 0, 32]
    assert mm.info["bias"].dtype == torch.bfloat16 and mm.info["bias"].shape == (1, n)  # the A8W4 bias contract
    assert_tight(
        y,
        dequant_paired(*xq_call.outputs, QuantType.MXFP8_E4M3),
        dequant_paired(w_stored, w_paired, QuantType.MXFP4_SPLIT),
        bias.to(torch.bfloat16),  # the op's bias is in the output dtype
    )
    assert rel_err(y, x.double() @ w.double().t() + bias.double()) <= BOUNDS_ONLINE["w4a8_mxfp4"]


@pytest.mark.parametrize("m, n, k", [(4, 32, 544), (1, 64, 1024)])  # 544: two 512-groups, the last short; K/32 odd
def test_w4a4_mxfp4_dual_level_online(npu, trng, m: int, n: int, k: int) -> None:
    x, w, bias = _inputs(trng, m, n, k)
    y = ascend.prepare_linear(w, "w4a4_mxfp4_dual", bias=bias)(npu.to(x))
    assert npu.ops() == [
        "npu_dynamic_dual_level_mx_quant",
        "npu_format_cast",
        "npu_dynamic_dual_level_mx_quant",
        "npu_dual_level_quant_matmul",
    ]
    wq_call, cast, xq_call, mm = npu.state.calls
    groups = -(-k // 512)
    assert cast.info["input"].dtype == torch.int8 and cast.info["input"].shape == (n, k // 2) and not cast["skipped"]
    assert cast["customize_dtype"] == torch.int8
    assert mm.info["x2"].npu_format == 29 and mm.info["x2"].shape == (n, k // 2) and mm.info["x2"].contiguous
    assert mm.info["x2_level0_scale"].shape == (groups, n) and mm.info["x2_level0_scale"].contiguous
    assert mm.info["x2_level1_scale"].shape == (n, -(-k // 64), 2)
    assert mm["output_dtype"] == torch.bfloat16 and mm.info["bias"].dtype == torch.float32

    def dual_deq(q: torch.Tensor, level0: torch.Tensor, level1: torch.Tensor) -> torch.Tensor:
        return dequant_paired(q, level1, QuantType.MXFP4_SPLIT) * level0.double().repeat_interleave(512, -1)[:, :k]

    assert_tight(y, dual_deq(*xq_call.outputs), dual_deq(*wq_call.outputs), bias)
    assert rel_err(y, x.double() @ w.double().t() + bias.double()) <= BOUNDS_ONLINE["w4a4_mxfp4_dual"]


def test_k_4304_falls_back_to_bf16_with_the_reason_logged(npu, trng, caplog) -> None:
    x, w, bias = _inputs(trng, 3, 16, 4304)
    for scheme in ascend.SCHEMES:
        with caplog.at_level(logging.WARNING, logger="lowbit.ascend"):
            layer = ascend.prepare_linear(w, scheme, bias=bias, name="model.layers.7.mlp.down_proj")
        assert isinstance(layer, ascend.Bf16Linear)
        assert "K = 4304 is not a multiple of 32" in layer.reason
        record = caplog.records[-1]
        assert record.name == "lowbit.ascend" and record.levelno == logging.WARNING
        assert "model.layers.7.mlp.down_proj" in record.getMessage() and scheme in record.getMessage()
        assert "K = 4304" in record.getMessage()
        y = layer(npu.to(x))
        assert npu.ops() == []  # no MX op was touched
        ref = (x.float() @ w.float().t()).to(torch.bfloat16).double() + bias.double()
        assert rel_err(y, ref) <= 2.0**-7


# ---- offline: pre-quantized checkpoints --------------------------------------------------------------


@pytest.mark.parametrize(
    "scheme, qtype, weight_dtype, scale_dtype",
    [
        ("w8a8_mxfp8", QuantType.MXFP8_E4M3, torch.float8_e4m3fn, torch.uint8),
        ("w8a8_mxfp8", QuantType.MXFP8_E4M3, torch.uint8, torch.float8_e8m0fnu),
        ("w4a4_mxfp4", QuantType.MXFP4_SPLIT, torch.uint8, torch.uint8),
        ("w4a4_mxfp4", QuantType.MXFP4_SPLIT, torch.float4_e2m1fn_x2, torch.float8_e8m0fnu),
        ("w4a8_mxfp4", QuantType.MXFP4_SPLIT, torch.int8, torch.uint8),
    ],
)
def test_offline_checkpoint_weights_pair_and_pad_their_scales(
    npu, trng, scheme: str, qtype: QuantType, weight_dtype: torch.dtype, scale_dtype: torch.dtype
) -> None:
    m, n, k = 5, 40, 160  # K/32 = 5: the paired scale needs a 0x00 pad
    x, w, bias = _inputs(trng, m, n, k)
    data, scales = lowbit.quantize(w.float(), qtype)  # what a ModelSlim-style checkpoint stores
    layer = ascend.prepare_linear(data.view(weight_dtype), scheme, weight_scale=scales.view(scale_dtype), bias=bias)
    y = layer(npu.to(x))
    mm = npu.state.last("npu_quant_matmul")
    assert "npu_dynamic_mx_quant" in npu.ops() and len(npu.state.all("npu_dynamic_mx_quant")) == 1  # only x
    scale = mm["scale"]  # logical [G, N, 2]
    assert scale.shape == (3, n, 2) and scale.dtype == torch.uint8 and (scale[-1, :, 1] == 0).all()
    assert torch.equal(scale.transpose(0, 1).reshape(n, 6)[:, :5], scales)  # pairs of consecutive blocks
    fp4_weight = qtype == QuantType.MXFP4_SPLIT
    assert mm.info["x2"].shape == ((k // 2, n) if fp4_weight else (k, n)) and mm.info["x2"].transposed
    if scheme == "w4a8_mxfp4":
        assert npu.state.last("npu_format_cast").info["input"].shape == (n, k // 2) and mm.info["x2"].npu_format == 50
    x_deq = device_values(*npu.state.last("npu_dynamic_mx_quant").outputs)  # the emulator's decoder
    w_deq = dequant(data, scales, qtype)
    assert_tight(y, x_deq, w_deq, bias.to(torch.bfloat16) if scheme == "w4a8_mxfp4" else bias)
    ref = lowbit.linear(x.float(), data, qtype, scales=scales, bias=bias)  # lowbit's CPU reference
    assert rel_err(y, ref) <= (ACT_FP4_BOUND if scheme == "w4a4_mxfp4" else ACT_FP8_BOUND)


def test_offline_weights_with_wrong_shapes_are_rejected(npu, trng) -> None:
    data, scales = lowbit.quantize(torch.randn(8, 64, generator=trng), QuantType.MXFP8_E4M3)
    with pytest.raises(ValueError, match=r"weight_scale: must be \[N, K/32\] = \[8, 2\]"):
        ascend.prepare_linear(data, "w8a8_mxfp8", weight_scale=scales[:, :1])
    with pytest.raises(ValueError, match="w4a4_mxfp4_dual is online only"):
        ascend.prepare_linear(data, "w4a4_mxfp4_dual", weight_scale=scales)
    with pytest.raises(ValueError, match="scheme: must be one of"):
        ascend.prepare_linear(data, "w8a8_int8", weight_scale=scales)
    with pytest.raises(ValueError, match="MXFP8 elements must be float8_e4m3fn or uint8"):
        ascend.prepare_linear(data.view(torch.int8), "w8a8_mxfp8", weight_scale=scales)


# ---- lowbit's stateless API on NPU tensors -----------------------------------------------------------


@pytest.mark.parametrize("qtype", [QuantType.MXFP8_E4M3, "mxfp4_split", 39])
def test_stateless_linear_prepares_once_and_matches_lowbit(npu, trng, qtype) -> None:
    m, n, k = 6, 24, 96
    x, w, bias = _inputs(trng, m, n, k)
    data, scales = lowbit.quantize(w.float(), qtype)
    y = ascend.linear(npu.to(x), data, qtype, scales=scales, bias=bias)
    ref = lowbit.linear(x.float(), data, qtype, scales=scales, bias=bias)
    assert y.dtype == torch.bfloat16 and rel_err(y, ref) <= ACT_FP8_BOUND  # MXFP8 activations in all three
    first = npu.ops()
    npu.reset_log()
    y2 = ascend.linear(npu.to(x), data, qtype, scales=scales, bias=bias)
    assert npu.ops() == ["npu_dynamic_mx_quant", "npu_quant_matmul"] and torch.equal(y, y2)  # cached weights
    assert first[-2:] == npu.ops() and len(first) >= 2
    # An in-place change of the weight prepares it again. Row 0 takes row 1's codes: a change that
    # shows in output column 0 whatever bf16 rounds (one flipped low bit of one code may not).
    codes = data.view(torch.uint8)
    codes[0].copy_(codes[1].clone())
    npu.reset_log()
    y3 = ascend.linear(npu.to(x), data, qtype, scales=scales, bias=bias)
    assert npu.ops() == first
    ref3 = lowbit.linear(x.float(), data, qtype, scales=scales, bias=bias)
    assert rel_err(y3, ref3) <= ACT_FP8_BOUND and not torch.equal(y3, y)  # the new weight's output
    mm = npu.state.last("npu_quant_matmul")
    fp4 = qtype != QuantType.MXFP8_E4M3
    elements, split = (data, scales) if qtype != 39 else lowbit.ascend.layout.gguf_mxfp4_to_split(data)
    w_deq = dequant(elements, split, QuantType.MXFP4_SPLIT if fp4 else QuantType.MXFP8_E4M3)
    x_deq = device_values(*npu.state.last("npu_dynamic_mx_quant").outputs)
    assert_tight(y3, x_deq, w_deq, bias.to(torch.bfloat16) if mm["x2_dtype"] == FP4 else bias)


def test_prepared_weights_are_dropped_with_the_weight(npu, trng) -> None:
    x = torch.randn(2, 64, generator=trng).to(torch.bfloat16)
    data, scales = lowbit.quantize(torch.randn(16, 64, generator=trng), QuantType.MXFP8_E4M3)
    ascend.linear(npu.to(x), data, "mxfp8_e4m3", scales=scales)
    cache = ascend.api._CACHE._entries
    assert len(cache) == 1
    del data
    gc.collect()
    assert len(cache) == 0  # the prepared views do not keep the caller's tensor alive


def test_stateless_linear_keeps_shape_and_dtype(npu, trng) -> None:
    x = torch.randn(2, 3, 64, generator=trng)  # float32, 3-D
    data, scales = lowbit.quantize(torch.randn(16, 64, generator=trng), QuantType.MXFP8_E4M3)
    y = ascend.linear(npu.to(x), data, "mxfp8_e4m3", scales=scales)
    assert y.shape == (2, 3, 16) and y.dtype == torch.float32
    mm = npu.state.last("npu_quant_matmul")
    assert mm.info["x1"].shape == (6, 64) and mm["output_dtype"] == torch.bfloat16  # fp32 x: bf16 out, cast back
    assert rel_err(y, lowbit.linear(x, data, "mxfp8_e4m3", scales=scales)) <= ACT_FP8_BOUND


def test_e8m0_dtype_spelling_is_selectable(npu, trng) -> None:
    x, w, _ = _inputs(trng, 4, 16, 64)
    layer = ascend.prepare_linear(w, "w8a8_mxfp8")
    y_code = layer(npu.to(x))
    ascend.set_e8m0_spelling("torch")
    y_torch = layer(npu.to(x))
    mm = npu.state.last("npu_quant_matmul")
    assert mm["scale_dtype"] == torch.float8_e8m0fnu and mm["pertoken_scale_dtype"] == torch.float8_e8m0fnu
    assert torch.equal(y_code, y_torch)
    assert ascend.canonical_dtype(293) == ascend.canonical_dtype(torch.float8_e8m0fnu) == "float8_e8m0fnu"
    assert ascend.canonical_dtype(296) == ascend.canonical_dtype(torch.float4_e2m1fn_x2) == "float4_e2m1fn_x2"
    with pytest.raises(ValueError, match="spelling"):
        ascend.set_e8m0_spelling("acl")


def test_bad_calls_name_the_argument(npu, trng) -> None:
    x, w, _ = _inputs(trng, 2, 16, 64)
    data, scales = lowbit.quantize(w.float(), QuantType.MXFP8_E4M3)
    with pytest.raises(ValueError, match="x: lowbit.ascend runs on NPU tensors, got cpu"):
        ascend.linear(x, data, "mxfp8_e4m3", scales=scales)
    with pytest.raises(ValueError, match="qtype: the Ascend backend covers"):
        ascend.linear(npu.to(x), data, "iq2_xxs", scales=scales)
    with pytest.raises(ValueError, match="scales: required for split MX types"):
        ascend.linear(npu.to(x), data, "mxfp8_e4m3")
    with pytest.raises(ValueError, match="x: last dim must be K = 64"):
        ascend.prepare_linear(w, "w8a8_mxfp8")(npu.to(x[:, :32]))
