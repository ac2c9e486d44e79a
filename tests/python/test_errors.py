"""Bad input raises a clear error naming the argument and the rule, in every entry point."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import random_weight
from lowbit import QuantType


@pytest.fixture
def iq4(rng: np.random.Generator) -> torch.Tensor:
    return random_weight(QuantType.IQ4_XS, 8, 512, rng)[0]


def test_q8_1_is_not_a_weight_type(iq4: torch.Tensor) -> None:
    x = torch.randn(2, 512)
    with pytest.raises(ValueError, match=r"qtype: q8_1 is an activation format"):
        lowbit.dequantize(iq4, "q8_1")
    with pytest.raises(ValueError, match=r"qtype: q8_1 is an activation format"):
        lowbit.linear(x, iq4, QuantType.Q8_1)
    with pytest.raises(ValueError, match=r"qtype: q8_1 is an activation format"):
        torch.ops.lowbit.dequantize(iq4, 9)


def test_unknown_type_ids_and_names(iq4: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"qtype: 12345 is not a quant type id"):
        lowbit.dequantize(iq4, 12345)
    with pytest.raises(ValueError, match=r"qtype: 12345 is not a quant type id"):
        torch.ops.lowbit.dequantize(iq4, 12345)
    with pytest.raises(ValueError, match=r"qtype: unknown quant type name 'iq5_xl'"):
        lowbit.linear(torch.randn(1, 512), iq4, "iq5_xl")


def test_rows_that_are_not_whole_blocks() -> None:
    w = torch.zeros(4, 67, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"w: a row of 67 bytes is not a whole number of iq2_xxs blocks"):
        lowbit.dequantize(w, "iq2_xxs")


def test_k_inconsistent_with_row_bytes(iq4: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"k: 256 is inconsistent with w's rows of 272 bytes, which hold K = 512"):
        lowbit.dequantize(iq4, "iq4_xs", k=256)
    assert lowbit.dequantize(iq4, "iq4_xs", k=512).shape == (8, 512)


def test_wrong_dtypes(iq4: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"w must be uint8 bytes for iq4_xs, got Float"):
        lowbit.dequantize(iq4.float(), "iq4_xs")
    with pytest.raises(ValueError, match=r"x must be float32, bfloat16 or float16, got Int"):
        lowbit.linear(torch.ones(1, 512, dtype=torch.int32), iq4, "iq4_xs")
    with pytest.raises(ValueError, match=r"dtype must be torch.float32, torch.bfloat16 or torch.float16"):
        lowbit.dequantize(iq4, "iq4_xs", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"bias must have shape \[N\] = \[8\]"):
        lowbit.linear(torch.randn(1, 512), iq4, "iq4_xs", bias=torch.randn(7))


def test_non_contiguous_weight(iq4: torch.Tensor) -> None:
    w = torch.cat([iq4, iq4], dim=1)[:, ::2]
    with pytest.raises(ValueError, match=r"w must be contiguous"):
        lowbit.dequantize(w, "iq4_xs")


def test_x_of_the_wrong_width(iq4: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"x must have shape \[\.\.\., K\] with K = 512"):
        lowbit.linear(torch.randn(3, 256), iq4, "iq4_xs")


def test_tensors_on_different_devices(iq4: torch.Tensor) -> None:
    x = torch.empty(2, 512, device="meta")
    with pytest.raises(ValueError, match=r"x is on meta but w is on cpu"):
        torch.ops.lowbit.linear.default(x, iq4, int(QuantType.IQ4_XS))
    data, scales = lowbit.quantize(torch.randn(4, 64), "mxfp8_e4m3")
    with pytest.raises(ValueError, match=r"scales is on meta but w is on cpu"):
        lowbit.dequantize(data, "mxfp8_e4m3", scales=scales.to("meta"))


def test_split_scales_rules(rng: np.random.Generator, iq4: torch.Tensor) -> None:
    data, scales = lowbit.quantize(torch.randn(4, 64), "mxfp4_split")
    with pytest.raises(ValueError, match=r"scales is required: mxfp4_split keeps its E8M0 scales"):
        lowbit.dequantize(data, "mxfp4_split")
    with pytest.raises(ValueError, match=r"scales must have shape \[4, 2\]"):
        lowbit.dequantize(data, "mxfp4_split", scales=scales[:, :1].contiguous())
    with pytest.raises(ValueError, match=r"scales must be uint8 or float8_e8m0fnu"):
        lowbit.dequantize(data, "mxfp4_split", scales=scales.float())
    with pytest.raises(ValueError, match=r"scales must be None: iq4_xs stores its scales inside its blocks"):
        lowbit.dequantize(iq4, "iq4_xs", scales=scales)


def test_quantize_rules() -> None:
    with pytest.raises(ValueError, match=r"qtype: lowbit has no quantizer for iq2_xxs"):
        lowbit.quantize(torch.randn(2, 256), "iq2_xxs")
    with pytest.raises(ValueError, match=r"w: K = 48 \(its last dim\) must be a positive multiple of 32"):
        lowbit.quantize(torch.randn(2, 48), "mxfp8_e4m3")
    with pytest.raises(ValueError, match=r"scale_rule must be one of"):
        lowbit.quantize(torch.randn(2, 64), "mxfp8_e4m3", scale_rule="ceil")
    with pytest.raises(ValueError, match=r"w must be a floating tensor"):
        lowbit.quantize(torch.ones(2, 64, dtype=torch.int32), "q8_0")


def moe_args(rng: np.random.Generator) -> dict:
    w13, _ = random_weight(QuantType.IQ4_NL, 64, 32, rng, experts=2)
    w2, _ = random_weight(QuantType.Q8_0, 32, 32, rng, experts=2)
    return dict(
        x=torch.randn(3, 32),
        w13=w13,
        w2=w2,
        topk_weights=torch.rand(3, 2),
        topk_ids=torch.zeros(3, 2, dtype=torch.int64),
        w13_type="iq4_nl",
        w2_type="q8_0",
    )


def call_moe(args: dict, **changes) -> torch.Tensor:
    a = {**args, **changes}
    return lowbit.fused_moe(a.pop("x"), a.pop("w13"), a.pop("w2"), a.pop("topk_weights"), a.pop("topk_ids"), **a)


def test_fused_moe_argument_errors(rng: np.random.Generator) -> None:
    args = moe_args(rng)
    assert call_moe(args).shape == (3, 32)
    with pytest.raises(ValueError, match=r"topk_ids must have shape \[T, top_k\] with T = 3"):
        call_moe(args, topk_ids=torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"topk_ids must be int32 or int64, got Float"):
        call_moe(args, topk_ids=torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"topk_weights must have the shape of topk_ids"):
        call_moe(args, topk_weights=torch.rand(3, 1))
    with pytest.raises(ValueError, match=r"w2_type: q8_1 is an activation format"):
        call_moe(args, w2_type="q8_1")
    with pytest.raises(ValueError, match=r"w13 rows hold K = 32 weights but x has H = 64"):
        call_moe(args, x=torch.randn(3, 64))
    with pytest.raises(ValueError, match=r"expert_range must be \[start, end\) with end - start = E = 2"):
        call_moe(args, expert_range=(0, 5))
    with pytest.raises(ValueError, match=r"activation must be \"silu\", \"gelu\" or \"gelu_tanh\""):
        call_moe(args, activation="relu")


def test_mmvq_arithmetic_is_checked(iq4: torch.Tensor, rng: np.random.Generator) -> None:
    x = torch.randn(2, 512)
    with pytest.raises(ValueError, match=r'math: unknown MMVQ arithmetic "fp8" \(auto, bf16, int8\)'):
        torch.ops.lowbit.mmvq(x, iq4, int(QuantType.IQ4_XS), math="fp8")
    with pytest.raises(ValueError, match=r'math: "int8" serves M <= 8 tokens of every type but mxfp8_e4m3; got iq4_xs'):
        torch.ops.lowbit.mmvq(torch.randn(9, 512), iq4, int(QuantType.IQ4_XS), math="int8")
    w8, s8 = random_weight(QuantType.MXFP8_E4M3, 8, 512, rng)
    with pytest.raises(ValueError, match=r"got mxfp8_e4m3 with M = 2"):
        torch.ops.lowbit.mmvq(x, w8, int(QuantType.MXFP8_E4M3), scales=s8, math="int8")
    # on the CPU every arithmetic gives the exact reference
    ref = torch.ops.lowbit.mmvq(x, iq4, int(QuantType.IQ4_XS))
    assert torch.equal(torch.ops.lowbit.mmvq(x, iq4, int(QuantType.IQ4_XS), math="int8"), ref)


def test_mmq_arithmetic_is_checked(iq4: torch.Tensor, rng: np.random.Generator) -> None:
    x = torch.randn(20, 512)
    with pytest.raises(ValueError, match=r'math: unknown MMVQ arithmetic "fp8" \(auto, bf16, int8\)'):
        torch.ops.lowbit.mmq(x, iq4, int(QuantType.IQ4_XS), math="fp8")
    w, _ = random_weight(QuantType.IQ2_XS, 8, 512, rng)
    with pytest.raises(ValueError, match=r'math: "int8" MMQ needs a type whose int8 form.*got iq2_xs'):
        torch.ops.lowbit.mmq(x, w, int(QuantType.IQ2_XS), math="int8")
    # the fake kernel (torch.compile's tracing) states the same rule
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode, pytest.raises(ValueError, match=r'math: "int8" MMQ needs a type whose int8 form'):
        torch.ops.lowbit.mmq(mode.from_tensor(x), mode.from_tensor(w), int(QuantType.IQ2_XS), math="int8")
    supported = {q for q in lowbit.WEIGHT_TYPES if lowbit._C.mmq_int8_supported(int(q))}
    assert supported == {
        QuantType.IQ1_S,
        QuantType.IQ2_XXS,
        QuantType.IQ3_XXS,
        QuantType.IQ3_S,
        QuantType.IQ4_NL,
        QuantType.IQ4_XS,
        QuantType.Q5_0,
        QuantType.Q8_0,
        QuantType.MXFP4,
        QuantType.MXFP4_SPLIT,
    }
    # on the CPU every arithmetic gives the exact reference
    ref = torch.ops.lowbit.mmq(x, iq4, int(QuantType.IQ4_XS))
    assert torch.equal(torch.ops.lowbit.mmq(x, iq4, int(QuantType.IQ4_XS), math="int8"), ref)


# --- the cases of the 2026-12 review of bad inputs ------------------------------------------------


def test_dequantize_k_must_be_a_positive_int(iq4: torch.Tensor) -> None:
    for bad in (-5, 0, 64.7, True):
        with pytest.raises(ValueError, match=r"k must be a positive int"):
            lowbit.dequantize(iq4, "iq4_xs", k=bad)
    with pytest.raises(ValueError, match=r"k must be -1 \(derive it from w's rows\) or a positive K, got -5"):
        torch.ops.lowbit.dequantize(iq4, int(QuantType.IQ4_XS), -5)
    assert lowbit.dequantize(iq4, "iq4_xs", k=512).shape == (8, 512)


def test_q8_quantize_rejects_values_whose_fp16_scale_overflows(rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((3, 64)).astype(np.float32))
    x[1, 40] = 8.4e6  # finite, but 8.4e6 / 127 > 65504
    for q in ("q8_0", "q8_1"):
        with pytest.raises(ValueError, match=rf"w: row 1 block 1 reaches \|x\| = .* {q} float16 scale overflows"):
            lowbit.quantize(x, q)
    x[1, 40] = 8.0e6  # still fits: the scale is finite and the decode is close
    data, _ = lowbit.quantize(x, "q8_0")
    back = lowbit.dequantize(data, "q8_0")
    assert torch.isfinite(back).all() and abs(float(back[1, 40]) - 8.0e6) < 8.0e6 / 127


def test_select_kernel_checks_the_shape() -> None:
    with pytest.raises(ValueError, match=r"n: N = -1 must be >= 0"):
        lowbit.select_kernel("iq4_nl", 0, -1, 33)
    with pytest.raises(ValueError, match=r"k: K = 33 must be a positive multiple of 32"):
        lowbit.select_kernel("iq4_nl", 1, 64, 33)
    with pytest.raises(ValueError, match=r"m: M = -2 must be >= 0"):
        lowbit.select_kernel("iq4_nl", -2, 64, 64)
    with pytest.raises(ValueError, match=r"k must be an int"):
        lowbit.select_kernel("iq4_nl", 1, 64, 64.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"k: K = 33 must be a positive multiple of 32"):
        torch.ops.lowbit.select_dense_kernel(int(QuantType.IQ4_NL), 1, 64, 33, torch.device("cpu"))
    assert lowbit.select_kernel("iq4_nl", 0, 64, 64, "cpu")["kernel"] == "cpu_reference"


def test_unknown_route_on_the_cpu_is_called_unknown(iq4: torch.Tensor) -> None:
    x = torch.randn(2, 512)
    with pytest.raises(ValueError, match=r"route: unknown kernel \"bogus\""):
        torch.ops.lowbit.linear(x, iq4, int(QuantType.IQ4_XS), route="bogus")
    with pytest.raises(ValueError, match=r"route: \"mmvq\" needs a CUDA device"):
        torch.ops.lowbit.linear(x, iq4, int(QuantType.IQ4_XS), route="mmvq")
    # the Python wrapper takes the former keyword too
    forced = lowbit.linear(x, iq4, "iq4_xs", kernel="cpu_reference")
    assert torch.equal(forced, lowbit.linear(x, iq4, "iq4_xs", route="cpu_reference"))
    with pytest.raises(ValueError, match=r"kernel: 'mmvq' contradicts route='cpu_reference'"):
        lowbit.linear(x, iq4, "iq4_xs", route="cpu_reference", kernel="mmvq")


def test_empty_weights_decode_to_empty_outputs() -> None:
    for shape in ((0, 5, 136), (2, 0, 136), (0, 136)):
        w = torch.empty(shape, dtype=torch.uint8)
        out = lowbit.dequantize(w, "iq4_xs")
        assert out.shape == (*shape[:-1], 256)


def test_empty_input_quantizes_to_empty_tensors_with_scales() -> None:
    data, scales = lowbit.quantize(torch.empty(0, 64), "mxfp8_e4m3")
    assert data.shape == (0, 64) and scales is not None and scales.shape == (0, 2)
    data, scales = lowbit.quantize(torch.empty(0, 64), "q8_0")
    assert data.shape == (0, 68) and scales is None


def test_split_mxfp4_code_8_is_negative_zero() -> None:
    # element codes 0b1000 (-0) and 0b0000 (+0) in one byte, then 0b1001 (-0.5) and 0b0001 (+0.5)
    elements = torch.zeros(1, 16, dtype=torch.uint8)
    elements[0, 0] = 0x08
    elements[0, 1] = 0x19
    scales = torch.full((1, 1), 127, dtype=torch.uint8)  # 2^0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out = lowbit.dequantize(elements, "mxfp4_split", scales=scales, dtype=dtype)[0, :4].float()
        assert out.tolist() == [-0.0, 0.0, -0.5, 0.5]
        assert torch.signbit(out).tolist() == [True, False, True, False]
    # GGUF MXFP4 keeps ggml's reading: code 8 is the int8 -0, i.e. +0.0
    block = torch.zeros(1, 17, dtype=torch.uint8)
    block[0, 0] = 128
    block[0, 1] = 0x08
    gguf_out = lowbit.dequantize(block, "mxfp4")[0, 0]
    assert float(gguf_out) == 0.0 and not bool(torch.signbit(gguf_out))
