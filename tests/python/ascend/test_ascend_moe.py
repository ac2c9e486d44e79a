"""MX MoE through the Ascend backend on the torch_npu emulator: the tensor-parallel op chain
(routing with fused MXFP8 quantization -> fused gate/up + SwiGLU + requant with a CUMSUM group list ->
down projection with a COUNT group list -> finalize), the swiglu limit outside the fused op, the
expert-parallel variant, offline checkpoints; outputs against lowbit's CPU reference."""

from __future__ import annotations

import logging

import lowbit
import lowbit.ascend as ascend
import pytest
import torch
from ascend_helpers import E2M1_REL, E4M3_REL, check_moe_tight, dequant, moe_reference, random_topk, rel_err, unpair
from lowbit import QuantType

E8M0, FP4 = 293, 296
ACT_BOUND = {QuantType.MXFP8_E4M3: E4M3_REL, QuantType.MXFP4_SPLIT: E2M1_REL, QuantType.MXFP4: E2M1_REL}


def _float_experts(trng: torch.Generator, experts: int, hidden: int, inter: int) -> tuple[torch.Tensor, torch.Tensor]:
    w13 = torch.randn(experts, 2 * inter, hidden, generator=trng) / hidden**0.5
    w2 = torch.randn(experts, hidden, inter, generator=trng) / inter**0.5
    return w13, w2


def _checkpoint(w13: torch.Tensor, w2: torch.Tensor, t13: QuantType, t2: QuantType):
    d13, s13 = lowbit.quantize(w13, t13)
    d2, s2 = lowbit.quantize(w2, t2)
    return d13, s13, d2, s2


def _moe_bound(t13: QuantType, t2: QuantType) -> float:
    """Against lowbit's reference on the same weights, two activations are quantized on the device:
    x (in w13's element type) and the SwiGLU output h (in w2's)."""
    return ACT_BOUND[t13] + ACT_BOUND[t2]


# ---- tensor-parallel path ----------------------------------------------------------------------------


def test_tp_mxfp8_chain_and_contracts(npu, trng) -> None:
    tokens, hidden, inter, experts, top_k = 7, 96, 64, 4, 2  # H/32 = 3 (odd): paired scales padded
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    moe = ascend.NpuMoE.from_checkpoint(d13, s13, d2, s2, w13_format="mxfp8")
    out = moe(npu.to(x), weights, ids)
    assert npu.ops() == [
        "npu_moe_init_routing_v2",
        "npu_grouped_matmul_swiglu_quant_v2",
        "npu_grouped_matmul",
        "npu_moe_finalize_routing",
    ]
    route, gate_up, down, fin = npu.state.calls
    rows = tokens * top_k
    assert route["quant_mode"] == 3 and route["expert_tokens_num_type"] == 1 and route["expert_tokens_num_flag"]
    assert (
        route["active_expert_range"] == [0, experts] and route["active_num"] == rows and route["expert_num"] == experts
    )
    assert route.info["expert_idx"].dtype == torch.int32
    routed_x, row_idx, counts, routed_scale = route.outputs
    assert routed_scale.shape == (rows, 4) and routed_scale.dtype == torch.float8_e8m0fnu  # CeilAlign(3, 2)
    # gate/up: the routed fp8 rows, the scale reshaped to [M, H/64, 2], the CUMSUM group list
    assert gate_up.info["x"].storage_ptr == routed_x.untyped_storage().data_ptr()
    assert gate_up.info["x_scale"].shape == (rows, 2, 2)
    assert gate_up.info["x_scale"].storage_ptr == routed_scale.untyped_storage().data_ptr()
    assert torch.equal(gate_up["group_list"], counts.cumsum(0)) and gate_up["group_list_type"] == 0
    assert gate_up.info["weight"][0].shape == (experts, hidden, 2 * inter) and gate_up.info["weight"][0].transposed
    assert gate_up.info["weight_scale"][0].shape == (experts, 2, 2 * inter, 2)
    assert gate_up["dequant_mode"] == 2 and gate_up["quant_mode"] == 2 and gate_up["dequant_dtype"] == torch.float32
    assert gate_up["quant_dtype"] == torch.float8_e4m3fn
    assert gate_up["weight_scale_dtype"] == E8M0 and gate_up["x_scale_dtype"] == E8M0
    h, h_scale = gate_up.outputs
    # down: the COUNT group list, the fused op's fp8 output and its e8m0 scale
    assert torch.equal(down["group_list"], counts) and down["group_list_type"] == 1
    assert down["split_item"] == 2 and down["group_type"] == 0 and down["output_dtype"] == torch.bfloat16
    assert down.info["x"][0].storage_ptr == h.untyped_storage().data_ptr()
    assert down.info["per_token_scale"][0].storage_ptr == h_scale.untyped_storage().data_ptr()
    assert down.info["weight"][0].shape == (experts, inter, hidden) and down.info["weight"][0].transposed
    assert down.info["scale"][0].shape == (experts, 1, hidden, 2)
    assert down["scale_dtype"] == E8M0 and down["per_token_scale_dtype"] == E8M0
    assert fin["drop_pad_mode"] == 2 and torch.equal(fin["expanded_src_to_dst_row"], row_idx)
    assert torch.equal(fin["scales"], weights.to(torch.bfloat16)) and torch.equal(fin["export_for_source_row"], ids)
    ref = lowbit.fused_moe(
        x.float(), d13, d2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    assert out.dtype == torch.bfloat16 and out.shape == (tokens, hidden)
    assert rel_err(out, ref) <= _moe_bound(QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    assert fin["scales"].dtype == torch.bfloat16  # the weights in the rows' dtype
    t8 = QuantType.MXFP8_E4M3
    check_moe_tight(npu, x, weights, ids, (d13, s13, t8), (d2, s2, t8), out)


@pytest.mark.parametrize(
    "t13, t2",
    [
        (QuantType.MXFP4_SPLIT, QuantType.MXFP4_SPLIT),
        (QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT),
        (QuantType.MXFP4_SPLIT, QuantType.MXFP8_E4M3),
    ],
)
def test_tp_mxfp4_and_mixed_types(npu, trng, t13: QuantType, t2: QuantType) -> None:
    tokens, hidden, inter, experts, top_k = 9, 64, 64, 3, 2
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, t13, t2)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    out = ascend.fused_moe(npu.to(x), d13, d2, weights, ids, w13_type=t13, w2_type=t2, w13_scales=s13, w2_scales=s2)
    fp4_in, fp4_mid = t13 == QuantType.MXFP4_SPLIT, t2 == QuantType.MXFP4_SPLIT
    expected = ["npu_moe_init_routing_v2"] + (["npu_dynamic_mx_quant"] if fp4_in else [])
    if not fp4_in and fp4_mid:  # FP8 in, FP4 out: the fused op cannot, so gate/up runs unfused
        assert npu.ops() == expected + [
            "npu_grouped_matmul",
            "npu_dynamic_mx_quant",
            "npu_grouped_matmul",
            "npu_moe_finalize_routing",
        ]
        down = npu.state.last("npu_grouped_matmul")
        assert npu.state.last("npu_dynamic_mx_quant")["dst_type"] == FP4 and down["x_dtype"] == FP4
        check_moe_tight(npu, x, weights, ids, (d13, s13, t13), (d2, s2, t2), out)
        return
    assert npu.ops() == expected + [
        "npu_grouped_matmul_swiglu_quant_v2",
        "npu_grouped_matmul",
        "npu_moe_finalize_routing",
    ]
    route = npu.state.last("npu_moe_init_routing_v2")
    gate_up = npu.state.last("npu_grouped_matmul_swiglu_quant_v2")
    down = npu.state.last("npu_grouped_matmul")
    assert route["quant_mode"] == (-1 if fp4_in else 3)
    if fp4_in:
        quant = npu.state.last("npu_dynamic_mx_quant")
        assert quant["dst_type"] == FP4 and quant["round_mode"] == "round"
        assert gate_up["x_dtype"] == FP4 and gate_up["weight_dtype"] == FP4
        assert gate_up.info["weight"][0].shape == (experts, hidden // 2, 2 * inter)  # packed along the stored K
    assert gate_up["quant_dtype"] == (FP4 if fp4_mid else torch.float8_e4m3fn)
    if fp4_mid:
        assert gate_up.info["x"].dtype == (torch.uint8 if fp4_in else torch.float8_e4m3fn)
        assert (
            down["x_dtype"] == FP4
            and down["weight_dtype"] == FP4
            and down.info["x"][0].shape == (tokens * top_k, inter // 2)
        )
    assert down["group_list_type"] == 1 and gate_up["group_list_type"] == 0
    ref = lowbit.fused_moe(x.float(), d13, d2, weights, ids, w13_type=t13, w2_type=t2, w13_scales=s13, w2_scales=s2)
    assert rel_err(out, ref) <= _moe_bound(t13, t2)
    check_moe_tight(npu, x, weights, ids, (d13, s13, t13), (d2, s2, t2), out)


def test_gguf_mxfp4_experts_convert_to_split(npu, trng) -> None:
    tokens, hidden, inter, experts, top_k = 5, 64, 64, 2, 2
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    g13, _ = lowbit.quantize(w13, QuantType.MXFP4)
    g2, _ = lowbit.quantize(w2, QuantType.MXFP4)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    out = ascend.fused_moe(npu.to(x), g13, g2, weights, ids, w13_type="mxfp4", w2_type="mxfp4")
    gate_up = npu.state.last("npu_grouped_matmul_swiglu_quant_v2")
    assert gate_up.info["weight"][0].dtype == torch.uint8 and gate_up.info["weight"][0].shape == (
        experts,
        hidden // 2,
        2 * inter,
    )
    ref = lowbit.fused_moe(x.float(), g13, g2, weights, ids, w13_type="mxfp4", w2_type="mxfp4")
    assert rel_err(out, ref) <= _moe_bound(QuantType.MXFP4, QuantType.MXFP4)


def test_tp_invalid_ids_contribute_zero(npu, trng) -> None:
    tokens, hidden, inter, experts, top_k = 6, 64, 64, 3, 2
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    ids[1, 0], ids[2, 1], ids[4] = -1, experts, torch.tensor([-1, 7], dtype=torch.int32)  # token 4: none valid
    out = ascend.fused_moe(
        npu.to(x), d13, d2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    fin = npu.state.last("npu_moe_finalize_routing")
    assert (fin["expanded_src_to_dst_row"] >= 0).all()  # finalize never sees an excluded row
    assert fin["scales"][1, 0] == 0 and fin["scales"][2, 1] == 0
    assert (out[4] == 0).all()
    t8 = QuantType.MXFP8_E4M3
    check_moe_tight(npu, x, weights, ids, (d13, s13, t8), (d2, s2, t8), out)
    ref = lowbit.fused_moe(
        x.float(), d13, d2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    assert rel_err(out, ref) <= _moe_bound(QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)


# ---- swiglu limit, unfused gate/up -------------------------------------------------------------------


def test_swiglu_clamps_gate_above_and_up_both_ways() -> None:
    gate_up = torch.tensor([[-5.0, 0.5, 5.0, -5.0, 0.5, 5.0]])
    got = ascend.swiglu(gate_up, limit=1.0)
    gate = torch.tensor([-5.0, 0.5, 1.0])  # gate <= limit only
    up = torch.tensor([-1.0, 0.5, 1.0])  # up in [-limit, limit]
    assert torch.allclose(got[0], torch.nn.functional.silu(gate) * up)


def test_swiglu_limit_runs_outside_the_fused_op(npu, trng) -> None:
    tokens, hidden, inter, experts, top_k, limit = 8, 96, 64, 3, 2, 0.6
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    moe = ascend.NpuMoE.from_checkpoint(d13, s13, d2, s2, w13_format="mxfp8", swiglu_limit=limit)
    assert "swiglu limit" in moe.unfused_reason
    out = moe(npu.to(x), weights, ids)
    assert npu.ops() == [
        "npu_moe_init_routing_v2",
        "npu_grouped_matmul",
        "npu_dynamic_mx_quant",
        "npu_grouped_matmul",
        "npu_moe_finalize_routing",
    ]
    gate_up_call, quant, down = npu.state.calls[1:4]
    assert gate_up_call["group_list_type"] == 1 and gate_up_call["output_dtype"] == torch.bfloat16
    assert gate_up_call.info["weight"][0].shape == (experts, hidden, 2 * inter)
    assert quant["dst_type"] == torch.float8_e4m3fn and quant.info["input"].shape == (tokens * top_k, inter)
    assert down["group_list_type"] == 1
    # the clamp happened: the bf16 GEMM output exceeds the limit, the SwiGLU input to the requant does not
    g = gate_up_call.outputs[0].float()
    assert (g[:, :inter] > limit).any() and (g[:, inter:].abs() > limit).any()
    w13_deq = dequant(d13, s13, QuantType.MXFP8_E4M3)
    w2_deq = dequant(d2, s2, QuantType.MXFP8_E4M3)
    ref = moe_reference(x, w13_deq, w2_deq, weights, ids, limit=limit)
    unclamped = moe_reference(x, w13_deq, w2_deq, weights, ids)
    bound = 2 * E4M3_REL
    assert rel_err(out, ref) <= bound
    assert rel_err(unclamped, ref) > 2 * bound  # the limit matters at this size, so the check above means something
    t8 = QuantType.MXFP8_E4M3
    check_moe_tight(npu, x, weights, ids, (d13, s13, t8), (d2, s2, t8), out, limit=limit)


def test_intermediate_not_multiple_of_64_uses_the_unfused_form(npu, trng, caplog) -> None:
    tokens, hidden, inter, experts, top_k = 4, 64, 96, 2, 1  # 2I = 192: not a multiple of 128
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    moe = ascend.NpuMoE.from_checkpoint(d13, s13, d2, s2, w13_format="mxfp8")
    assert "2I = 192 is not a multiple of 128" in moe.unfused_reason
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    out = moe(npu.to(x), weights, ids)
    assert "npu_grouped_matmul_swiglu_quant_v2" not in npu.ops() and npu.ops().count("npu_grouped_matmul") == 2
    ref = lowbit.fused_moe(
        x.float(), d13, d2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    assert rel_err(out, ref) <= _moe_bound(QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)


# ---- online weights ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["w8a8_mxfp8", "w4a4_mxfp4"])
def test_online_experts_are_quantized_on_the_device(npu, trng, scheme: str) -> None:
    tokens, hidden, inter, experts, top_k = 6, 96, 64, 3, 2
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    moe = ascend.NpuMoE.from_float(w13.to(torch.bfloat16), w2.to(torch.bfloat16), scheme=scheme)
    fp4 = scheme == "w4a4_mxfp4"
    q13, q2 = npu.state.calls[:2]
    for q, shape in ((q13, (experts, 2 * inter, hidden)), (q2, (experts, hidden, inter))):
        assert q["dst_type"] == (FP4 if fp4 else torch.float8_e4m3fn) and q.info["input"].shape == shape
        assert q["axis"] == -1  # along K, the stored last dim
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    out = moe(npu.to(x), weights, ids)
    rel = E2M1_REL if fp4 else E4M3_REL
    ref = moe_reference(x, w13, w2, weights, ids)
    assert rel_err(out, ref) <= 4 * rel  # x, w13, h and w2 quantized
    assert moe.w13.weight.untyped_storage().data_ptr() == q13.outputs[0].untyped_storage().data_ptr()
    qtype = QuantType.MXFP4_SPLIT if fp4 else QuantType.MXFP8_E4M3
    (e13, p13), (e2, p2) = q13.outputs, q2.outputs
    check_moe_tight(npu, x, weights, ids, (e13, unpair(p13, hidden), qtype), (e2, unpair(p2, inter), qtype), out)


def test_online_experts_with_misaligned_k_fall_back_to_bf16(npu, trng, caplog) -> None:
    tokens, hidden, inter, experts, top_k = 5, 80, 64, 2, 2  # H = 80: K/32 = 2.5 for w13
    w13, w2 = _float_experts(trng, experts, hidden, inter)
    with caplog.at_level(logging.WARNING, logger="lowbit.ascend"):
        moe = ascend.NpuMoE.from_float(w13.to(torch.bfloat16), w2.to(torch.bfloat16), name="model.layers.3.mlp.experts")
    assert "K = 80 is not a multiple of 32" in moe.fallback_reason
    assert "model.layers.3.mlp.experts" in caplog.records[-1].getMessage()
    assert npu.ops() == []
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, experts, top_k, trng)
    out = moe(npu.to(x), weights, ids)
    assert npu.ops() == [
        "npu_moe_init_routing_v2",
        "npu_grouped_matmul",
        "npu_grouped_matmul",
        "npu_moe_finalize_routing",
    ]
    assert npu.state.calls[0]["quant_mode"] == -1 and npu.state.calls[1].info["x"][0].dtype == torch.bfloat16
    ref = moe_reference(x, w13.to(torch.bfloat16), w2.to(torch.bfloat16), weights, ids)
    assert rel_err(out, ref) <= 2.0**-6  # bf16 weights, activations and intermediate


# ---- expert-parallel variant -------------------------------------------------------------------------


@pytest.mark.parametrize("t13", [QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT])
def test_ep_dispatches_bf16_and_quantizes_inside(npu, trng, t13: QuantType) -> None:
    tokens, hidden, inter, global_experts, top_k = 10, 96, 64, 8, 2
    start, end = 2, 5
    w13, w2 = _float_experts(trng, end - start, hidden, inter)
    d13, s13, d2, s2 = _checkpoint(w13, w2, t13, t13)
    x = torch.randn(tokens, hidden, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(tokens, global_experts, top_k, trng)
    ids[0] = torch.tensor([0, 7], dtype=torch.int32)  # token 0: no local expert
    ids[1, 1] = -1
    out = ascend.fused_moe(
        npu.to(x),
        d13,
        d2,
        weights,
        ids,
        w13_type=t13,
        w2_type=t13,
        w13_scales=s13,
        w2_scales=s2,
        expert_range=(start, end),
        num_global_experts=global_experts,
    )
    assert npu.ops() == [
        "npu_moe_init_routing_v2",
        "npu_dynamic_mx_quant",
        "npu_grouped_matmul_swiglu_quant_v2",
        "npu_grouped_matmul",
    ]
    route, quant, gate_up, down = npu.state.calls
    assert route["quant_mode"] == -1 and route["active_expert_range"] == [start, end]
    routed_x, row_idx, counts, _ = route.outputs
    assert routed_x.dtype == torch.bfloat16 and counts.shape == (end - start,)
    assert quant.info["input"].storage_ptr == routed_x.untyped_storage().data_ptr()
    assert quant["dst_type"] == (FP4 if t13 == QuantType.MXFP4_SPLIT else torch.float8_e4m3fn)
    assert torch.equal(gate_up["group_list"], counts.cumsum(0)) and torch.equal(down["group_list"], counts)
    local_pairs = int(((ids >= start) & (ids < end)).sum())
    # rows of other ranks' experts are not computed; the invalid id runs on a local expert with weight 0
    assert int(counts.sum()) == local_pairs + 1 < tokens * top_k
    assert (out[0] == 0).all()
    assert route["expert_num"] == global_experts  # the global count: every id lies below it
    check_moe_tight(npu, x, weights, ids, (d13, s13, t13), (d2, s2, t13), out, expert_range=(start, end))
    ref = lowbit.fused_moe(
        x.float(),
        d13,
        d2,
        weights,
        ids,
        w13_type=t13,
        w2_type=t13,
        w13_scales=s13,
        w2_scales=s2,
        expert_range=(start, end),
    )
    assert rel_err(out, ref) <= _moe_bound(t13, t13)


def test_ep_weights_must_match_the_range(npu, trng) -> None:
    w13, w2 = _float_experts(trng, 3, 64, 64)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    x = torch.randn(2, 64, generator=trng).to(torch.bfloat16)
    ids, weights = random_topk(2, 3, 1, trng)
    with pytest.raises(ValueError, match="expert_range: must be"):
        ascend.fused_moe(
            npu.to(x),
            d13,
            d2,
            weights,
            ids,
            w13_type="mxfp8_e4m3",
            w2_type="mxfp8_e4m3",
            w13_scales=s13,
            w2_scales=s2,
            expert_range=(0, 4),
        )
    with pytest.raises(ValueError, match="activation: the Ascend MoE path fuses SwiGLU"):
        ascend.fused_moe(
            npu.to(x),
            d13,
            d2,
            weights,
            ids,
            w13_type="mxfp8_e4m3",
            w2_type="mxfp8_e4m3",
            w13_scales=s13,
            w2_scales=s2,
            activation="gelu",
        )
    with pytest.raises(ValueError, match="w2_scale: must be"):
        ascend.NpuMoE.from_checkpoint(d13, s13, d2, s2[:, :, :1], w13_format="mxfp8")


def test_fp32_and_fp16_activations_keep_their_dtype(npu, trng) -> None:
    w13, w2 = _float_experts(trng, 2, 64, 64)
    d13, s13, d2, s2 = _checkpoint(w13, w2, QuantType.MXFP8_E4M3, QuantType.MXFP8_E4M3)
    ids, weights = random_topk(3, 2, 2, trng)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(3, 64, generator=trng).to(dtype)
        out = ascend.fused_moe(
            npu.to(x), d13, d2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
        )
        assert out.dtype == dtype and out.shape == (3, 64) and torch.isfinite(out).all()
        t8 = QuantType.MXFP8_E4M3
        check_moe_tight(npu, x.to(torch.bfloat16), weights, ids, (d13, s13, t8), (d2, s2, t8), out)
        npu.reset_log()
