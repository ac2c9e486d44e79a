// Layout conversions between the ways MX weights are stored: lowbit's split layout (elements +
// [rows, K/32] E8M0 scales), Ascend's paired scales ([rows, ceil(K/64), 2], what torch_npu's MX
// matmuls read) and GGUF's MXFP4 blocks (17 bytes: E8M0 byte, then 16 bytes of nibbles).
//
// Every function works on `rows` consecutive rows, so leading batch dims ([E, N, ...]) are simply
// folded into `rows`. Buffers are dense (row-major, no padding between rows). Bad arguments throw
// lowbit::Error naming the argument and the rule.
#pragma once

#include <cstdint>

namespace lowbit {

// E8M0 scales of one row of k MX elements: k / 32. Throws naming `arg` unless k is a positive
// multiple of 32 (split MX checkpoints hold whole 32-element blocks only).
int64_t mx_scales_per_row(int64_t k, const char* arg = "k");

// Pairs per row in Ascend's paired layout for `scales_per_row` E8M0 scales: ceil(scales_per_row / 2).
int64_t mx_scale_pairs_per_row(int64_t scales_per_row);

// scales [rows, S] -> paired [rows, ceil(S/2), 2]. Logical block j lands at [row, j / 2, j % 2];
// an odd S pads the last pair's second byte with 0x00, as npu_dynamic_mx_quant does.
void pair_mx_scales(const uint8_t* scales, uint8_t* paired, int64_t rows, int64_t scales_per_row);

// paired [rows, ceil(S/2), 2] -> scales [rows, S]. For odd S the padding byte of every row must be
// 0x00: a non-zero byte there means S (that is, K) was given wrong and a real scale would be lost.
void unpair_mx_scales(const uint8_t* paired, uint8_t* scales, int64_t rows, int64_t scales_per_row);

// GGUF MXFP4 blocks [rows, K/32 * 17] -> split MXFP4: elements [rows, K/2] (element 2i in the low
// nibble of byte i) and scales [rows, K/32]. GGUF keeps element j in the low nibble of qs[j] and
// element j + 16 in the high nibble, so the nibbles are re-ordered, not just copied.
void mxfp4_gguf_to_split(const uint8_t* blocks, uint8_t* elements, uint8_t* scales, int64_t rows, int64_t k);

// The inverse: split MXFP4 (elements [rows, K/2], scales [rows, K/32]) -> GGUF blocks [rows, K/32 * 17].
void mxfp4_split_to_gguf(const uint8_t* elements, const uint8_t* scales, uint8_t* blocks, int64_t rows, int64_t k);

}  // namespace lowbit
