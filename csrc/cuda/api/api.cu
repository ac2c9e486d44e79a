// lowbit's CUDA API (include/lowbit/cuda.h): argument checks, the plan from the device's facts,
// then the per-type launchers of the plan's kernels.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "cuda/api/api_support.h"
#include "cuda/dequant/dequant_launch.h"
#include "cuda/mmq/mmq_launch.h"
#include "cuda/mmvq/mmvq_args.h"
#include "lowbit/cuda.h"
#include "lowbit/cuda_mmq.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit {
namespace cuda {
namespace {

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

void dequantize(QuantType t, const WeightView& w, int64_t rows, int64_t k, void* out, FloatType out_type,
                int64_t out_row_stride, cudaStream_t stream) {
  cuda_detail::check_weight(t, w, rows, k, "dequantize");
  LOWBIT_CHECK(rows == 0 || out != nullptr, "out: pointer is null");
  LOWBIT_CHECK(aligned16(out), "out: must be 16-byte aligned");
  const int64_t elem = out_type == FloatType::F32 ? 4 : 2;
  LOWBIT_CHECK(out_row_stride >= k && (out_row_stride * elem) % 16 == 0, "out: row stride ", out_row_stride,
               " must be >= K = ", k, " and a multiple of 16 bytes");
  LOWBIT_CHECK(k / 8 < (int64_t{1} << 31) / 2, "k: K = ", k, " is too large");
  if (rows == 0) return;
  const cuda_detail::DequantArgs args{
      static_cast<const uint8_t*>(w.data), w.row_stride, w.scales, w.scale_row_stride, rows, k, out, out_row_stride};
  visit_weight_type(t,
                    [&](auto traits) { cuda_detail::launch_dequant<decltype(traits)::kType>(args, out_type, stream); });
}

size_t mmvq_workspace_bytes(QuantType t, int64_t m, int64_t k, MmvqMath math) {
  if (resolve_mmvq_math(t, m, math) != MmvqMath::kInt8) return 0;
  return static_cast<size_t>(cuda_detail::int8_activation_bytes(m, k));
}

namespace {
DeviceFacts read_device_facts(int device) {
  DeviceFacts f;
  const bool ok =
      cudaDeviceGetAttribute(&f.compute_major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&f.compute_minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&f.multiprocessors, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&f.shared_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&f.shared_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) == cudaSuccess;
  if (!ok) cudaGetLastError();
  LOWBIT_CHECK(ok, "device: cannot read the facts of CUDA device ", device);
  f.mmq = mmq_available_on(device);
  return f;
}
}  // namespace

DeviceFacts device_facts(int device) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    device = -1;
  }
  LOWBIT_CHECK(device >= 0, "device: no current CUDA device");
  // read once per device: every call plans, and the facts do not change while the process runs
  constexpr int kDevices = 64;
  static DeviceFacts facts[kDevices];
  static std::atomic<bool> known[kDevices];
  if (device >= kDevices) return read_device_facts(device);
  if (!known[device].load(std::memory_order_acquire)) {
    static std::mutex mutex;
    const std::lock_guard<std::mutex> lock(mutex);
    facts[device] = read_device_facts(device);
    known[device].store(true, std::memory_order_release);
  }
  return facts[device];
}

Plan plan_linear(QuantType t, int64_t m, int64_t n, int64_t k, const PlanOptions& options) {
  return ::lowbit::plan_linear(t, m, n, k, device_facts(), options);
}

MmvqKernel mmvq_kernel(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  check_mmvq_pass(t, m, n, k, math);  // bad arguments speak before the device is asked
  return plan_mmvq_pass(t, m, n, k, device_facts(), math).kernel;
}

bool mmvq_reads_workspace(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  check_mmvq_pass(t, m, n, k, math);
  return plan_mmvq_pass(t, m, n, k, device_facts(), math).workspace_bytes > 0;
}

namespace {

// x and y of an MMVQ call of m tokens: pointers, alignment, strides, no overlap.
void check_activations(const void* x, FloatType x_type, int64_t m, int64_t x_row_stride, const void* y,
                       int64_t y_row_stride, int64_t n, int64_t k) {
  LOWBIT_CHECK(x != nullptr && y != nullptr, "x/y: null pointer");
  LOWBIT_CHECK(aligned16(x), "x: must be 16-byte aligned");
  LOWBIT_CHECK(x_row_stride >= k && x_row_stride % 8 == 0, "x: row stride ", x_row_stride, " must be >= K = ", k,
               " and a multiple of 8 elements");
  LOWBIT_CHECK(y_row_stride >= n, "y: row stride ", y_row_stride, " must be >= N = ", n);
  LOWBIT_CHECK(n < (int64_t{1} << 31) * 16, "w: N = ", n, " is too large");
  const int64_t elem = x_type == FloatType::F32 ? 4 : 2;
  cuda_detail::check_no_overlap(x, elem, x_row_stride, k, y, elem, y_row_stride, n, m);
}

// One MMVQ pass as `config` plans it; the workspace (where the pass reads one) holds its bytes.
void run_mmvq_pass(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type,
                   int64_t x_row_stride, void* y, int64_t y_row_stride, const MmvqConfig& config, void* workspace,
                   cudaStream_t stream) {
  cuda_detail::MmvqArgs args{static_cast<const uint8_t*>(w.data),
                             w.row_stride,
                             w.scales,
                             w.scale_row_stride,
                             n,
                             k,
                             x,
                             x_row_stride,
                             config.tokens,
                             y,
                             y_row_stride};
  if (config.workspace_bytes > 0) {
    args.xs = static_cast<const float*>(workspace);
    args.xq = static_cast<const uint8_t*>(workspace) + cuda_detail::int8_scale_bytes(config.tokens, k);
  }
  visit_weight_type(
      t, [&](auto traits) { cuda_detail::launch_mmvq<decltype(traits)::kType>(args, x_type, config, stream); });
}

}  // namespace

void mmvq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
          int64_t x_row_stride, void* y, int64_t y_row_stride, cudaStream_t stream, MmvqMath math, void* workspace,
          size_t workspace_bytes) {
  // every argument check before the device is asked for its facts (they hold without a GPU too)
  cuda_detail::check_weight(t, w, n, k, "mmvq");
  check_mmvq_pass(t, m, n, k, math);
  check_activations(x, x_type, m, x_row_stride, y, y_row_stride, n, k);
  // callers that do not plan size the workspace by mmvq_workspace_bytes; the plan says whether it is read
  const size_t need = mmvq_workspace_bytes(t, m, k, math);
  LOWBIT_CHECK(workspace == nullptr || workspace_bytes >= need, "workspace: ", workspace_bytes,
               " bytes is less than the ", need, " bytes mmvq_workspace_bytes asks for");
  LOWBIT_CHECK(aligned16(workspace), "workspace: must be 16-byte aligned");
  const MmvqConfig config = plan_mmvq_pass(t, m, n, k, device_facts(), math);
  if (n == 0) return;
  cuda_detail::StreamOrderedBuffer owned{nullptr, stream};
  workspace = cuda_detail::workspace_or_allocate(workspace, config.workspace_bytes, owned, stream, "mmvq");
  run_mmvq_pass(t, w, n, k, x, x_type, x_row_stride, y, y_row_stride, config, workspace, stream);
}

void execute(const Plan& plan, const WeightView& w, const void* x, FloatType x_type, int64_t x_row_stride, void* y,
             int64_t y_row_stride, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  LOWBIT_CHECK(plan.operation == Operation::kLinear, "plan: execute runs linear plans; got ",
               operation_name(plan.operation));
  cuda_detail::check_weight(plan.type, w, plan.n, plan.k, "execute");
  LOWBIT_CHECK(workspace == nullptr || workspace_bytes >= plan.workspace_bytes, "workspace: ", workspace_bytes,
               " bytes is less than the plan's ", plan.workspace_bytes);
  LOWBIT_CHECK(aligned16(workspace), "workspace: must be 16-byte aligned");
  if (plan.kernel == DenseKernel::kDequantMatmul) {
    LOWBIT_CHECK(plan.n == 0 || workspace != nullptr, "workspace: a dequant_matmul plan writes the bf16 weight (",
                 plan.workspace_bytes, " bytes) into the caller's workspace; got none");
    dequantize(plan.type, w, plan.n, plan.k, workspace, FloatType::BF16, plan.k, stream);
    return;
  }
  if (plan.m == 0) return;  // no tokens
  if (plan.kernel == DenseKernel::kMmq) {
    cuda_detail::run_mmq_plan(plan.type, w, plan.n, plan.k, x, x_type, plan.m, x_row_stride, y, y_row_stride, plan.mmq,
                              workspace, workspace_bytes, stream);
    return;
  }
  LOWBIT_CHECK(plan.kernel == DenseKernel::kMmvq, "plan: kernel ", dense_kernel_name(plan.kernel),
               " does not run on CUDA (mmvq, mmq, dequant_matmul)");
  LOWBIT_CHECK(plan.passes == (plan.m + kMmvqMaxTokens - 1) / kMmvqMaxTokens && plan.mmvq.tokens >= 1,
               "plan: its MMVQ passes do not cover M = ", plan.m, " (not a plan of plan_linear)");
  check_activations(x, x_type, plan.m, x_row_stride, y, y_row_stride, plan.n, plan.k);
  if (plan.n == 0) return;
  cuda_detail::StreamOrderedBuffer owned{nullptr, stream};
  workspace = cuda_detail::workspace_or_allocate(workspace, plan.workspace_bytes, owned, stream, "mmvq");
  const int64_t elem = x_type == FloatType::F32 ? 4 : 2;
  for (int64_t pass = 0; pass < plan.passes; ++pass) {
    const MmvqConfig& config = pass + 1 < plan.passes ? plan.mmvq : plan.mmvq_last;
    const int64_t m0 = pass * kMmvqMaxTokens;
    run_mmvq_pass(plan.type, w, plan.n, plan.k, static_cast<const uint8_t*>(x) + m0 * x_row_stride * elem, x_type,
                  x_row_stride, static_cast<uint8_t*>(y) + m0 * y_row_stride * elem, y_row_stride, config, workspace,
                  stream);
  }
}

}  // namespace cuda
}  // namespace lowbit

namespace lowbit::cuda_detail {

void check_weight(QuantType t, const WeightView& w, int64_t rows, int64_t k, const char* op) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t), "qtype");
  row_bytes(t, k, "k");
  LOWBIT_CHECK(rows >= 0, op, ": rows/N must be >= 0, got ", rows);
  LOWBIT_CHECK(rows == 0 || w.data != nullptr, "w: data pointer is null");
  LOWBIT_CHECK((reinterpret_cast<uintptr_t>(w.data) & 15u) == 0,
               "w: data must be 16-byte aligned (kernels copy it in aligned 16-byte pieces)");
  LOWBIT_CHECK(w.row_stride >= row_bytes(t, k) || rows <= 1, "w: row stride ", w.row_stride,
               " is shorter than a row of ", row_bytes(t, k), " bytes");
  if (info.split_scales) {
    LOWBIT_CHECK(rows == 0 || w.scales != nullptr, "scales: ", info.name,
                 " keeps its E8M0 scales in a separate tensor, which is missing");
    LOWBIT_CHECK(w.scale_row_stride >= k / 32 || rows <= 1, "scales: row stride ", w.scale_row_stride,
                 " is shorter than K/32 = ", k / 32);
  }
  // What the decode primitives assume of a block's start. Also for a single row: the tiled kernels
  // still address the tile's absent rows from the stride (their reads are never stored).
  int block_align = 1;
  visit_weight_type(t, [&](auto traits) { block_align = decltype(traits)::kAlign; });
  LOWBIT_CHECK(w.row_stride % block_align == 0, "w: row stride ", w.row_stride, " must be a multiple of ", block_align,
               " bytes (", info.name, " blocks are read ", block_align, "-byte aligned)");
}

void check_no_overlap(const void* x, int64_t x_elem, int64_t x_row_stride, int64_t x_cols, const void* y,
                      int64_t y_elem, int64_t y_row_stride, int64_t y_cols, int64_t rows) {
  if (rows <= 0 || x_cols <= 0 || y_cols <= 0) return;
  const auto x_begin = reinterpret_cast<uintptr_t>(x), y_begin = reinterpret_cast<uintptr_t>(y);
  const auto x_end = x_begin + static_cast<uintptr_t>(((rows - 1) * x_row_stride + x_cols) * x_elem);
  const auto y_end = y_begin + static_cast<uintptr_t>(((rows - 1) * y_row_stride + y_cols) * y_elem);
  LOWBIT_CHECK(y_end <= x_begin || x_end <= y_begin, "y: must not overlap x");
}

StreamOrderedBuffer::~StreamOrderedBuffer() {
  if (ptr != nullptr) cudaFreeAsync(ptr, stream);
}

void* workspace_or_allocate(void* workspace, size_t need, StreamOrderedBuffer& owned, cudaStream_t stream,
                            const char* op) {
  if (workspace != nullptr || need == 0) return workspace;
  const cudaError_t err = cudaMallocAsync(&owned.ptr, need, stream);
  LOWBIT_CHECK(err == cudaSuccess, op, ": cannot allocate its ", need, " byte workspace: ", cudaGetErrorString(err));
  return owned.ptr;
}

}  // namespace lowbit::cuda_detail
