#include "lowbit/quant_type.h"

#include <string>

#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit {
namespace {

template <class Traits>
TypeInfo weight_info(bool has_quantizer) {
  const double scale_bits = Traits::kSplitScales ? 8.0 : 0.0;
  return TypeInfo{
      Traits::kType,       Traits::kName,        Traits::kBlockElems,
      Traits::kBlockBytes, Traits::kSplitScales,
      /*is_weight=*/true,  has_quantizer,        (8.0 * Traits::kBlockBytes + scale_bits) / Traits::kBlockElems};
}

bool has_quantizer(QuantType t) {
  return t == QuantType::Q8_0 || t == QuantType::MXFP4 || t == QuantType::MXFP8_E4M3 || t == QuantType::MXFP4_SPLIT;
}

std::vector<TypeInfo> make_types() {
  std::vector<TypeInfo> types;
#define LOWBIT_ADD_TYPE(Name) \
  types.push_back(weight_info<FormatTraits<QuantType::Name>>(has_quantizer(QuantType::Name)));
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_ADD_TYPE)
#undef LOWBIT_ADD_TYPE
  types.push_back(TypeInfo{QuantType::Q8_1, "q8_1", 32, static_cast<int>(sizeof(BlockQ8_1)), false,
                           /*is_weight=*/false, /*has_quantizer=*/true, 9.0});
  return types;
}

}  // namespace

const std::vector<TypeInfo>& all_types() {
  static const std::vector<TypeInfo> types = make_types();
  return types;
}

const TypeInfo* find_type(int64_t id) {
  for (const TypeInfo& info : all_types())
    if (static_cast<int64_t>(info.type) == id) return &info;
  return nullptr;
}

const TypeInfo* find_type(std::string_view name) {
  for (const TypeInfo& info : all_types())
    if (name == info.name) return &info;
  return nullptr;
}

const TypeInfo& weight_type_info(int64_t id, const char* arg) {
  const TypeInfo* info = find_type(id);
  LOWBIT_CHECK(info != nullptr, arg, ": ", id, " is not a quant type id lowbit knows");
  LOWBIT_CHECK(info->is_weight, arg, ": ", info->name, " is an activation format, not a weight type");
  return *info;
}

const char* type_name(QuantType t) {
  const TypeInfo* info = find_type(static_cast<int64_t>(t));
  return info ? info->name : "unknown";
}

}  // namespace lowbit
