"""The torch_npu emulator against the facts it was written from (ascend-npu-ops.md), and against lowbit's
independent MX quantizer. These pin the emulator down before it is trusted to judge the backend."""

from __future__ import annotations

import math

import fake_torch_npu as tnpu
import lowbit
import pytest
import torch
from ascend_helpers import dequant
from fake_torch_npu import _nz
from lowbit import QuantType


def _ocp_code(amax: float, emax: int) -> int:
    """OCP floor rule from Python floats: floor(log2 amax) - emax + 127 (math.frexp: amax = m 2^e, m in [0.5, 1))."""
    if amax == 0:
        return 0
    return max(math.frexp(amax)[1] - 1 - emax, -127) + 127


def test_dynamic_mx_quant_pairs_scales_and_pads_odd_block_counts(npu, trng) -> None:
    x = torch.randn(6, 160, generator=trng).to(torch.bfloat16) * 3  # K/32 = 5 blocks: odd
    y, s = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    assert y.dtype == torch.float8_e4m3fn and y.shape == x.shape
    assert s.dtype == torch.uint8 and s.shape == (6, 3, 2)  # [N, ceil(K/64), 2]
    assert (s[:, 2, 1] == 0).all()  # the padding of the odd block count
    for n in range(6):
        for j in range(5):
            amax = float(x[n, 32 * j : 32 * j + 32].float().abs().max())
            assert int(s[n, j // 2, j % 2]) == _ocp_code(amax, 8)
    y4, s4 = tnpu.npu_dynamic_mx_quant(x, dst_type=296, round_mode="round")
    assert y4.dtype == torch.uint8 and y4.shape == (6, 80) and s4.shape == (6, 3, 2)  # FP4: last dim halved


def test_ocp_rule_saturates_and_handles_zero_inf(npu) -> None:
    x = torch.zeros(4, 32, dtype=torch.float32)
    x[0, 0], x[0, 1] = 500.0, -3.0  # floor(log2 500) = 8 = emax: scale 1, 500 saturates to 448
    x[1, 0] = 1.0  # scale 2^-8, element 256
    x[3, 5] = float("inf")
    y, s = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    codes = s[:, 0, 0].tolist()
    assert codes == [127, 119, 0, 0xFF]
    assert float(y[0, 0].float()) == 448.0 and float(y[0, 1].float()) == -3.0
    assert float(y[1, 0].float()) == 256.0
    assert (y[2].float() == 0).all() and (y[3].float() == 0).all()  # zero block; NaN scale gives zero elements


def test_fp4_rounding_modes_and_nibble_order(npu) -> None:
    # amax 6 -> scale code 127 (2^0); 2.5 and 5 are ties on the E2M1 grid.
    row = torch.tensor([0.5, 1.0, 2.5, 5.0, -2.5, 7.0] + [0.0] * 26, dtype=torch.float32).unsqueeze(0)
    row[0, 6] = 6.0
    y_rint, s = tnpu.npu_dynamic_mx_quant(row, dst_type=296, round_mode="rint")
    y_round, _ = tnpu.npu_dynamic_mx_quant(row, dst_type=296, round_mode="round")
    assert int(s[0, 0, 0]) == 127
    # Codes: 0.5 -> 1, 1 -> 2, 2 -> 4, 3 -> 5, 4 -> 6, 6 -> 7; sign 0x8. Even element in the low nibble.
    assert int(y_rint[0, 0]) == 0x21
    assert int(y_rint[0, 1]) == 0x64 and int(y_round[0, 1]) == 0x75  # 2.5 -> 2 | 3, 5 -> 4 | 6
    assert int(y_rint[0, 2]) == 0x7C and int(y_round[0, 2]) == 0x7D  # -2.5 -> -2 | -3; 7 saturates to 6


def test_non_last_axis_interleaves_pairs_of_row_blocks(npu, trng) -> None:
    x = torch.randn(160, 3, generator=trng).to(torch.bfloat16)
    y, s = tnpu.npu_dynamic_mx_quant(x, axis=0, dst_type=torch.float8_e4m3fn)
    assert y.shape == (160, 3) and s.shape == (3, 3, 2)  # [ceil(M/64), N, 2]
    for i in range(3):
        for t in range(2):
            block = 2 * i + t
            for n in range(3):
                expected = (
                    0 if block >= 5 else _ocp_code(float(x[32 * block : 32 * block + 32, n].float().abs().max()), 8)
                )
                assert int(s[i, n, t]) == expected


def test_emulator_quantizers_agree_with_lowbits(npu, trng) -> None:
    """Two independent implementations of OCP MX agree: scale codes bit for bit, element values exactly
    (bytes too, except the sign of a zero: the torch cast keeps -0, lowbit writes +0)."""
    x = torch.randn(16, 256, generator=trng) * torch.logspace(-30, 30, 256, base=2.0)
    x = x.to(torch.bfloat16).to(torch.float32)
    y8, s8 = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    d8, ls8 = lowbit.quantize(x, QuantType.MXFP8_E4M3)
    assert torch.equal(s8.reshape(16, -1), ls8)
    differ = y8.view(torch.uint8) != d8
    assert (y8.view(torch.uint8)[differ] == 0x80).all() and (d8[differ] == 0).all()
    assert torch.equal(dequant(y8, s8.reshape(16, -1), QuantType.MXFP8_E4M3), dequant(d8, ls8, QuantType.MXFP8_E4M3))
    y4, s4 = tnpu.npu_dynamic_mx_quant(x, dst_type=296, round_mode="rint")
    d4, ls4 = lowbit.quantize(x, QuantType.MXFP4_SPLIT)
    assert torch.equal(s4.reshape(16, -1), ls4)
    assert torch.equal(dequant(y4, s4.reshape(16, -1), QuantType.MXFP4_SPLIT), dequant(d4, ls4, QuantType.MXFP4_SPLIT))


@pytest.mark.parametrize("rule, expected", [("round_scale", [127, 128, 126, 0]), ("ocp_floor", [127, 127, 126, 0])])
def test_init_routing_mxfp8_scale_rule_is_selectable(npu, rule: str, expected: list[int]) -> None:
    """amax 448 / 500 / 200 / 0: RoundScale (ceil(log2(amax / 448))) and the OCP floor rule differ at 500."""
    npu.state.init_routing_scale_rule = rule
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    x[0, 3], x[1, 40], x[2, 7] = 448.0, 500.0, 200.0
    ids = torch.arange(4, dtype=torch.int32).unsqueeze(1)
    ex, _, _, es = tnpu.npu_moe_init_routing_v2(x, ids, active_num=4, expert_num=4, quant_mode=3)
    assert ex.dtype == torch.float8_e4m3fn and es.dtype == torch.float8_e8m0fnu and es.shape == (4, 2)
    codes = es.view(torch.uint8)
    assert [int(codes[r].max()) for r in range(4)] == expected
    if rule == "ocp_floor":
        assert float(ex[1, 40].float()) == 448.0  # saturated
    else:
        assert float(ex[1, 40].float()) == 256.0  # 500 / 2 = 250 -> 256 on the E4M3 grid
    if rule == "round_scale":  # lowbit's round_up rule (ceil(log2(amax / max))) is the same RoundScale
        _, ls = lowbit.quantize(x.float(), QuantType.MXFP8_E4M3, scale_rule="round_up")
        assert [int(ls[r].max()) for r in range(4)] == expected


def test_init_routing_sorts_stably_and_excludes_out_of_range_experts(npu) -> None:
    x = torch.arange(4 * 32, dtype=torch.float32).reshape(4, 32).to(torch.bfloat16)
    ids = torch.tensor([[2, 0], [1, 2], [0, 5], [2, 1]], dtype=torch.int32)
    ex, row_idx, counts, _ = tnpu.npu_moe_init_routing_v2(
        x,
        ids,
        active_num=8,
        expert_num=6,
        expert_tokens_num_type=1,
        expert_tokens_num_flag=True,
        active_expert_range=[0, 3],
    )
    # flattened src = t*k + j: ids 2 0 1 2 0 5 2 1 -> stable by id: 0:(1,4) 1:(2,7) 2:(0,3,6); 5 excluded
    assert row_idx.tolist() == [4, 0, 2, 5, 1, -1, 6, 3]
    assert counts.tolist() == [2, 2, 3] and counts.dtype == torch.int64
    assert torch.equal(ex[0], x[0]) and torch.equal(ex[6], x[3])  # dst 0 <- src 1 (token 0), dst 6 <- src 6 (token 3)
    assert torch.isnan(ex[7].float()).all()  # the excluded row is not computed
    _, scatter, cumsum, _ = tnpu.npu_moe_init_routing_v2(
        x,
        ids,
        expert_num=6,
        expert_tokens_num_type=0,
        expert_tokens_num_flag=True,
        row_idx_type=1,
        active_expert_range=[0, 3],
    )
    assert scatter.tolist()[:7] == [1, 4, 2, 7, 0, 3, 6] and cumsum.tolist() == [2, 4, 7]


def test_dtype_arguments_accept_both_spellings(npu, trng) -> None:
    x = torch.randn(4, 64, generator=trng).to(torch.bfloat16)
    w = torch.randn(8, 64, generator=trng).to(torch.bfloat16)
    xq, xs = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    wq, ws = tnpu.npu_dynamic_mx_quant(w, dst_type=292)  # torch_npu's code for float8_e4m3fn
    outs = []
    for spelling in (293, torch.float8_e8m0fnu):
        outs.append(
            tnpu.npu_quant_matmul(
                xq,
                wq.t(),
                ws.transpose(0, 1),
                scale_dtype=spelling,
                pertoken_scale=xs,
                pertoken_scale_dtype=spelling,
                output_dtype=torch.bfloat16,
                group_sizes=[1, 1, 32],
            )
        )
    # e8m0 tensors need no dtype argument; uint8 ones do
    outs.append(
        tnpu.npu_quant_matmul(
            xq,
            wq.t(),
            ws.transpose(0, 1).view(torch.float8_e8m0fnu),
            pertoken_scale=xs.view(torch.float8_e8m0fnu),
            output_dtype=15,
            group_sizes=[1, 1, 32],
        )
    )
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    with pytest.raises(ValueError, match="pertoken_scale is uint8 but pertoken_scale_dtype was not given"):
        tnpu.npu_quant_matmul(
            xq,
            wq.t(),
            ws.transpose(0, 1),
            scale_dtype=293,
            pertoken_scale=xs,
            output_dtype=torch.bfloat16,
            group_sizes=[1, 1, 32],
        )
    x4, s4 = tnpu.npu_dynamic_mx_quant(x, dst_type=296)
    w4, t4 = tnpu.npu_dynamic_mx_quant(w, dst_type=296)
    with pytest.raises(ValueError, match="x1_dtype=296"):
        tnpu.npu_quant_matmul(
            x4,
            w4.t(),
            t4.transpose(0, 1),
            scale_dtype=293,
            pertoken_scale=s4,
            pertoken_scale_dtype=293,
            output_dtype=torch.bfloat16,
            group_sizes=[1, 1, 32],
            x2_dtype=296,
        )


def test_nz_tiles_follow_the_tile_rule_and_views_keep_the_format(npu, trng) -> None:
    t = torch.randint(0, 255, (37, 70), dtype=torch.uint8, generator=trng)
    tiles = _nz.nd_to_nz(t, 32)
    assert tiles.shape == (3, 3, 16, 32)  # [ceil(C/32), ceil(R/16), 16, 32]
    for r, c in [(0, 0), (17, 33), (36, 69), (15, 31)]:
        assert tiles[c // 32, r // 16, r % 16, c % 32] == t[r, c]
    assert torch.equal(_nz.nz_to_nd(tiles, 37, 70), t)
    nz = tnpu.npu_format_cast(t, 29)
    assert tnpu.get_npu_format(nz) == 29 and tnpu.get_npu_format(nz.t()) == 29
    assert tnpu.get_npu_format(nz.view(torch.int8)) == 29
    assert tnpu.get_npu_format(nz.t().contiguous()) == 2 and tnpu.get_npu_format(t) == 2
    cast_view = tnpu.npu_format_cast(t.t(), 29)  # Ascend 950: a view is cast as its logical (ND) values
    assert tnpu.get_npu_format(cast_view) == 29 and not npu.state.calls[-1].args["skipped"]
    assert cast_view.is_contiguous() and torch.equal(cast_view, t.t())  # NZ of [70, 37], not a transpose view
    npu.state.soc_version = 223  # the 910B path skips the cast of a view (IsViewTensor)
    skipped = tnpu.npu_format_cast(t.t(), 29)
    assert tnpu.get_npu_format(skipped) == 2 and npu.state.calls[-1].args["skipped"]


def test_grouped_matmul_reads_cumsum_and_count_lists(npu, trng) -> None:
    x = torch.randn(10, 64, generator=trng).to(torch.bfloat16)
    w = torch.randn(3, 128, 64, generator=trng).to(torch.bfloat16)
    xq, xs = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    wq, ws = tnpu.npu_dynamic_mx_quant(w, dst_type=torch.float8_e4m3fn)
    counts = torch.tensor([3, 0, 5], dtype=torch.int64)  # 8 of 10 rows
    kwargs = dict(
        scale=[ws.transpose(1, 2)],
        per_token_scale=[xs],
        scale_dtype=293,
        per_token_scale_dtype=293,
        split_item=2,
        group_type=0,
        output_dtype=torch.bfloat16,
    )
    by_count = tnpu.npu_grouped_matmul([xq], [wq.transpose(1, 2)], group_list=counts, group_list_type=1, **kwargs)[0]
    by_cumsum = tnpu.npu_grouped_matmul(
        [xq], [wq.transpose(1, 2)], group_list=counts.cumsum(0), group_list_type=0, **kwargs
    )[0]
    assert torch.equal(by_count[:8], by_cumsum[:8]) and torch.isnan(by_count[8:].float()).all()
    with pytest.raises(ValueError, match="cumsum"):  # a count list read as cumsum is not monotonic
        tnpu.npu_grouped_matmul([xq], [wq.transpose(1, 2)], group_list=counts, group_list_type=0, **kwargs)
    # group 2 (rows 3..8) uses expert 2: compare with a per-expert quant matmul
    single = tnpu.npu_quant_matmul(
        xq[3:8],
        wq[2].t(),
        ws[2].transpose(0, 1),
        scale_dtype=293,
        pertoken_scale=xs[3:8],
        pertoken_scale_dtype=293,
        output_dtype=torch.bfloat16,
        group_sizes=[1, 1, 32],
    )
    assert torch.equal(by_count[3:8], single)


def test_swiglu_quant_v2_activates_the_first_half(npu, trng) -> None:
    x = torch.randn(6, 64, generator=trng).to(torch.bfloat16)
    w = torch.randn(2, 256, 64, generator=trng).to(torch.bfloat16) / 8
    xq, xs = tnpu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    wq, ws = tnpu.npu_dynamic_mx_quant(w, dst_type=torch.float8_e4m3fn)
    counts = torch.tensor([2, 4], dtype=torch.int64)
    h, hs = tnpu.npu_grouped_matmul_swiglu_quant_v2(
        xq,
        [wq.transpose(1, 2)],
        [ws.transpose(1, 2)],
        xs,
        counts.cumsum(0),
        dequant_mode=2,
        quant_mode=2,
        dequant_dtype=torch.float32,
        quant_dtype=torch.float8_e4m3fn,
        weight_scale_dtype=293,
        x_scale_dtype=293,
    )
    assert h.shape == (6, 128) and hs.shape == (6, 2, 2) and hs.dtype == torch.float8_e8m0fnu
    c = tnpu.npu_grouped_matmul(
        [xq],
        [wq.transpose(1, 2)],
        scale=[ws.transpose(1, 2)],
        per_token_scale=[xs],
        scale_dtype=293,
        per_token_scale_dtype=293,
        split_item=2,
        group_type=0,
        group_list=counts,
        group_list_type=1,
        output_dtype=torch.float32,
    )[0].double()
    expected = torch.nn.functional.silu(c[:, :128]) * c[:, 128:]
    got = dequant(h, hs.view(torch.uint8).reshape(6, -1), QuantType.MXFP8_E4M3)
    block_max = expected.abs().reshape(6, 4, 32).amax(-1).repeat_interleave(32, -1)
    assert ((got - expected).abs() <= 2.0**-3 * block_max + 1e-6).all()  # one E4M3 requant step
