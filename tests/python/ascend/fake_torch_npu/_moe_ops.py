"""npu_moe_init_routing_v2, npu_grouped_matmul, npu_grouped_matmul_swiglu_quant_v2 and
npu_moe_finalize_routing (ascend-npu-ops.md sections 2, 3a, 3b, 7).

Rows an op does not compute (past the group list's total, or routing rows of excluded experts) are
filled with NaN (NaN codes for FP8, 0xFF for E8M0 and packed FP4) so a caller that reads them is caught.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import _mx
from ._dtypes import FP4X2, check_e8m0_tensor, dtype_name, require_dtype
from ._nz import NZ_FORMATS
from ._operands import (
    element_kind,
    lhs_block_codes,
    lhs_values,
    mx_matmul,
    output_dtype_of,
    rhs_block_codes,
    rhs_values,
)
from ._state import STATE

MAX_GROUPS = 1024
# Sources of the checks below (repository, path, commit):
_ROUTING_DOC = "Ascend/op-plugin docs/en/custom_APIs/torch_npu/torch_npu-npu_moe_init_routing_v2.md @6ffd6e22"
_FINALIZE_DOC = "Ascend/op-plugin docs/en/custom_APIs/torch_npu/torch_npu-npu_moe_finalize_routing.md @6ffd6e22"
_GMM_SWIGLU_MASTER = "Ascend/op-plugin op_plugin/ops/opapi/GroupedMatmulSwigluQuantV2NpuOpapi.cpp @517f2e7d"
_GMM_SWIGLU_260 = "Ascend/op-plugin op_plugin/ops/opapi/GroupedMatmulSwigluQuantV2NpuOpapi.cpp @6ffd6e22 (26.0.0)"
_UNPERMUTE_TEST = "Ascend/op-plugin test/test_custom_ops/test_npu_moe_token_permute_and_unpermute.py @517f2e7d"
E8M0_CODE, FP4_CODE, HIFLOAT8_CODE = 293, 296, 290


def _poison_(t: torch.Tensor, start: int) -> torch.Tensor:
    """Fill rows [start:] with NaN (floats), the FP8 NaN code, or 0xFF bytes."""
    if start >= t.shape[0]:
        return t
    if t.dtype in (torch.float32, torch.bfloat16, torch.float16):
        t[start:] = torch.nan
    else:
        t[start:].view(torch.uint8).fill_(0x7F if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else 0xFF)
    return t


def _group_bounds(group_list: torch.Tensor, group_list_type: int, groups: int, rows: int) -> list[tuple[int, int]]:
    """[start, end) rows of each group; type 0 = cumsum, 1 = count (the only types emulated)."""
    if group_list.dtype != torch.int64 or group_list.dim() != 1:
        raise ValueError(f"group_list: must be int64 [E], got {group_list.dtype} {tuple(group_list.shape)}")
    if group_list.shape[0] != groups:
        raise ValueError(f"group_list: has {group_list.shape[0]} entries for {groups} expert weights")
    if groups > MAX_GROUPS:
        raise ValueError(f"group_list: at most {MAX_GROUPS} groups, got {groups}")
    values = group_list.tolist()
    if group_list_type == 0:
        ends = values
        if any(b < a for a, b in zip([0] + ends[:-1], ends, strict=True)) or ends[0] < 0:
            raise ValueError(f"group_list (group_list_type=0, cumsum): must be non-decreasing from >= 0, got {values}")
    elif group_list_type == 1:
        if any(v < 0 for v in values):
            raise ValueError(f"group_list (group_list_type=1, count): counts must be >= 0, got {values}")
        ends = torch.tensor(values, dtype=torch.int64).cumsum(0).tolist()
    else:
        raise NotImplementedError(f"group_list_type={group_list_type} is not emulated")
    # The doc says the total equals M; SGLang's EP routing leaves rows of excluded experts at the end,
    # so a smaller total is accepted and the rows past it are not computed [M].
    if ends and ends[-1] > rows:
        raise ValueError(f"group_list: covers {ends[-1]} rows but x has only {rows}")
    starts = [0] + ends[:-1]
    return list(zip(starts, ends, strict=True))


# ---- routing ------------------------------------------------------------------------------------


def npu_moe_init_routing_v2(
    x: torch.Tensor,
    expert_idx: torch.Tensor,
    *,
    scale: torch.Tensor | None = None,
    offset: torch.Tensor | None = None,
    active_num: int = -1,
    expert_capacity: int = -1,
    expert_num: int = -1,
    drop_pad_mode: int = 0,
    expert_tokens_num_type: int = 0,
    expert_tokens_num_flag: bool = False,
    quant_mode: int = -1,
    active_expert_range: Sequence[int] = (),
    row_idx_type: int = 0,
    x_dtype: object = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dropless routing: stable sort of the flattened (t, j) pairs by expert id; ids outside
    active_expert_range go last and are not counted. Returns (expanded_x [M, H], expanded_row_idx int32
    [T*k], expert tokens int64 [e - s] (count or cumsum), expanded_scale). quant_mode -1 keeps x's dtype;
    2 / 3 quantize rows to MXFP8 (e5m2 / e4m3fn) with a float8_e8m0fnu scale [M, CeilAlign(ceil(H/32), 2)]."""
    STATE.record(
        "npu_moe_init_routing_v2",
        dict(
            x=x,
            expert_idx=expert_idx,
            scale=scale,
            offset=offset,
            active_num=active_num,
            expert_capacity=expert_capacity,
            expert_num=expert_num,
            drop_pad_mode=drop_pad_mode,
            expert_tokens_num_type=expert_tokens_num_type,
            expert_tokens_num_flag=expert_tokens_num_flag,
            quant_mode=quant_mode,
            active_expert_range=list(active_expert_range),
            row_idx_type=row_idx_type,
            x_dtype=x_dtype,
        ),
    )
    if x.dim() != 2 or x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"x: must be [T, H] bfloat16/float16/float32, got {x.dtype} {tuple(x.shape)}")
    if expert_idx.dtype != torch.int32 or expert_idx.dim() != 2 or expert_idx.shape[0] != x.shape[0]:
        raise ValueError(
            f"expert_idx: must be int32 [T, k] with T = {x.shape[0]}, got {expert_idx.dtype} {tuple(expert_idx.shape)}"
        )
    if drop_pad_mode != 0:
        raise NotImplementedError("drop_pad_mode: only 0 (dropless) is emulated")
    if quant_mode not in (-1, 2, 3):
        raise NotImplementedError(f"quant_mode={quant_mode} is not emulated (only -1, 2, 3)")
    if scale is not None or offset is not None:
        raise NotImplementedError("scale / offset belong to the int8 quant modes, which are not emulated")
    if len(active_expert_range) == 0:
        if expert_num <= 0:
            raise ValueError("expert_num: must be > 0 when active_expert_range is empty")
        start, end = 0, expert_num
    elif len(active_expert_range) == 2:
        start, end = int(active_expert_range[0]), int(active_expert_range[1])
        if not 0 <= start < end:
            raise ValueError(f"active_expert_range: must be [s, e) with 0 <= s < e, got {list(active_expert_range)}")
        if end > expert_num:
            raise ValueError(
                f"active_expert_range: its end {end} must be <= expert_num = {expert_num} ({_ROUTING_DOC})"
            )
    else:
        raise ValueError(f"active_expert_range: must be [] or [s, e], got {list(active_expert_range)}")
    if expert_tokens_num_flag and expert_tokens_num_type not in (0, 1):
        raise NotImplementedError("expert_tokens_num_type: only 0 (cumsum) and 1 (count) are emulated")

    tokens, k = expert_idx.shape
    flat = expert_idx.reshape(-1).to(torch.int64)
    if expert_num > 0 and flat.numel() and int(flat.max()) > expert_num:
        raise ValueError(
            f"expert_idx: holds id {int(flat.max())} > expert_num = {expert_num}; the expert ID must be less than "
            f"or equal to the expert count ({_ROUTING_DOC})"
        )
    valid = (flat >= start) & (flat < end)
    sort_key = torch.where(valid, flat, torch.iinfo(torch.int64).max)
    order = torch.sort(sort_key, stable=True).indices  # dst -> src
    n_valid = int(valid.sum())
    rows = tokens * k if active_num in (-1, 0) else min(active_num, tokens * k)
    computed = min(n_valid, rows)

    dst_of_src = torch.full((tokens * k,), -1, dtype=torch.int32)
    kept = order[:computed]
    dst_of_src[kept] = torch.arange(computed, dtype=torch.int32)
    if row_idx_type == 0:
        expanded_row_idx = dst_of_src
    elif row_idx_type == 1:
        expanded_row_idx = torch.full((tokens * k,), -1, dtype=torch.int32)
        expanded_row_idx[:computed] = kept.to(torch.int32)
    else:
        raise ValueError(f"row_idx_type: must be 0 (gather) or 1 (scatter), got {row_idx_type}")

    source_rows = x[kept // k]  # [computed, H]
    hidden = x.shape[1]
    if quant_mode == -1:
        expanded_x = _poison_(torch.empty(rows, hidden, dtype=x.dtype), computed)
        expanded_x[:computed] = source_rows
        expanded_scale = torch.empty(0, dtype=torch.float32)
    else:
        element = "float8_e4m3fn" if quant_mode == 3 else "float8_e5m2"
        values, codes = _mx.mx_quantize_last(source_rows, element, rule=STATE.init_routing_scale_rule)
        blocks = -(-hidden // 32)
        width = blocks + blocks % 2  # CeilAlign(ceil(H/32), 2)
        expanded_x = _poison_(torch.empty(rows, hidden, dtype=getattr(torch, element)), computed)
        expanded_x[:computed] = values
        scale_bytes = _poison_(torch.zeros(rows, width, dtype=torch.uint8), computed)
        scale_bytes[:computed, :blocks] = codes
        scale_bytes[:computed, blocks:] = 0
        expanded_scale = scale_bytes.view(torch.float8_e8m0fnu)

    counts = torch.bincount(flat[valid] - start, minlength=end - start)[: end - start].to(torch.int64)
    if expert_tokens_num_flag:
        tokens_out = counts if expert_tokens_num_type == 1 else counts.cumsum(0)
    else:
        tokens_out = torch.empty(0, dtype=torch.int64)
    outputs = (expanded_x, expanded_row_idx, tokens_out, expanded_scale)
    STATE.calls[-1].outputs = outputs
    return outputs


def npu_moe_finalize_routing(
    expanded_permuted_rows: torch.Tensor,
    skip1: torch.Tensor | None,
    skip2: torch.Tensor | None,
    bias: torch.Tensor | None,
    scales: torch.Tensor | None,
    expanded_src_to_dst_row: torch.Tensor,
    export_for_source_row: torch.Tensor | None,
    drop_pad_mode: int = 0,
) -> torch.Tensor:
    """out[t] = skip1[t] + skip2[t] + sum_j scales[t, j] * (y[idx] + bias[expert[t, j]]) with idx =
    expanded_src_to_dst_row[t*k + j] (drop_pad_mode 2, row-major) or [j*T + t] (mode 0).
    Modes 1 / 3 (drop-pad, and the EP > 1 mode) are not established, so not emulated; nor is a
    negative row index (what mode 2 does with it is not documented)."""
    STATE.record(
        "npu_moe_finalize_routing",
        dict(
            expanded_permuted_rows=expanded_permuted_rows,
            skip1=skip1,
            skip2=skip2,
            bias=bias,
            scales=scales,
            expanded_src_to_dst_row=expanded_src_to_dst_row,
            export_for_source_row=export_for_source_row,
            drop_pad_mode=drop_pad_mode,
        ),
    )
    if drop_pad_mode not in (0, 2):
        raise NotImplementedError(f"drop_pad_mode={drop_pad_mode}: only 0 and 2 (dropless) are emulated")
    if scales is None or scales.dim() != 2:
        raise ValueError("scales: must be the [T, k] top-k weights")
    rows_dtype = expanded_permuted_rows.dtype
    # torch_npu doc: scales' dtype "must be identical to that of expanded_permuted_rows"; the V2 kernel doc
    # (ops-transformer moe-finalize-routing-v2) also allows bf16 rows with float32 scales.
    if scales.dtype != rows_dtype and not (rows_dtype == torch.bfloat16 and scales.dtype == torch.float32):
        raise ValueError(
            f"scales: must have the rows' dtype {rows_dtype} (or float32 with bf16 rows), got {scales.dtype} "
            f"({_FINALIZE_DOC})"
        )
    tokens, k = scales.shape
    idx = expanded_src_to_dst_row.to(torch.int64)
    if idx.shape != (tokens * k,):
        raise ValueError(f"expanded_src_to_dst_row: must be [T*k] = [{tokens * k}], got {tuple(idx.shape)}")
    if bool((idx < 0).any()):
        raise ValueError(
            "expanded_src_to_dst_row: holds -1 (an excluded expert); mode 2's handling of it is not documented"
        )
    idx = idx.view(tokens, k) if drop_pad_mode == 2 else idx.view(k, tokens).t()
    y = expanded_permuted_rows.to(torch.float32)
    gathered = y[idx]  # [T, k, H]
    if bias is not None:
        if export_for_source_row is None:
            raise ValueError("export_for_source_row: needed to pick each row's expert bias")
        gathered = gathered + bias.to(torch.float32)[export_for_source_row.to(torch.int64)]
    out = (gathered * scales.to(torch.float32).unsqueeze(-1)).sum(dim=1)
    for skip in (skip1, skip2):
        if skip is not None:
            out = out + skip.to(torch.float32)
    result = out.to(expanded_permuted_rows.dtype)
    STATE.calls[-1].outputs = result
    return result


def npu_moe_token_unpermute(
    permuted_tokens: torch.Tensor,
    sorted_indices: torch.Tensor,
    probs: torch.Tensor | None = None,
    padded_mode: bool = False,
    restore_shape: Sequence[int] | None = None,
) -> torch.Tensor:
    """out[t] = sum_j probs[t, j] * permuted_tokens[sorted_indices[t*k + j]] (the gather form init-routing's
    expanded_row_idx has; _UNPERMUTE_TEST's reference applies argsort to get the scatter form). Without
    probs, k = 1. Padded mode and negative indices are not emulated (undocumented)."""
    STATE.record(
        "npu_moe_token_unpermute",
        dict(
            permuted_tokens=permuted_tokens,
            sorted_indices=sorted_indices,
            probs=probs,
            padded_mode=padded_mode,
            restore_shape=restore_shape,
        ),
    )
    if padded_mode or restore_shape is not None:
        raise NotImplementedError("padded_mode / restore_shape are not emulated")
    if permuted_tokens.dim() != 2 or permuted_tokens.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(
            f"permuted_tokens: must be float [M, H], got {permuted_tokens.dtype} {tuple(permuted_tokens.shape)}"
        )
    if sorted_indices.dtype != torch.int32 or sorted_indices.dim() != 1:
        raise ValueError(
            f"sorted_indices: must be int32 [T*k], got {sorted_indices.dtype} {tuple(sorted_indices.shape)}"
        )
    if probs is not None and (probs.dim() != 2 or probs.dtype != permuted_tokens.dtype):
        raise ValueError(
            f"probs: must be [T, k] in permuted_tokens' dtype {permuted_tokens.dtype} ({_UNPERMUTE_TEST}), "
            f"got {probs.dtype} {tuple(probs.shape)}"
        )
    top_k = 1 if probs is None else probs.shape[1]
    idx = sorted_indices.to(torch.int64)
    if idx.numel() % top_k or (probs is not None and idx.numel() != probs.numel()):
        raise ValueError(f"sorted_indices: {idx.numel()} entries do not match probs {tuple(probs.shape)}")
    if bool((idx < 0).any()) or bool((idx >= permuted_tokens.shape[0]).any()):
        raise ValueError(
            "sorted_indices: every entry must index a row of permuted_tokens (negative ones are undocumented)"
        )
    rows = permuted_tokens.to(torch.float32)[idx].view(-1, top_k, permuted_tokens.shape[1])
    if probs is not None:
        rows = rows * probs.to(torch.float32).unsqueeze(-1)
    out = rows.sum(dim=1).to(permuted_tokens.dtype)
    STATE.calls[-1].outputs = out
    return out


# ---- grouped matmuls ----------------------------------------------------------------------------


def _expert_weight_values(weight: torch.Tensor, kind: str) -> tuple[torch.Tensor, bool]:
    if weight.dim() != 3:
        raise ValueError(f"weight: must be one [E, K, N] tensor (logical), got shape {tuple(weight.shape)}")
    return rhs_values(weight, kind)


def npu_grouped_matmul(
    x: Sequence[torch.Tensor],
    weight: Sequence[torch.Tensor],
    *,
    bias: Sequence[torch.Tensor] | None = None,
    scale: Sequence[torch.Tensor] | None = None,
    offset: Sequence[torch.Tensor] | None = None,
    antiquant_scale: Sequence[torch.Tensor] | None = None,
    antiquant_offset: Sequence[torch.Tensor] | None = None,
    per_token_scale: Sequence[torch.Tensor] | None = None,
    group_list: torch.Tensor | None = None,
    activation_input: Sequence[torch.Tensor] | None = None,
    activation_quant_scale: Sequence[torch.Tensor] | None = None,
    activation_quant_offset: Sequence[torch.Tensor] | None = None,
    split_item: int | None = 0,
    group_type: int | None = None,
    group_list_type: int | None = 0,
    act_type: int | None = 0,
    tuning_config: Sequence[int] | None = None,
    output_dtype: object = None,
    x_dtype: object = None,
    weight_dtype: object = None,
    scale_dtype: object = None,
    per_token_scale_dtype: object = None,
) -> list[torch.Tensor]:
    """The MoE call form: one x [M, K], one weight logical [E, K, N] (a transpose view of [E, N, K] or
    plain), split_item 2/3, group_type 0 -> [y [M, N]]. Modes: plain float; MX full quant (scale=[w_s],
    per_token_scale=[x_s]); W4A8 (antiquant_scale=[w_s], FP8 x, FP4 weight). MX weight scales are
    logical [E, ceil(K/64), N, 2]."""
    STATE.record(
        "npu_grouped_matmul",
        dict(
            x=list(x),
            weight=list(weight),
            bias=bias,
            scale=scale,
            offset=offset,
            antiquant_scale=antiquant_scale,
            antiquant_offset=antiquant_offset,
            per_token_scale=per_token_scale,
            group_list=group_list,
            split_item=split_item,
            group_type=group_type,
            group_list_type=group_list_type,
            act_type=act_type,
            output_dtype=output_dtype,
            x_dtype=x_dtype,
            weight_dtype=weight_dtype,
            scale_dtype=scale_dtype,
            per_token_scale_dtype=per_token_scale_dtype,
        ),
    )
    if len(x) != 1 or len(weight) != 1:
        raise NotImplementedError("only the MoE form (one x, one [E, K, N] weight) is emulated")
    if split_item not in (2, 3) or group_type != 0:
        raise ValueError(
            f"split_item / group_type: the MoE form needs split_item 2 or 3 and group_type 0, "
            f"got {split_item}, {group_type}"
        )
    if group_list is None:
        raise ValueError("group_list: required in the MoE form")
    if any(
        a is not None
        for a in (bias, offset, antiquant_offset, activation_input, activation_quant_scale, activation_quant_offset)
    ) or act_type not in (0, None):
        raise NotImplementedError("bias / offsets / fused activations are not emulated")
    xt, wt = x[0], weight[0]
    if xt.dim() != 2:
        raise ValueError(f"x[0]: must be [M, K], got {tuple(xt.shape)}")
    if STATE.format_of(wt) in NZ_FORMATS and not (
        wt.dtype == torch.float8_e4m3fn or dtype_name(weight_dtype, "weight_dtype") == FP4X2
    ):
        raise ValueError("weight: FRACTAL_NZ is accepted only for float8_e4m3fn or declared FP4 weights")
    x_kind = element_kind(xt, x_dtype, "x[0]", "x_dtype")
    w_kind = element_kind(wt, weight_dtype, "weight[0]", "weight_dtype")
    xv = lhs_values(xt, x_kind)
    wv, _ = _expert_weight_values(wt, w_kind)
    experts, k, n = wv.shape
    rows = xv.shape[0]
    if xv.shape[1] != k:
        raise ValueError(f"x[0] / weight[0]: inner dims differ (K = {xv.shape[1]} from x, {k} from the weight)")
    bounds = _group_bounds(group_list, 0 if group_list_type is None else group_list_type, experts, rows)

    plain = x_kind in ("bfloat16", "float16", "float32")
    if plain:
        if w_kind != x_kind or scale is not None or per_token_scale is not None or antiquant_scale is not None:
            raise ValueError("plain grouped matmul: x and weight share a float dtype and take no scales")
        out_dtype = output_dtype_of(output_dtype, "output_dtype", ("bfloat16", "float16", "float32"), default=x_kind)
    else:
        if per_token_scale is None or len(per_token_scale) != 1:
            raise ValueError("per_token_scale: MX modes need [x_scale [M, ceil(K/64), 2]]")
        check_e8m0_tensor(per_token_scale[0], per_token_scale_dtype, "per_token_scale[0]", "per_token_scale_dtype")
        w4a8 = x_kind != FP4X2 and w_kind == FP4X2
        if w4a8:
            if scale is not None or antiquant_scale is None or len(antiquant_scale) != 1:
                raise ValueError("W4A8 (FP8 x, FP4 weight): pass scale=None and antiquant_scale=[w_scale]")
            if dtype_name(x_dtype, "x_dtype") != "float8_e4m3fn":
                raise ValueError("x_dtype: W4A8 needs x_dtype=torch.float8_e4m3fn")
            w_scale = antiquant_scale[0]
            check_e8m0_tensor(w_scale, None, "antiquant_scale[0]", "antiquant_scale dtype", byte_auto_wraps=True)
        else:
            if x_kind == FP4X2 and w_kind != FP4X2:
                raise ValueError("x is FP4 but the weight is not")
            if antiquant_scale is not None or scale is None or len(scale) != 1:
                raise ValueError(
                    "MX full quant: pass scale=[w_scale] and per_token_scale=[x_scale], no antiquant_scale"
                )
            w_scale = scale[0]
            check_e8m0_tensor(w_scale, scale_dtype, "scale[0]", "scale_dtype")
        if FP4X2 in (x_kind, w_kind) and k <= 2:
            raise ValueError(f"FP4 rejects K = {k}")
        out_dtype = output_dtype_of(output_dtype, "output_dtype", ("bfloat16", "float16", "float32"))
        x_codes = lhs_block_codes(per_token_scale[0], rows, k, "per_token_scale[0]")
        w_codes = rhs_block_codes(w_scale, (experts,), k, n, "scale[0]" if scale is not None else "antiquant_scale[0]")

    y = torch.empty(rows, n, dtype=torch.float32)
    for e, (start, end) in enumerate(bounds):
        if end == start:
            continue
        if plain:
            y[start:end] = xv[start:end].to(torch.float32) @ wv[e].to(torch.float32)
        else:
            y[start:end] = mx_matmul(xv[start:end], x_codes[start:end], wv[e], w_codes[e])
    out = _poison_(y.to(out_dtype), bounds[-1][1] if bounds else 0)
    STATE.calls[-1].outputs = [out]
    return [out]


def _allocated_out_columns(fp4_input: bool, fp4_output: bool, n: int) -> int:
    """The output width the op allocates for a transposed weight of logical width n. Master: [m, n/4]
    for FP4 input and FP4 output, else [m, n/2]. 26.0.0: the FP4-input answer of the FIRST call in the
    process is kept (``static const bool mxfp4_input``), so a later call of the other family is sized for
    the first one."""
    if STATE.op_plugin_branch == "26.0.0":
        if STATE.gmm_swiglu_mxfp4_input_latched is None:
            STATE.gmm_swiglu_mxfp4_input_latched = fp4_input
        fp4_input = STATE.gmm_swiglu_mxfp4_input_latched
    elif STATE.op_plugin_branch != "master":
        raise ValueError(f"STATE.op_plugin_branch: 'master' or '26.0.0', got {STATE.op_plugin_branch!r}")
    return n // 4 if fp4_input and fp4_output else n // 2


def npu_grouped_matmul_swiglu_quant_v2(
    x: torch.Tensor,
    weight: Sequence[torch.Tensor],
    weight_scale: Sequence[torch.Tensor],
    x_scale: torch.Tensor,
    group_list: torch.Tensor,
    *,
    smooth_scale: torch.Tensor | None = None,
    weight_assist_matrix: Sequence[torch.Tensor] | None = None,
    bias: torch.Tensor | None = None,
    dequant_mode: int | None = 0,
    dequant_dtype: object = 0,
    quant_mode: int | None = 0,
    quant_dtype: object = 1,
    group_list_type: int | None = 0,
    tuning_config: Sequence[int] | None = None,
    x_dtype: object = None,
    weight_dtype: object = None,
    weight_scale_dtype: object = None,
    x_scale_dtype: object = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MX mode (dequant_mode=2, quant_mode=2): C = grouped (x @ w) with both MX scales, A, B = halves of C
    (A first), S = silu(A) * B, requantized to quant_dtype per 32 along n/2. Returns (out [m, n/2] FP8, or
    uint8 [m, n/4] for FP4; out_scale float8_e8m0fnu [m, ceil((n/2)/64), 2]). No clamp argument exists."""
    STATE.record(
        "npu_grouped_matmul_swiglu_quant_v2",
        dict(
            x=x,
            weight=list(weight),
            weight_scale=list(weight_scale),
            x_scale=x_scale,
            group_list=group_list,
            smooth_scale=smooth_scale,
            weight_assist_matrix=weight_assist_matrix,
            bias=bias,
            dequant_mode=dequant_mode,
            dequant_dtype=dequant_dtype,
            quant_mode=quant_mode,
            quant_dtype=quant_dtype,
            group_list_type=group_list_type,
            x_dtype=x_dtype,
            weight_dtype=weight_dtype,
            weight_scale_dtype=weight_scale_dtype,
            x_scale_dtype=x_scale_dtype,
        ),
    )
    if dequant_mode != 2 or quant_mode != 2:
        raise NotImplementedError(
            f"only the MX mode (dequant_mode=2, quant_mode=2) is emulated, got {dequant_mode}, {quant_mode}"
        )
    if smooth_scale is not None or weight_assist_matrix is not None or bias is not None:
        raise NotImplementedError("smooth_scale / weight_assist_matrix / bias are not part of the MX mode")
    require_dtype(dequant_dtype, "dequant_dtype", ("float32",))
    out_element = require_dtype(quant_dtype, "quant_dtype", ("float8_e4m3fn", "float8_e5m2", FP4X2))
    if len(weight) != 1 or len(weight_scale) != 1:
        raise NotImplementedError("only one [e, k, n] weight and one scale tensor are emulated")
    # The op compares these with the integer codes (both branches): a torch.dtype arrives as a ScalarType
    # number (float8_e8m0fnu = 44, float4_e2m1fn_x2 = 45) and is rejected.
    for name, value, allowed in (
        ("weight_scale_dtype", weight_scale_dtype, (E8M0_CODE,)),
        ("x_scale_dtype", x_scale_dtype, (E8M0_CODE,)),
        ("x_dtype", x_dtype, (FP4_CODE, HIFLOAT8_CODE)),
        ("weight_dtype", weight_dtype, (FP4_CODE, HIFLOAT8_CODE)),
    ):
        if value is not None and (isinstance(value, (bool, torch.dtype)) or value not in allowed):
            raise ValueError(f"{name}: only supports the codes {allowed} or None, got {value!r} ({_GMM_SWIGLU_MASTER})")
    if (x_dtype is None) != (weight_dtype is None):
        raise ValueError(f"x_dtype / weight_dtype: both given or both None ({_GMM_SWIGLU_MASTER})")
    wt, ws = weight[0], weight_scale[0]
    check_e8m0_tensor(ws, weight_scale_dtype, "weight_scale[0]", "weight_scale_dtype")
    check_e8m0_tensor(x_scale, x_scale_dtype, "x_scale", "x_scale_dtype")
    x_kind = element_kind(x, x_dtype, "x", "x_dtype")
    w_kind = element_kind(wt, weight_dtype, "weight[0]", "weight_dtype")
    if x_kind not in ("float8_e4m3fn", "float8_e5m2", FP4X2) or (x_kind == FP4X2) != (w_kind == FP4X2):
        raise ValueError(f"x / weight: MX mode needs FP8 x FP8 or FP4 x FP4, got {x_kind} and {w_kind}")
    if x_kind != FP4X2 and out_element == FP4X2:
        raise ValueError(
            "quant_dtype: FP4 output from FP8 input is not supported: the op sizes the output [m, n/2] for "
            f"non-FP4 input whatever quant_dtype says ({_GMM_SWIGLU_MASTER})"
        )
    if STATE.format_of(wt) in NZ_FORMATS and wt.dtype != torch.float8_e4m3fn:
        raise ValueError("weight[0]: FRACTAL_NZ is allowed only for float8_e4m3fn")
    xv = lhs_values(x, x_kind)
    wv, _ = _expert_weight_values(wt, w_kind)
    experts, k, n = wv.shape
    rows = xv.shape[0]
    if xv.shape[1] != k:
        raise ValueError(f"x / weight[0]: inner dims differ (k = {xv.shape[1]} vs {k})")
    if n % 128:
        raise ValueError(f"weight[0]: n = {n} must be a multiple of 128 in MX mode")
    if x_kind == FP4X2 and (k % 2 or k == 2):
        raise ValueError(f"FP4 needs k even and k != 2, got {k}")
    bounds = _group_bounds(group_list, 0 if group_list_type is None else group_list_type, experts, rows)
    x_codes = lhs_block_codes(x_scale, rows, k, "x_scale")
    w_codes = rhs_block_codes(ws, (experts,), k, n, "weight_scale[0]")

    half = n // 2
    activated = torch.zeros(rows, half, dtype=torch.float32)
    for e, (start, end) in enumerate(bounds):
        if end == start:
            continue
        c = mx_matmul(xv[start:end], x_codes[start:end], wv[e], w_codes[e])
        a, b = c[:, :half], c[:, half:]
        activated[start:end] = torch.nn.functional.silu(a) * b
    values, codes = _mx.mx_quantize_last(activated, out_element, rule=STATE.swiglu_requant_scale_rule)
    out = _mx.pack_fp4(values) if out_element == FP4X2 else values
    out_scale = _mx.pair_last(codes).contiguous()
    done = bounds[-1][1] if bounds else 0
    out = _poison_(out, done)
    allocated = _allocated_out_columns(x_kind == FP4X2, out_element == FP4X2, n)
    if allocated != out.shape[1]:
        # The kernel writes its rows densely from the start of a buffer of the wrong size.
        wrong = torch.full((rows, allocated), 0xFF, dtype=torch.uint8)
        flat = out.reshape(-1).view(torch.uint8)
        wrong.view(-1)[: min(flat.numel(), wrong.numel())] = flat[: wrong.numel()]
        out = wrong
    outputs = (out, _poison_(out_scale, done).view(torch.float8_e8m0fnu))
    STATE.calls[-1].outputs = outputs
    return outputs
