"""MX quantize / dequantize: hand-checked codes, both scale rules, the NaN/Inf policy, and GGUF
MXFP4 / Q8_0 / Q8_1 quantization against ggml's reference."""

from __future__ import annotations

import math

import lowbit
import numpy as np
import pytest
import torch
from _helpers import gguf_module, rel_err
from lowbit import QuantType

E4M3 = QuantType.MXFP8_E4M3
E2M1 = QuantType.MXFP4_SPLIT


def one_block(values: list[float], fill: float = 0.0) -> torch.Tensor:
    x = torch.full((1, 32), fill, dtype=torch.float32)
    x[0, : len(values)] = torch.tensor(values, dtype=torch.float32)
    return x


def unpack_e2m1(data: torch.Tensor) -> list[int]:
    b = data.reshape(-1).tolist()
    out = []
    for v in b:
        out += [v & 0xF, v >> 4]
    return out


# --- MXFP8 (E4M3) --------------------------------------------------------------------------------


def test_e4m3_exact_codes_at_unit_scale() -> None:
    data, scales = lowbit.quantize(one_block([448.0, 1.0, -2.0, 0.375]), E4M3)
    assert scales.tolist() == [[127]]  # floor(log2 448) - 8 = 0
    assert data[0, :4].tolist() == [0x7E, 0x38, 0xC0, 0x2C]


def test_e4m3_saturates_under_ocp_and_not_under_round_up() -> None:
    x = one_block([500.0, 250.0])
    data, scales = lowbit.quantize(x, E4M3, scale_rule="ocp")
    assert scales.tolist() == [[127]] and data[0, 0].item() == 0x7E  # 500 -> 448
    data, scales = lowbit.quantize(x, E4M3, scale_rule="round_up")
    # ceil(log2(500 / 448)) = 1: scale 2, 500 / 2 = 250 -> 256 (0x78), 250 / 2 = 125 -> 128 (0x70)
    assert scales.tolist() == [[128]]
    assert data[0, :2].tolist() == [0x78, 0x70]


def test_e4m3_subnormals_round_half_even() -> None:
    x = one_block([448.0, 2.0**-9, 1.5 * 2.0**-9, 2.0**-10, 7.5 * 2.0**-9, 2.5 * 2.0**-9])
    data, _ = lowbit.quantize(x, E4M3)
    assert data[0, 1:6].tolist() == [0x01, 0x02, 0x00, 0x08, 0x02]


@pytest.mark.parametrize("rule", ["ocp", "round_up"])
def test_zero_block_gets_code_zero(rule: str) -> None:
    for q in (E4M3, E2M1):
        data, scales = lowbit.quantize(torch.zeros(2, 64), q, scale_rule=rule)
        assert scales.eq(0).all() and data.eq(0).all()
        assert lowbit.dequantize(data, q, scales=scales).eq(0).all()


@pytest.mark.parametrize(
    ("amax", "ocp", "round_up"),
    [(1.0, 119, 119), (56.0, 124, 124), (57.0, 124, 125), (448.0, 127, 127), (449.0, 127, 128), (2.0**-140, 0, 0)],
)
def test_e4m3_scale_codes(amax: float, ocp: int, round_up: int) -> None:
    x = one_block([amax, -amax / 3])
    assert lowbit.quantize(x, E4M3, scale_rule="ocp")[1].item() == ocp
    assert lowbit.quantize(x, E4M3, scale_rule="round_up")[1].item() == round_up


def test_e4m3_nan_element_decodes_to_nan() -> None:
    data = torch.full((1, 32), 0x38, dtype=torch.uint8)
    data[0, 3] = 0x7F
    data[0, 4] = 0xFF
    out = lowbit.dequantize(data, E4M3, scales=torch.tensor([[127]], dtype=torch.uint8))
    assert out[0, 0].item() == 1.0 and math.isnan(out[0, 3].item()) and math.isnan(out[0, 4].item())


# --- MXFP4 (E2M1, split and GGUF) ----------------------------------------------------------------


def test_e2m1_exact_codes_and_even_low_nibble() -> None:
    values = [6.0, 0.25, 0.75, 0.5, 5.0, 7.0, -1.5, 1.25, 2.5, 3.5]
    data, scales = lowbit.quantize(one_block(values), E2M1)
    assert scales.tolist() == [[127]]  # floor(log2 7) - 2 = 0
    codes = unpack_e2m1(data)
    # 6->7, .25->0 (tie to even), .75->1.0, .5->1, 5->4 (tie), 7->6 (saturate), -1.5, 1.25->1.0, 2.5->2, 3.5->4
    assert codes[:10] == [0x7, 0x0, 0x2, 0x1, 0x6, 0x7, 0xB, 0x2, 0x4, 0x6]
    assert data[0, 0].item() == 0x07  # element 0 low nibble, element 1 high nibble
    back = lowbit.dequantize(data, E2M1, scales=scales)[0, :10].tolist()
    assert back == [6.0, 0.0, 1.0, 0.5, 4.0, 6.0, -1.5, 1.0, 2.0, 4.0]


def test_e2m1_round_up_rule() -> None:
    data, scales = lowbit.quantize(one_block([7.0, 1.0]), E2M1, scale_rule="round_up")
    assert scales.item() == 128  # ceil(log2(7 / 6)) = 1
    assert unpack_e2m1(data)[:2] == [0x6, 0x1]  # 3.5 -> 4 (tie to even), 0.5
    assert lowbit.dequantize(data, E2M1, scales=scales)[0, :2].tolist() == [8.0, 1.0]


def test_gguf_mxfp4_layout_matches_split_values(rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((4, 128)).astype(np.float32))
    blocks, none = lowbit.quantize(x, QuantType.MXFP4)
    assert none is None and blocks.shape == (4, 4 * 17)
    data, scales = lowbit.quantize(x, E2M1)
    gguf_values = lowbit.dequantize(blocks, QuantType.MXFP4)
    split_values = lowbit.dequantize(data, E2M1, scales=scales)
    assert torch.equal(gguf_values, split_values)
    # GGUF: low nibble of byte j is element j, high nibble element j + 16
    first = blocks[0, 1:17]
    split_codes = unpack_e2m1(data[0, :16])
    assert [b & 0xF for b in first.tolist()] == split_codes[:16]
    assert [b >> 4 for b in first.tolist()] == split_codes[16:32]


def test_gguf_mxfp4_quantize_matches_ggml(rng: np.random.Generator) -> None:
    quants = gguf_module("gguf.quants")
    GGMLQuantizationType = gguf_module("gguf.constants").GGMLQuantizationType  # noqa: N806

    x = (rng.standard_normal((8, 256)) * rng.uniform(0.01, 10, (8, 1))).astype(np.float32)
    ref = quants.quantize(x, GGMLQuantizationType.MXFP4)
    got, _ = lowbit.quantize(torch.from_numpy(x), QuantType.MXFP4)
    assert np.array_equal(got.numpy(), ref)


# --- NaN / Inf policy -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("qtype", [E4M3, E2M1], ids=lambda t: t.type_name)
def test_split_mx_block_with_nan_or_inf_becomes_nan(bad: float, qtype: QuantType, rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((2, 64)).astype(np.float32))
    x[1, 40] = bad
    data, scales = lowbit.quantize(x, qtype)
    assert scales[1, 1].item() == 0xFF and scales[1, 0].item() != 0xFF and scales[0].ne(0xFF).all()
    out = lowbit.dequantize(data, qtype, scales=scales)
    assert torch.isnan(out[1, 32:]).all()
    assert torch.isfinite(out[1, :32]).all() and torch.isfinite(out[0]).all()


@pytest.mark.parametrize("qtype", [QuantType.MXFP4, QuantType.Q8_0, QuantType.Q8_1], ids=lambda t: t.type_name)
def test_gguf_quantizers_reject_non_finite_input(qtype: QuantType) -> None:
    x = torch.ones(2, 64)
    x[1, 5] = float("nan")
    with pytest.raises(ValueError, match=r"w: row 1 block 0 holds NaN or Inf"):
        lowbit.quantize(x, qtype)


# --- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("qtype", "bound"), [(E4M3, 0.04), (E2M1, 0.15)], ids=["mxfp8_e4m3", "mxfp4_split"])
@pytest.mark.parametrize("rule", ["ocp", "round_up"])
def test_round_trip_error(qtype: QuantType, bound: float, rule: str, rng: np.random.Generator) -> None:
    x = torch.from_numpy((rng.standard_normal((16, 512)) * rng.uniform(1e-3, 1e3, (16, 1))).astype(np.float32))
    data, scales = lowbit.quantize(x, qtype, scale_rule=rule)
    assert rel_err(lowbit.dequantize(data, qtype, scales=scales), x) < bound


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_quantize_accepts_half_inputs_as_their_float_values(dtype: torch.dtype, rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((3, 64)).astype(np.float32)).to(dtype)
    assert torch.equal(lowbit.quantize(x, E4M3)[0], lowbit.quantize(x.float(), E4M3)[0])


# --- Q8_0 / Q8_1 ------------------------------------------------------------------------------------


def test_q8_0_quantize_matches_ggml(rng: np.random.Generator) -> None:
    quants = gguf_module("gguf.quants")
    GGMLQuantizationType = gguf_module("gguf.constants").GGMLQuantizationType  # noqa: N806

    x = (rng.standard_normal((8, 256)) * 3).astype(np.float32)
    ref = quants.quantize(x, GGMLQuantizationType.Q8_0)
    got, _ = lowbit.quantize(torch.from_numpy(x), QuantType.Q8_0)
    assert np.array_equal(got.numpy(), ref)


def test_q8_1_holds_d_sum_and_the_q8_0_codes(rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((2, 64)).astype(np.float32))
    q81, _ = lowbit.quantize(x, QuantType.Q8_1)
    q80, _ = lowbit.quantize(x, QuantType.Q8_0)
    b81 = q81.reshape(-1, 36).numpy()
    b80 = q80.reshape(-1, 34).numpy()
    assert np.array_equal(b81[:, 0:2], b80[:, 0:2])  # d
    assert np.array_equal(b81[:, 4:], b80[:, 2:])  # qs
    # ggml: s = fp16(sum(q) * d) with d the float32 amax / 127, before d is rounded to fp16
    d = (x.reshape(-1, 32).abs().amax(dim=1) / 127).numpy()
    s = b81[:, 2:4].copy().view(np.float16).reshape(-1)
    qsum = b81[:, 4:].view(np.int8).astype(np.int32).sum(axis=1)
    assert np.array_equal(s, (qsum.astype(np.float32) * d).astype(np.float16))
