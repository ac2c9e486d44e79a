"""The GGUF compatibility ops (lowbit.compat, torch.ops.lowbit.ggml_*) replaying the calls a
server's GGUF layer makes: decode (ggml_mul_mat_vec_a8), prefill (ggml_mul_mat_a8), the
dequantize fallback and the embedding lookup (ggml_dequantize), against the CPU reference on the
decoded weights. CUDA variants skip without a GPU."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, random_weight, rel_err
from lowbit import QuantType, compat

try:  # gguf-py: ggml's reference decode, for the embedding test (the GPU machine may lack it)
    import gguf.quants as gguf_quants
    from gguf.constants import GGMLQuantizationType
except ImportError:
    gguf_quants = None

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
    ),
]
# a GGUF layer sends batches up to this size to the vector (MMVQ) op
MMVQ_MAX_BATCH = 8
# ||y - ref|| / ||ref||: the CPU multiplies the exact float32 decode; CUDA quantizes activations
# to int8 per 32 values up to 8 tokens (tests/python/test_cuda_kernels.py: MMVQ_INT8_BOUND), and
# the output is rounded to x's dtype
BOUND = {"cpu": 5e-3, "cuda": 3e-2}


def ggml_quant_sizes(type_id: int) -> tuple[int, int]:
    """(elements, bytes) of a block, as a server reads them from gguf.GGML_QUANT_SIZES."""
    return BLOCK[QuantType(type_id)]


def k_with_tail(qtype: QuantType) -> int:
    elems, _ = BLOCK[qtype]
    return 13 * 32 if elems == 32 else 3 * 256  # not a multiple of the larger tiles


def server_linear(x: torch.Tensor, qweight: torch.Tensor, qweight_type: int) -> torch.Tensor:
    """A server's GGUF linear layer, as sgl-kernel / vLLM users write it, with lowbit's names."""
    if x.shape[0] <= MMVQ_MAX_BATCH:
        return compat.ggml_mul_mat_vec_a8(qweight, x, qweight_type, qweight.shape[0])
    if compat.ggml_supports_iq_mmq() or qweight_type not in range(16, 30):
        return compat.ggml_mul_mat_a8(qweight, x, qweight_type, qweight.shape[0])
    block_size, type_size = ggml_quant_sizes(qweight_type)
    shape = (qweight.shape[0], qweight.shape[1] // type_size * block_size)
    weight = compat.ggml_dequantize(qweight, qweight_type, *shape, x.dtype)
    return x @ weight.T


def server_dequantized_linear(x: torch.Tensor, qweight: torch.Tensor, qweight_type: int) -> torch.Tensor:
    """The fallback a server keeps for types without a fused kernel: dequantize, then a GEMM."""
    block_size, type_size = ggml_quant_sizes(qweight_type)
    shape = (qweight.shape[0], qweight.shape[1] // type_size * block_size)
    weight = compat.ggml_dequantize(qweight, qweight_type, *shape, x.dtype)
    return x @ weight.T


def server_embedding(ids: torch.Tensor, qweight: torch.Tensor, qweight_type: int, dtype: torch.dtype) -> torch.Tensor:
    """A server's GGUF embedding: gather the rows, dequantize them as [hidden, tokens], view back."""
    block_size, type_size = ggml_quant_sizes(qweight_type)
    hidden = qweight.shape[1] // type_size * block_size
    flat = ids.flatten()
    rows = torch.index_select(qweight, 0, flat)
    return compat.ggml_dequantize(rows, qweight_type, hidden, flat.shape[0], dtype).view(*ids.shape, hidden)


def reference(x: torch.Tensor, qweight: torch.Tensor, qtype: QuantType) -> torch.Tensor:
    return x.cpu().double() @ lowbit.dequantize(qweight.cpu(), qtype).double().T


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qtype", lowbit.GGUF_WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_decode_then_prefill(device: str, qtype: QuantType, rng: np.random.Generator) -> None:
    k = k_with_tail(qtype)
    qweight, _ = random_weight(qtype, 37, k, rng, device=device)
    for tokens, dtype in ((1, torch.bfloat16), (3, torch.float16), (8, torch.float32), (45, torch.bfloat16)):
        x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(device, dtype)
        y = server_linear(x, qweight, int(qtype))
        assert y.shape == (tokens, 37) and y.dtype == dtype and y.device == x.device
        assert rel_err(y, reference(x, qweight, qtype)) < BOUND[device], (tokens, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qtype", [QuantType.IQ1_M, QuantType.IQ3_XXS, QuantType.Q5_0], ids=lambda t: t.type_name)
def test_dequantize_fallback_linear(device: str, qtype: QuantType, rng: np.random.Generator) -> None:
    k = k_with_tail(qtype)
    qweight, _ = random_weight(qtype, 29, k, rng, device=device)
    x = torch.from_numpy(rng.standard_normal((17, k)).astype(np.float32)).to(device, torch.float16)
    y = server_dequantized_linear(x, qweight, int(qtype))
    assert y.dtype == torch.float16
    assert rel_err(y, reference(x, qweight, qtype)) < BOUND[device]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qtype", lowbit.GGUF_WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_embedding_lookup_is_the_exact_decode(device: str, qtype: QuantType, rng: np.random.Generator) -> None:
    k = k_with_tail(qtype)
    table, _ = random_weight(qtype, 50, k, rng, device=device)
    ids = torch.from_numpy(rng.integers(0, 50, (3, 7))).to(device)
    got = server_embedding(ids, table, int(qtype), torch.float32)
    assert got.shape == (3, 7, k) and got.dtype == torch.float32
    rows = table.cpu()[ids.cpu().reshape(-1)]
    expected = lowbit.dequantize(rows, qtype).numpy()  # the CPU reference decode
    if gguf_quants is not None:  # which is bit-exact with ggml's (gguf-py)
        expected = gguf_quants.dequantize(rows.numpy(), GGMLQuantizationType(int(qtype))).astype(np.float32)
    assert np.array_equal(got.cpu().numpy().reshape(-1, k).view(np.uint32), expected.reshape(-1, k).view(np.uint32))
    half = server_embedding(ids, table, int(qtype), torch.bfloat16)
    assert torch.equal(half, got.to(torch.bfloat16))


def test_dequantize_defaults_to_float16_like_sgl_kernel(rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ4_XS, 6, 512, rng)
    out = torch.ops.lowbit.ggml_dequantize(w, int(QuantType.IQ4_XS), 6, 512, None)
    assert out.dtype == torch.float16 and out.shape == (6, 512)
    assert torch.equal(out, lowbit.dequantize(w, QuantType.IQ4_XS).to(torch.float16))
    # [m, n] is a reshape of the weights in row order
    flat = torch.ops.lowbit.ggml_dequantize(w, int(QuantType.IQ4_XS), 512, 6, torch.float32)
    assert torch.equal(flat.reshape(-1), lowbit.dequantize(w, QuantType.IQ4_XS).reshape(-1))


def test_supports_iq_mmq_and_type_query() -> None:
    assert compat.ggml_supports_iq_mmq() is True
    assert torch.ops.lowbit.ggml_supports_iq_mmq() is True
    assert all(compat.supports_ggml_type(int(t)) for t in lowbit.GGUF_WEIGHT_TYPES)
    assert not compat.supports_ggml_type(12)  # q4_k
    assert not compat.supports_ggml_type(int(QuantType.Q8_1))


@pytest.mark.parametrize("type_id", [12, 2, int(QuantType.Q8_1), int(QuantType.MXFP8_E4M3), 4242])
def test_unsupported_types_raise_with_sgl_kernels_wording(type_id: int) -> None:
    w = torch.randint(0, 256, (2, 34), dtype=torch.uint8)
    x = torch.randn(1, 32)
    with pytest.raises(RuntimeError, match=f"type: Unsupported GGUF dequantization type {type_id}"):
        torch.ops.lowbit.ggml_dequantize(w, type_id, 2, 32, torch.float16)
    with pytest.raises(RuntimeError, match=f"type: Unsupported GGUF MMVQ quantization type {type_id}"):
        compat.ggml_mul_mat_vec_a8(w, x, type_id, 2)
    with pytest.raises(RuntimeError, match=f"type: Unsupported GGUF MMQ quantization type {type_id}"):
        compat.ggml_mul_mat_a8(w, x, type_id, 2)


def test_bad_arguments_name_the_argument(rng: np.random.Generator) -> None:
    q = int(QuantType.Q8_0)
    w, _ = random_weight(QuantType.Q8_0, 4, 64, rng)
    x = torch.randn(2, 64)
    with pytest.raises(ValueError, match=r"row: 5 must equal W.shape\[0\] = 4"):
        compat.ggml_mul_mat_a8(w, x, q, 5)
    with pytest.raises(ValueError, match=r"X must have K = 64 columns"):
        compat.ggml_mul_mat_vec_a8(w, torch.randn(2, 32), q, 4)
    with pytest.raises(ValueError, match=r"X must be 2-D"):
        compat.ggml_mul_mat_a8(w, torch.randn(2, 1, 64), q, 4)
    with pytest.raises(ValueError, match=r"W must be uint8"):
        compat.ggml_mul_mat_a8(w.to(torch.int8), x, q, 4)
    with pytest.raises(ValueError, match=r"W: a row of 33 bytes is not a whole number of q8_0 blocks"):
        compat.ggml_dequantize(w[:, :33].contiguous(), q, 4, 32)
    with pytest.raises(ValueError, match=r"m, n: \[4, 32\] asks for 128 weights but W holds 256"):
        compat.ggml_dequantize(w, q, 4, 32)
    with pytest.raises(ValueError, match=r"M, N: .* must have positive dimensions"):
        compat.ggml_dequantize(w, q, 0, 64)
    with pytest.raises(ValueError, match=r"dtype must be torch.float16, torch.bfloat16 or torch.float32"):
        compat.ggml_dequantize(w, q, 4, 64, torch.int32)
    with pytest.raises(ValueError, match=r"X must be float32, bfloat16 or float16"):
        compat.ggml_mul_mat_a8(w, x.to(torch.float64), q, 4)


def test_opcheck_compat_ops(rng: np.random.Generator) -> None:
    q = int(QuantType.IQ3_S)
    w, _ = random_weight(QuantType.IQ3_S, 9, 512, rng)
    x = torch.from_numpy(rng.standard_normal((3, 512)).astype(np.float32))
    torch.library.opcheck(torch.ops.lowbit.ggml_dequantize.default, (w, q, 9, 512, torch.bfloat16))
    torch.library.opcheck(torch.ops.lowbit.ggml_mul_mat_vec_a8.default, (w, x, q, 9))
    torch.library.opcheck(torch.ops.lowbit.ggml_mul_mat_a8.default, (w, x, q, 9))
