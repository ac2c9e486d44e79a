// Uses the installed lowbit: quantizes a row to Q8_0, decodes it with the CPU reference, asks the
// dispatcher and the capability report, and checks the round trip. Exit code 0 means it all works.
#include <cmath>
#include <cstdio>
#include <vector>

#include "lowbit/capabilities.h"
#include "lowbit/cpu.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/weights.h"

int main() {
  const int64_t k = 96;  // three Q8_0 blocks
  std::vector<float> x(k);
  for (int64_t i = 0; i < k; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  std::vector<uint8_t> blocks(static_cast<size_t>(lowbit::row_bytes(lowbit::QuantType::Q8_0, k)));
  lowbit::cpu::quantize(lowbit::QuantType::Q8_0, x.data(), 1, k, lowbit::ScaleRule::kOcpFloor, blocks.data(), nullptr);
  std::vector<float> back(k);
  lowbit::WeightView view;
  view.data = blocks.data();
  view.row_stride = static_cast<int64_t>(blocks.size());
  lowbit::cpu::dequantize(lowbit::QuantType::Q8_0, view, 1, k, back.data(), lowbit::FloatType::F32, k);
  double worst = 0.0;
  for (int64_t i = 0; i < k; ++i) worst = std::fmax(worst, std::fabs(back[i] - x[i]));

  bool rejected = false;
  try {
    lowbit::select_dense(lowbit::QuantType::IQ4_NL, 1, 64, 33, lowbit::DeviceFacts{});
  } catch (const lowbit::Error&) {
    rejected = true;
  }
  const lowbit::DenseChoice choice = lowbit::select_dense(lowbit::QuantType::IQ4_XS, 1, 4096, 4096, {});
  const lowbit::Capabilities caps = lowbit::capabilities();
  bool q8_0_listed = false;
  for (const lowbit::TypeCapability& t : caps.types)
    q8_0_listed =
        q8_0_listed || (t.info->type == lowbit::QuantType::Q8_0 && t.kernels.cpu_reference && t.usable.cpu_reference);
  std::printf("lowbit %s: q8_0 round trip max error %.4f; cpu kernel %s; %zu types; CUDA compiled %s\n",
              caps.version.c_str(), worst, lowbit::dense_kernel_name(choice.kernel), caps.types.size(),
              caps.cuda_compiled ? "yes" : "no");
  const bool ok =
      worst <= 3.0 / 127.0 && rejected && choice.kernel == lowbit::DenseKernel::kCpuReference && q8_0_listed;
  std::printf("%s\n", ok ? "consumer OK" : "consumer FAILED");
  return ok ? 0 : 1;
}
