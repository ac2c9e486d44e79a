// lowbit::QuantType: the weight and activation formats lowbit knows, numbered with ggml's type ids
// for the GGUF types and with ids above 1000 for lowbit's split MX layouts (not GGUF types).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lowbit {

enum class QuantType : int32_t {
  Q5_0 = 6,
  Q8_0 = 8,
  Q8_1 = 9,  // activation format only; never a weight type
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  MXFP4 = 39,  // GGUF MXFP4: E8M0 byte + 16 bytes, low nibble = element j, high = element j+16
  // lowbit's split MX layouts: elements tensor + separate E8M0 scale tensor [N, K/32].
  MXFP8_E4M3 = 1001,   // elements: E4M3 bytes [N, K]
  MXFP4_SPLIT = 1002,  // elements: E2M1 packed two per byte [N, K/2], even element in low nibble
};

// Static facts about one type, available at run time.
struct TypeInfo {
  QuantType type;
  const char* name;        // lower case, as ggml spells it (lowbit's own names for split types)
  int block_elems;         // elements sharing one block (K must be a multiple)
  int block_bytes;         // bytes of one block in the weight (elements) tensor
  bool split_scales;       // E8M0 scales live in a separate [N, K/32] tensor
  bool is_weight;          // false for activation-only formats (Q8_1)
  bool has_quantizer;      // lowbit::ref can produce it from float
  double bits_per_weight;  // including scales
};

// Every type lowbit knows, weight types first.
const std::vector<TypeInfo>& all_types();

// nullptr when `id` is not a known type id.
const TypeInfo* find_type(int64_t id);
const TypeInfo* find_type(std::string_view name);

// Throws lowbit::Error naming `arg` when `id` is unknown or not a weight type.
const TypeInfo& weight_type_info(int64_t id, const char* arg = "qtype");

const char* type_name(QuantType t);

}  // namespace lowbit
