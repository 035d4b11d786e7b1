// The cpu backend (oneDNN) below the op layer: candidate enumeration and ids, the plan cache,
// workspace accounting, errors, bias, and every supported candidate against the reference
// backend in all three directions. The full parity matrix is tests/ops; this file checks what is
// specific to how the oneDNN backend builds and runs its candidates.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/onednn/convert.hpp"
#include "backends/onednn/onednn.hpp"
#include "backends/reference/reference.hpp"
#include "core/dtype.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dnnx {
namespace {

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};

// One backend for the whole executable: building a backend is cheap, but its plan cache is what
// several tests exercise, and sharing it keeps the JIT work of the parity cases to one build each.
detail::Backend& cpu() {
  static const std::unique_ptr<detail::Backend> backend = onednn::make_backend(0);
  return *backend;
}

detail::Backend& reference_backend() {
  static const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  return *backend;
}

ConvDesc resnet_3x3(Layout layout, DType dtype = DType::f32) {
  return ConvDesc::from_shapes(Dims{8, 64, 56, 56}, Dims{64, 64, 3, 3}, {1}, {1}, {1}, 1, dtype,
                               layout);
}

// Workspace memory from the host allocator (64-byte aligned, as the op layer hands it out), with
// `guard` extra bytes after the requested size that must come back untouched.
class GuardedWorkspace {
 public:
  static constexpr std::size_t guard = 4096;
  static constexpr unsigned char canary = 0xA5;

  explicit GuardedWorkspace(std::size_t bytes)
      : bytes_(bytes),
        data_(static_cast<unsigned char*>(host_allocator().allocate(bytes + guard))) {
    std::memset(data_, canary, bytes + guard);
  }
  ~GuardedWorkspace() { host_allocator().deallocate(data_, bytes_ + guard); }
  GuardedWorkspace(const GuardedWorkspace&) = delete;
  GuardedWorkspace& operator=(const GuardedWorkspace&) = delete;

  detail::Workspace workspace() const { return {data_, bytes_}; }
  /// Bytes past the requested size that were written.
  std::size_t guard_bytes_written() const {
    return static_cast<std::size_t>(std::count_if(data_ + bytes_, data_ + bytes_ + guard,
                                                  [](unsigned char c) { return c != canary; }));
  }
  /// Bytes within the requested size that were written.
  std::size_t bytes_written() const {
    return static_cast<std::size_t>(
        std::count_if(data_, data_ + bytes_, [](unsigned char c) { return c != canary; }));
  }

 private:
  std::size_t bytes_;
  unsigned char* data_;
};

detail::ConvArgs conv_args(Direction direction, const test::ConvOperands& operands,
                           Tensor& output) {
  detail::ConvArgs args;
  switch (direction) {
    case Direction::fwd:
      args.src = &operands.src;
      args.weights = &operands.weights;
      args.dst = &output;
      break;
    case Direction::bwd_data:
      args.diff_dst = &operands.diff_dst;
      args.weights = &operands.weights;
      args.diff_src = &output;
      break;
    case Direction::bwd_weights:
      args.src = &operands.src;
      args.diff_dst = &operands.diff_dst;
      args.diff_weights = &output;
      break;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return args;
}

// Runs candidate `id` of `backend` into a fresh all-NaN output (unwritten elements then fail the
// finiteness check) with an exactly sized, guarded workspace.
Tensor run(detail::Backend& backend, const ConvDesc& desc, Direction direction,
           const std::string& id, const test::ConvOperands& operands,
           std::size_t* guard_bytes_written = nullptr) {
  Tensor output =
      test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout);
  const std::shared_ptr<detail::ConvPlan> plan = backend.conv().plan(desc, direction, id);
  GuardedWorkspace workspace(plan->algo().workspace_bytes);
  plan->execute(conv_args(direction, operands, output), workspace.workspace());
  if (guard_bytes_written != nullptr) *guard_bytes_written = workspace.guard_bytes_written();
  return output;
}

// Per-element error scale: the reference on |operands| in f32 (see support/conv.hpp).
std::vector<float> error_scale(const ConvDesc& desc, Direction direction,
                               const test::ConvOperands& operands) {
  ConvDesc wide = desc;
  wide.dtype = DType::f32;
  test::ConvOperands magnitudes;
  if (!operands.src.is_null())
    magnitudes.src = test::abs_tensor(operands.src, DType::f32, desc.layout);
  if (!operands.weights.is_null())
    magnitudes.weights = test::abs_tensor(operands.weights, DType::f32, desc.layout);
  if (!operands.diff_dst.is_null())
    magnitudes.diff_dst = test::abs_tensor(operands.diff_dst, DType::f32, desc.layout);
  return run(reference_backend(), wide, direction, "reference:direct", magnitudes).to_f32();
}

using test::expect_error;

// ---------------------------------------------------------------------------------------------
// Enumeration and ids.

TEST(OneDnnBackend, FactoryAndFingerprint) {
  std::string why;
  ASSERT_TRUE(onednn::available(&why)) << why;
  EXPECT_NE(onednn::version().find("oneDNN 3."), std::string::npos) << onednn::version();
  const std::string fingerprint = cpu().fingerprint();
  for (const char* part : {"oneDNN 3.", "isa=", "threads="})
    EXPECT_NE(fingerprint.find(part), std::string::npos) << fingerprint;
  EXPECT_EQ(cpu().kind(), BackendKind::cpu);
  EXPECT_EQ(cpu().name(), "cpu");
  EXPECT_EQ(cpu().device(), Device::cpu());
  expect_error(ErrorKind::InvalidArgument, {"device", "got 1"}, [] { onednn::make_backend(1); });
}

TEST(OneDnnBackend, TimeMsWaitsForTheWork) {
  const double ms =
      cpu().time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  EXPECT_GE(ms, 20.0);
  EXPECT_LT(ms, 2000.0);
}

class Resnet3x3 : public ::testing::TestWithParam<Layout> {};

TEST_P(Resnet3x3, ListsEveryImplementationInPriorityOrder) {
  const ConvDesc desc = resnet_3x3(GetParam());
  for (const Direction direction : all_directions) {
    SCOPED_TRACE(test::conv_context(desc, direction, "(list)"));
    const std::vector<AlgoInfo> algos = cpu().conv().list(desc, direction);
    ASSERT_FALSE(algos.empty());
    std::set<std::string> ids;
    int supported = 0;
    bool zero_workspace = false;
    for (std::size_t i = 0; i < algos.size(); ++i) {
      const AlgoInfo& info = algos[i];
      EXPECT_TRUE(ids.insert(info.id).second) << "duplicate id " << info.id;
      EXPECT_EQ(info.priority, static_cast<int>(i)) << info.id;
      EXPECT_EQ(info.id.rfind("onednn:", 0), 0u) << info.id;
      EXPECT_FALSE(info.name.empty()) << info.id;
      EXPECT_TRUE(info.deterministic) << info.id;
      for (const std::string& family : info.families) {
        EXPECT_NE(std::find(std::begin(family_names), std::end(family_names), family),
                  std::end(family_names))
            << info.id << " has unknown family " << family;
        EXPECT_NE(family, "fft") << info.id;
        EXPECT_NE(family, "fft_tiling") << info.id;
      }
      if (info.supported) {
        ++supported;
        EXPECT_TRUE(info.reason.empty()) << info.id << ": " << info.reason;
        EXPECT_FALSE(info.families.empty()) << info.id;
        if (info.workspace_bytes == 0) zero_workspace = true;
        const bool gemm =
            info.id.find("gemm") != std::string::npos && info.id.find("brg") == std::string::npos;
        const bool ref = info.id.find(":ref:") != std::string::npos;
        EXPECT_EQ(info.has_note("gemm"), gemm) << info.id;
        EXPECT_EQ(info.has_note("reference"), ref) << info.id;
        if (ref) {
          EXPECT_EQ(info.families, std::vector<std::string>{"none"}) << info.id;
        }
        if (gemm) {
          EXPECT_EQ(info.families, std::vector<std::string>{"large"}) << info.id;
        }
        if (!ref && !gemm) {
          EXPECT_EQ(info.families, std::vector<std::string>{"small"}) << info.id;
        }
        const std::string suffix = info.id.substr(info.id.rfind(':') + 1);
        EXPECT_TRUE(suffix == "plain" || suffix == "blocked_weights" || suffix == "blocked" ||
                    suffix == "nchw" || suffix == "nhwc")
            << info.id;
        // Activations converted to a plain layout are converted to the caller's other one.
        if (suffix == "nchw" || suffix == "nhwc") {
          EXPECT_NE(suffix, to_string(desc.layout));
        }
        // One reference candidate, zero-copy (Note [one reference candidate]).
        if (ref) {
          EXPECT_EQ(suffix, "plain") << info.id;
        }
      } else {
        EXPECT_FALSE(info.reason.empty()) << info.id;
      }
    }
    // The point of listing candidates: more than one real candidate for a ResNet 3x3 layer, and
    // oneDNN's own first choice first.
    EXPECT_GT(supported, 1);
    EXPECT_TRUE(algos.front().supported) << algos.front().id << ": " << algos.front().reason;
    EXPECT_TRUE(algos.front().has_note("direct")) << algos.front().id;
    // The op layer's fallback needs a candidate that runs without scratch memory.
    EXPECT_TRUE(zero_workspace);
  }
}

TEST_P(Resnet3x3, IdsAreStableAcrossBackendInstances) {
  const ConvDesc desc = resnet_3x3(GetParam());
  const std::unique_ptr<detail::Backend> first = onednn::make_backend(0);
  const std::unique_ptr<detail::Backend> second = onednn::make_backend(0);
  for (const Direction direction : all_directions) {
    const std::vector<AlgoInfo> a = first->conv().list(desc, direction);
    const std::vector<AlgoInfo> b = second->conv().list(desc, direction);
    ASSERT_EQ(a.size(), b.size()) << to_string(direction);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].id, b[i].id);
      EXPECT_EQ(a[i].workspace_bytes, b[i].workspace_bytes) << a[i].id;
      EXPECT_EQ(a[i].supported, b[i].supported) << a[i].id;
    }
    // A repeated list() on one instance answers the same (from its cache).
    const std::vector<AlgoInfo> again = first->conv().list(desc, direction);
    ASSERT_EQ(again.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(again[i].id, a[i].id);
  }
}

TEST_P(Resnet3x3, PlanIsBuiltOnceAndReused) {
  const ConvDesc desc = resnet_3x3(GetParam());
  for (const Direction direction : all_directions) {
    const std::vector<AlgoInfo> algos = cpu().conv().list(desc, direction);
    const AlgoInfo& first = algos.front();
    const auto plan = cpu().conv().plan(desc, direction, first.id);
    const auto again = cpu().conv().plan(desc, direction, first.id);
    EXPECT_EQ(plan.get(), again.get()) << first.id;
    EXPECT_EQ(plan->algo().id, first.id);
    EXPECT_EQ(plan->algo().workspace_bytes, first.workspace_bytes);
    // An equal desc built separately is the same cache entry.
    const auto from_copy = cpu().conv().plan(resnet_3x3(GetParam()), direction, first.id);
    EXPECT_EQ(plan.get(), from_copy.get());
    // Another candidate, or another backend instance, has its own plan.
    const auto other_id = std::find_if(algos.begin() + 1, algos.end(),
                                       [](const AlgoInfo& info) { return info.supported; });
    ASSERT_NE(other_id, algos.end());
    EXPECT_NE(cpu().conv().plan(desc, direction, other_id->id).get(), plan.get());
    const std::unique_ptr<detail::Backend> other = onednn::make_backend(0);
    EXPECT_NE(other->conv().plan(desc, direction, first.id).get(), plan.get());
  }
}

TEST(OneDnnBackend, PlanOutlivesItsBackend) {
  // Plans are shared_ptrs the op layer may keep; they hold what their primitives need.
  const ConvDesc desc = ConvDesc::from_shapes(Dims{2, 16, 9, 9}, Dims{16, 16, 3, 3}, {1}, {1});
  for (const Direction direction : all_directions) {
    const test::ConvOperands operands = test::random_conv_operands(desc, direction, 5);
    std::vector<std::shared_ptr<detail::ConvPlan>> plans;
    {
      const std::unique_ptr<detail::Backend> backend = onednn::make_backend(0);
      for (const AlgoInfo& info : backend->conv().list(desc, direction))
        if (info.supported) plans.push_back(backend->conv().plan(desc, direction, info.id));
    }
    ASSERT_FALSE(plans.empty());
    const std::vector<float> expected =
        run(reference_backend(), desc, direction, "reference:direct", operands).to_f32();
    const std::vector<float> scale = error_scale(desc, direction, operands);
    for (const auto& plan : plans) {
      const std::string context = test::conv_context(desc, direction, plan->algo().id);
      Tensor output =
          test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout);
      GuardedWorkspace workspace(plan->algo().workspace_bytes);
      plan->execute(conv_args(direction, operands, output), workspace.workspace());
      EXPECT_TRUE(test::close_within_scale(output.to_f32(), expected, scale, output.dims(),
                                           test::conv_tolerance(desc.dtype), "output", context));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Resnet3x3,
                         ::testing::Values(Layout::channels_first, Layout::channels_last),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(to_string(info.param));
                         });

bool is_f32_compute(const AlgoInfo& info) { return info.has_note("f32_compute"); }
bool is_ref(const AlgoInfo& info) { return info.id.rfind("onednn:ref:", 0) == 0; }

TEST(OneDnnBackend, DtypesWithoutFastKernelsStillHaveCandidates) {
  // Note [f32 compute convolution]: every f16/bf16 direction runs on every CPU, through
  // f32-compute candidates where oneDNN has no f16/bf16 kernel; where it has native ones (the
  // list says so, whatever the ISA), they come first, then the f32-compute ones, then ref:any.
  for (const DType dtype : {DType::f16, DType::bf16}) {
    for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
      const ConvDesc desc = resnet_3x3(layout, dtype);
      for (const Direction direction : all_directions) {
        const std::string context = test::conv_context(desc, direction, "(list)");
        const std::vector<AlgoInfo> algos = cpu().conv().list(desc, direction);
        const auto supported = std::count_if(algos.begin(), algos.end(),
                                             [](const AlgoInfo& info) { return info.supported; });
        EXPECT_GE(supported, 1) << context;
        int f32_compute = 0;
        int refs = 0;
        std::set<std::string> f32_implementations;
        // 0: native non-ref, 1: f32-compute non-ref, 2: ref:any; supported candidates never go
        // back to a lower group.
        int group = 0;
        for (const AlgoInfo& info : algos) {
          SCOPED_TRACE(info.id);
          if (!info.supported) {
            EXPECT_NE(info.reason.find("oneDNN"), std::string::npos) << info.reason;
            continue;
          }
          const int here = is_ref(info) ? 2 : is_f32_compute(info) ? 1 : 0;
          EXPECT_GE(here, group) << "out of order in\n" << context;
          group = std::max(group, here);
          if (is_ref(info)) ++refs;
          if (!is_f32_compute(info)) continue;
          ++f32_compute;
          // The candidate says what it is.
          EXPECT_TRUE(info.id.ends_with(":f32"));
          EXPECT_NE(info.name.find("f32 compute"), std::string::npos) << info.name;
          EXPECT_GT(info.workspace_bytes, 0u);  // the f32 copies
          EXPECT_TRUE(info.deterministic);
          // One f32-compute candidate per implementation: the id without its layouts.
          const std::string layouts_and_suffix = info.id.substr(0, info.id.rfind(':'));
          EXPECT_TRUE(f32_implementations
                          .insert(layouts_and_suffix.substr(0, layouts_and_suffix.rfind(':')))
                          .second)
              << "a second f32-compute candidate of the same implementation";
        }
        EXPECT_GE(f32_compute, 1) << context;
        EXPECT_LE(refs, 1) << "one ref:any candidate (Note [one reference candidate])\n" << context;
      }
    }
  }
  // f32 itself has no f32-compute candidates.
  for (const Direction direction : all_directions) {
    for (const AlgoInfo& info : cpu().conv().list(resnet_3x3(Layout::channels_first), direction))
      EXPECT_FALSE(is_f32_compute(info) || info.id.ends_with(":f32")) << info.id;
  }
}

// Every candidate of `desc` whose id contains `part` is unsupported as a known defect (and
// refused by plan()); returns how many there were.
int expect_known_defect(const ConvDesc& desc, Direction direction, const std::string& part) {
  int found = 0;
  for (const AlgoInfo& info : cpu().conv().list(desc, direction)) {
    if (info.id.find(part) == std::string::npos) continue;
    ++found;
    EXPECT_FALSE(info.supported) << info.id;
    EXPECT_NE(info.reason.find("known oneDNN defect"), std::string::npos) << info.reason;
    expect_error(ErrorKind::Unsupported, {info.id, "known oneDNN defect"},
                 [&] { cpu().conv().plan(desc, direction, info.id); });
  }
  return found;
}

// Every candidate of `desc` whose id contains `part` is supported; returns how many.
int expect_supported(const ConvDesc& desc, Direction direction, const std::string& part) {
  int found = 0;
  for (const AlgoInfo& info : cpu().conv().list(desc, direction)) {
    if (info.id.find(part) == std::string::npos) continue;
    ++found;
    EXPECT_TRUE(info.supported) << info.id << ": " << info.reason;
  }
  return found;
}

TEST(OneDnnBackend, KnownDefectJitBf16BackwardWeights) {
  // Note [known oneDNN defects]: jit_bf16 backward weights is wrong when the kernel is longer
  // than the input; where this CPU has that kernel, it is listed and refused.
  const ConvDesc longer_3d =
      ConvDesc::from_shapes(Dims{1, 12, 1, 1, 8}, Dims{6, 6, 4, 1, 5}, {1, 3, 3}, {3, 0, 2}, {1}, 2,
                            DType::bf16, Layout::channels_last);
  const ConvDesc longer_2d =
      ConvDesc::from_shapes(Dims{1, 9, 1, 1}, Dims{6, 3, 1, 4}, {2, 3}, {0, 3}, {1}, 3, DType::bf16,
                            Layout::channels_last);
  const int found = expect_known_defect(longer_3d, Direction::bwd_weights, "onednn:jit_bf16:") +
                    expect_known_defect(longer_2d, Direction::bwd_weights, "onednn:jit_bf16:");
  if (found == 0) GTEST_SKIP() << "no jit_bf16 implementation on this CPU";
  // A kernel that fits the input is not affected, and other directions never are.
  const ConvDesc fits = ConvDesc::from_shapes(Dims{1, 12, 1, 8}, Dims{6, 6, 1, 5}, {3, 3}, {0, 2},
                                              {1}, 2, DType::bf16, Layout::channels_last);
  EXPECT_GT(expect_supported(fits, Direction::bwd_weights, "onednn:jit_bf16:"), 0);
  EXPECT_GT(expect_supported(longer_3d, Direction::fwd, "onednn:jit_bf16:"), 0);
}

TEST(OneDnnBackend, KnownDefectAmxBackwardWeights) {
  // Note [known oneDNN defects]: the AMX kernels' backward weights share jit_bf16's defect when
  // the kernel is longer than the input.
  const ConvDesc longer = ConvDesc::from_shapes(Dims{1, 9, 1, 1}, Dims{6, 3, 1, 4}, {2, 3}, {0, 3},
                                                {1}, 3, DType::bf16, Layout::channels_first);
  if (expect_known_defect(longer, Direction::bwd_weights, "avx512_core_amx") == 0)
    GTEST_SKIP() << "no AMX implementation of this desc on this CPU";
  // Other directions are not affected.
  expect_supported(longer, Direction::fwd, "avx512_core_amx");
  expect_supported(longer, Direction::bwd_data, "avx512_core_amx");
}

TEST(OneDnnBackend, KnownDefectJit1x1StridedBackwardWeights) {
  // Note [known oneDNN defects]: jit_1x1 backward weights on nhwc activations with a stride and
  // fewer than 16 input channels writes past its scratchpad; on blocked activations it is fine.
  const ConvDesc few = ConvDesc::from_shapes(Dims{1, 6, 10, 12}, Dims{5, 6, 1, 1}, {2, 3}, {0}, {1},
                                             1, DType::f32, Layout::channels_last);
  int refused = 0;
  for (const AlgoInfo& info : cpu().conv().list(few, Direction::bwd_weights)) {
    if (info.id.rfind("onednn:jit_1x1:", 0) != 0) continue;
    if (info.has_note("blocked")) {
      EXPECT_TRUE(info.supported) << info.id << ": " << info.reason;
      continue;
    }
    ++refused;
    EXPECT_FALSE(info.supported) << info.id;
    EXPECT_NE(info.reason.find("known oneDNN defect"), std::string::npos) << info.reason;
    expect_error(ErrorKind::Unsupported, {info.id, "known oneDNN defect"},
                 [&] { cpu().conv().plan(few, Direction::bwd_weights, info.id); });
  }
  if (refused == 0) GTEST_SKIP() << "no jit_1x1 implementation on nhwc activations on this CPU";
  // 16 channels or unit stride are not affected.
  const ConvDesc wide = ConvDesc::from_shapes(Dims{1, 16, 10, 12}, Dims{5, 16, 1, 1}, {2, 3}, {0},
                                              {1}, 1, DType::f32, Layout::channels_last);
  EXPECT_GT(expect_supported(wide, Direction::bwd_weights, "onednn:jit_1x1:"), 0);
  const ConvDesc unit = ConvDesc::from_shapes(Dims{1, 6, 10, 12}, Dims{5, 6, 1, 1}, {1}, {0}, {1},
                                              1, DType::f32, Layout::channels_last);
  EXPECT_GT(expect_supported(unit, Direction::bwd_weights, "onednn:jit_1x1:"), 0);
}

TEST(OneDnnBackend, KnownDefectJitAvx512StridedDepthBackwardWeights) {
  // Note [known oneDNN defects]: jit:avx512_core backward weights is wrong (or crashes) for 3-D
  // convolutions with a stride along D and a larger front padding along D.
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    const ConvDesc padded = ConvDesc::from_shapes(Dims{1, 1, 3, 4, 6}, Dims{2, 1, 5, 1, 2},
                                                  {2, 1, 1}, {3, 0, 0}, {1}, 1, DType::f32, layout);
    if (expect_known_defect(padded, Direction::bwd_weights, "onednn:jit:avx512_core:") == 0)
      GTEST_SKIP() << "no jit:avx512_core implementation on this CPU";
    // Padding up to the stride, H and W, and the other directions are not affected.
    const ConvDesc less = ConvDesc::from_shapes(Dims{1, 1, 7, 4, 6}, Dims{2, 1, 5, 1, 2}, {2, 1, 1},
                                                {2, 0, 0}, {1}, 1, DType::f32, layout);
    EXPECT_GT(expect_supported(less, Direction::bwd_weights, "onednn:jit:avx512_core:"), 0);
    const ConvDesc along_h = ConvDesc::from_shapes(
        Dims{1, 1, 4, 9, 6}, Dims{2, 1, 1, 7, 2}, {1, 2, 1}, {0, 3, 0}, {1}, 1, DType::f32, layout);
    EXPECT_GT(expect_supported(along_h, Direction::bwd_weights, "onednn:jit:avx512_core:"), 0);
    EXPECT_GT(expect_supported(padded, Direction::fwd, "onednn:jit:avx512_core:"), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// The conversions of the f32-compute candidates (Note [dtype conversions]).

// Bitwise equal floats, or both NaN (a NaN's payload may differ between the levels).
bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(OneDnnConvert, EveryLevelMatchesTheScalarConversions) {
  // Every f16 and bf16 bit pattern, and for the way back every value, every midpoint between
  // neighbours (the ties of round to nearest even), and values beyond f16's range. Counts that
  // are not multiples of the vector width exercise the tails; the offset start an unaligned one.
  std::vector<std::uint16_t> all(65536 + 3);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i - 3);
  const auto count = static_cast<std::int64_t>(all.size() - 3);
  std::vector<onednn::ConvertLevel> levels = {onednn::ConvertLevel::scalar};
  if (onednn::best_convert_level() != onednn::ConvertLevel::scalar)
    levels.push_back(onednn::best_convert_level());
  for (const onednn::ConvertLevel level : levels) {
    SCOPED_TRACE(static_cast<int>(level));
    for (const DType type : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(to_string(type));
      const auto widen = [&](std::uint16_t v) {
        return type == DType::f16 ? detail::half_to_float(v) : detail::bf16_to_float(v);
      };
      const auto narrow = [&](float v) {
        return type == DType::f16 ? detail::float_to_half(v) : detail::float_to_bf16(v);
      };
      std::vector<float> wide(all.size());
      onednn::convert(all.data() + 3, type, wide.data() + 1, DType::f32, count, 1.0f, level);
      std::vector<float> halves(wide.size());
      onednn::convert(all.data() + 3, type, halves.data() + 1, DType::f32, count, 0.5f, level);
      std::vector<float> probes;
      for (std::int64_t i = 0; i < count; ++i) {
        const float expected = widen(all[static_cast<std::size_t>(i + 3)]);
        ASSERT_TRUE(same_value(wide[static_cast<std::size_t>(i + 1)], expected)) << i;
        ASSERT_TRUE(same_value(halves[static_cast<std::size_t>(i + 1)], 0.5f * expected)) << i;
        probes.push_back(expected);
        const float next = widen(static_cast<std::uint16_t>(i + 1));
        if (std::isfinite(expected) && std::isfinite(next))
          probes.push_back(expected + (next - expected) / 2);
      }
      for (const float big : {65504.0f, 65519.0f, 65520.0f, 1e6f, 3e38f, -7e4f})
        probes.push_back(big);
      std::vector<std::uint16_t> narrowed(probes.size() + 1);
      onednn::convert(probes.data(), DType::f32, narrowed.data() + 1, type,
                      static_cast<std::int64_t>(probes.size()), 1.0f, level);
      for (std::size_t i = 0; i < probes.size(); ++i) {
        const std::uint16_t expected = narrow(probes[i]);
        const std::uint16_t got = narrowed[i + 1];
        ASSERT_TRUE(got == expected || (std::isnan(widen(got)) && std::isnan(widen(expected))))
            << probes[i] << ": " << got << " vs " << expected;
      }
    }
  }
}

TEST(OneDnnConvert, LargeCountsSplitOverThreadsGiveTheSameValues) {
  const std::int64_t count = (1 << 20) + 77;
  const Tensor values = test::random_tensor(Dims{count}, DType::f32, Layout::channels_first, 9);
  const auto* in = static_cast<const float*>(values.data());
  std::vector<std::uint16_t> out(static_cast<std::size_t>(count));
  onednn::convert(in, DType::f32, out.data(), DType::bf16, count);
  for (std::int64_t i = 0; i < count; ++i)
    ASSERT_EQ(out[static_cast<std::size_t>(i)], detail::float_to_bf16(in[i])) << i;
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(OneDnnBackend, UnknownIdNamesTheIdAndTheValidOnes) {
  const ConvDesc desc = resnet_3x3(Layout::channels_first);
  const std::string valid = cpu().conv().list(desc, Direction::fwd).front().id;
  expect_error(ErrorKind::InvalidArgument, {"onednn:no_such_impl", valid},
               [&] { cpu().conv().plan(desc, Direction::fwd, "onednn:no_such_impl"); });
  expect_error(ErrorKind::InvalidArgument, {"reference:direct"},
               [&] { cpu().conv().plan(desc, Direction::fwd, "reference:direct"); });
}

TEST(OneDnnBackend, UnsupportedCandidateGivesItsReason) {
  const ConvDesc desc = resnet_3x3(Layout::channels_first);
  const std::vector<AlgoInfo> algos = cpu().conv().list(desc, Direction::fwd);
  const auto unsupported = std::find_if(algos.begin(), algos.end(),
                                        [](const AlgoInfo& info) { return !info.supported; });
  if (unsupported == algos.end()) {
    GTEST_SKIP() << "every candidate is supported on this CPU (oneDNN has winograd here)";
  }
  expect_error(ErrorKind::Unsupported, {unsupported->id, unsupported->reason},
               [&] { cpu().conv().plan(desc, Direction::fwd, unsupported->id); });
}

TEST(OneDnnBackend, InvalidDescIsRejected) {
  ConvDesc desc = resnet_3x3(Layout::channels_first);
  desc.groups = 3;  // 64 channels do not split into 3 groups
  expect_error(ErrorKind::InvalidArgument, {"groups"},
               [&] { cpu().conv().list(desc, Direction::fwd); });
}

TEST(OneDnnBackend, ExecuteChecksTensorsAndWorkspace) {
  const ConvDesc desc = ConvDesc::from_shapes(Dims{2, 16, 12, 12}, Dims{16, 16, 3, 3}, {1}, {1});
  const test::ConvOperands operands = test::random_conv_operands(desc, Direction::fwd, 7);
  for (const AlgoInfo& info : cpu().conv().list(desc, Direction::fwd)) {
    if (!info.supported) continue;
    SCOPED_TRACE(info.id);
    const auto plan = cpu().conv().plan(desc, Direction::fwd, info.id);
    Tensor dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
    GuardedWorkspace workspace(info.workspace_bytes);
    detail::ConvArgs args = conv_args(Direction::fwd, operands, dst);
    args.src = nullptr;
    expect_error(ErrorKind::InvalidArgument, {"src", "null"},
                 [&] { plan->execute(args, workspace.workspace()); });
    const Tensor wrong = Tensor::empty(Dims{2, 16, 12, 11}, desc.dtype, desc.layout);
    args.src = &wrong;
    expect_error(ErrorKind::InvalidArgument, {"src", "2x16x12x11"},
                 [&] { plan->execute(args, workspace.workspace()); });
    const Tensor nhwc = Tensor::empty(desc.src_dims(), desc.dtype, Layout::channels_last);
    args.src = &nhwc;
    expect_error(ErrorKind::InvalidArgument, {"src", "nchw"},
                 [&] { plan->execute(args, workspace.workspace()); });
    if (info.workspace_bytes > 0) {
      args.src = &operands.src;
      detail::Workspace small = workspace.workspace();
      small.bytes -= 1;
      expect_error(ErrorKind::InvalidArgument, {"workspace", std::to_string(info.workspace_bytes)},
                   [&] { plan->execute(args, small); });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Workspace: what a candidate reports is what it uses.

TEST(OneDnnBackend, WorkspaceBytesIsWhatTheCandidateUses) {
  // f16 adds the f32-compute candidates, whose conversions run inside the workspace too.
  for (const auto& [dtype, layout] :
       {std::pair{DType::f32, Layout::channels_first}, std::pair{DType::f32, Layout::channels_last},
        std::pair{DType::f16, Layout::channels_first},
        std::pair{DType::f16, Layout::channels_last}}) {
    const ConvDesc desc = ConvDesc::from_shapes(Dims{2, 32, 14, 14}, Dims{32, 32, 3, 3}, {1}, {1},
                                                {1}, 1, dtype, layout);
    for (const Direction direction : all_directions) {
      const test::ConvOperands operands = test::random_conv_operands(desc, direction, 11);
      for (const AlgoInfo& info : cpu().conv().list(desc, direction)) {
        if (!info.supported) continue;
        SCOPED_TRACE(test::conv_context(desc, direction, info.id));
        const auto plan = cpu().conv().plan(desc, direction, info.id);
        EXPECT_EQ(plan->algo().workspace_bytes, info.workspace_bytes);
        Tensor output =
            test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout);
        GuardedWorkspace workspace(info.workspace_bytes);
        plan->execute(conv_args(direction, operands, output), workspace.workspace());
        // Nothing beyond the reported size is touched...
        EXPECT_EQ(workspace.guard_bytes_written(), 0u);
        // ...and a candidate that asks for scratch memory does use it. Candidates running in
        // the caller's layouts ("plain") need exactly oneDNN's scratchpad; the others add their
        // reorder buffers, which are written in full.
        if (info.workspace_bytes > 0) {
          EXPECT_GT(workspace.bytes_written(), 0u);
        }
        const std::size_t element = size_of(desc.dtype);
        const auto bytes = [&](const Dims& dims) {
          return static_cast<std::size_t>(dims.product()) * element;
        };
        if (info.has_note("blocked_weights")) {
          EXPECT_GE(info.workspace_bytes, bytes(desc.weights_dims()));
        }
        if (info.has_note("blocked") || info.has_note("nchw") || info.has_note("nhwc")) {
          EXPECT_GE(info.workspace_bytes, std::min(bytes(desc.src_dims()), bytes(desc.dst_dims())));
        }
        // f32 compute: an f32 copy of every tensor of the direction.
        if (is_f32_compute(info)) {
          const std::size_t f32_copies =
              (bytes(desc.src_dims()) + bytes(desc.weights_dims()) + bytes(desc.dst_dims())) *
              size_of(DType::f32) / element;
          EXPECT_GE(info.workspace_bytes, f32_copies);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Parity with the reference, every supported candidate, all three directions.

struct ParityCase {
  std::string name;
  ConvDesc desc;
};

std::ostream& operator<<(std::ostream& out, const ParityCase& c) { return out << c.name; }

ConvDesc with_padding(ConvDesc desc, std::vector<std::int64_t> before,
                      std::vector<std::int64_t> after) {
  for (std::size_t i = 0; i < before.size(); ++i) {
    desc.pad_before[i] = before[i];
    desc.pad_after[i] = after[i];
  }
  desc.validate();
  return desc;
}

std::vector<ParityCase> parity_cases() {
  struct Shape {
    std::string name;
    ConvDesc desc;
  };
  const std::vector<Shape> shapes = {
      {"k3", ConvDesc::from_shapes(Dims{2, 16, 9, 9}, Dims{16, 16, 3, 3}, {1}, {1})},
      {"k3x2_stride2x1_asym_pad_dilation2x1",
       with_padding(
           ConvDesc::from_shapes(Dims{1, 8, 11, 10}, Dims{16, 8, 3, 2}, {2, 1}, {0}, {2, 1}),
           {1, 0}, {0, 2})},
      {"grouped4", ConvDesc::from_shapes(Dims{2, 8, 7, 7}, Dims{16, 2, 3, 3}, {1}, {1}, {1}, 4)},
      {"depthwise_stride2",
       ConvDesc::from_shapes(Dims{2, 16, 8, 8}, Dims{16, 1, 3, 3}, {2}, {1}, {1}, 16)},
      {"pointwise_stride2", ConvDesc::from_shapes(Dims{2, 32, 5, 5}, Dims{16, 32, 1, 1}, {2})},
      {"conv1d", ConvDesc::from_shapes(Dims{2, 4, 17}, Dims{8, 4, 5}, {2}, {2})},
      {"conv3d", ConvDesc::from_shapes(Dims{1, 4, 5, 6, 7}, Dims{8, 4, 3, 3, 3}, {1}, {1})},
      // Kernel longer than the input along D (Note [known oneDNN defects]).
      {"conv3d_kernel_longer_than_input",
       ConvDesc::from_shapes(Dims{1, 12, 1, 1, 8}, Dims{6, 6, 4, 1, 5}, {1, 3, 3}, {3, 0, 2}, {1},
                             2)},
      // Kernel longer than the input along W, grouped (Note [known oneDNN defects]).
      {"kernel_longer_than_input_grouped",
       ConvDesc::from_shapes(Dims{1, 9, 1, 1}, Dims{6, 3, 1, 4}, {2, 3}, {0, 3}, {1}, 3)},
      // Strided depth with a larger front padding (Note [known oneDNN defects]).
      {"conv3d_stride_d2_pad_d3", ConvDesc::from_shapes(Dims{2, 6, 5, 4, 6}, Dims{12, 1, 5, 1, 2},
                                                        {2, 1, 3}, {3, 0, 0}, {1}, 6)},
      // The same along H, which the defect does not affect.
      {"conv3d_stride_h2_pad_h3", ConvDesc::from_shapes(Dims{2, 6, 4, 9, 6}, Dims{12, 1, 1, 7, 2},
                                                        {1, 2, 3}, {0, 3, 0}, {1}, 6)},
      // 1x1, strided, few channels (Note [known oneDNN defects]).
      {"pointwise_stride2x3_few_channels",
       ConvDesc::from_shapes(Dims{1, 6, 10, 12}, Dims{5, 6, 1, 1}, {2, 3})},
  };
  std::vector<ParityCase> cases;
  for (const Shape& shape : shapes) {
    for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
      for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
        // Low precision on the plain 2-D shapes only; the rest of the matrix is tests/ops'.
        if (dtype != DType::f32 && shape.name != "k3" && shape.name != "depthwise_stride2" &&
            shape.name.find("kernel_longer_than_input") == std::string::npos)
          continue;
        ParityCase c{shape.name, shape.desc};
        c.desc.layout = layout;
        c.desc.dtype = dtype;
        c.name +=
            std::string("_") + std::string(to_string(dtype)) + "_" + std::string(to_string(layout));
        cases.push_back(c);
      }
    }
  }
  return cases;
}

class Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Parity, EveryCandidateMatchesTheReferenceAndIsReproducible) {
  const ConvDesc& desc = GetParam().desc;
  for (const Direction direction : all_directions) {
    const test::ConvOperands operands =
        test::random_conv_operands(desc, direction, test::seed_from(GetParam().name));
    const std::vector<float> expected =
        run(reference_backend(), desc, direction, "reference:direct", operands).to_f32();
    const std::vector<float> scale = error_scale(desc, direction, operands);
    const Dims dims = test::conv_output_dims(desc, direction);
    int ran = 0;
    for (const AlgoInfo& info : cpu().conv().list(desc, direction)) {
      const std::string context = test::conv_context(desc, direction, info.id);
      if (!info.supported) {
        // The expected kinds of unsupported candidate: an algorithm oneDNN lacks here, and
        // Note [known oneDNN defects].
        const bool unavailable = info.id.rfind("onednn:unavailable:", 0) == 0;
        const bool defect = info.reason.find("known oneDNN defect") != std::string::npos;
        EXPECT_TRUE(unavailable || defect) << context << "\n" << info.reason;
        continue;
      }
      std::size_t guard_written = 0;
      const Tensor first = run(cpu(), desc, direction, info.id, operands, &guard_written);
      EXPECT_EQ(guard_written, 0u) << context;
      ASSERT_TRUE(test::all_finite(first, "output", context));
      EXPECT_TRUE(test::close_within_scale(first.to_f32(), expected, scale, dims,
                                           test::conv_tolerance(desc.dtype), "output", context));
      if (info.deterministic) {
        const Tensor second = run(cpu(), desc, direction, info.id, operands);
        EXPECT_TRUE(test::bitwise_equal(first, second, "second run", context));
      }
      ++ran;
    }
    EXPECT_GE(ran, 1) << test::conv_context(desc, direction, "(any)");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Parity, ::testing::ValuesIn(parity_cases()),
                         [](const ::testing::TestParamInfo<ParityCase>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------------------------
// Bias.

// bias_fwd on random dst and a `bias_dtype` bias: exact (one f32 addition rounded once to the
// dtype); then bias_bwd of the result into a `diff_bias_dtype` diff_bias, against f64 sums.
void expect_bias(const ConvDesc& desc, DType bias_dtype, DType diff_bias_dtype) {
  const std::string context = test::conv_context(desc, Direction::fwd, "bias");
  const Dims dims = desc.dst_dims();
  const Tensor bias = test::random_tensor(desc.bias_dims(), bias_dtype, Layout::channels_first, 3);
  Tensor dst = test::random_tensor(dims, desc.dtype, desc.layout, 4);
  const std::vector<float> before = dst.to_f32();
  const std::vector<float> bias_values = bias.to_f32();
  cpu().conv().bias_fwd(desc, bias, dst);
  const std::vector<float> after = dst.to_f32();
  const std::int64_t channels = desc.out_channels;
  const std::int64_t spatial = dims.product() / (dims[0] * channels);
  std::vector<double> sums(static_cast<std::size_t>(channels), 0.0);
  std::vector<float> scale(static_cast<std::size_t>(channels), 0.0f);
  for (std::int64_t i = 0; i < dims.product(); ++i) {
    const auto c = static_cast<std::size_t>((i / spatial) % channels);
    const auto k = static_cast<std::size_t>(i);
    ASSERT_EQ(after[k], detail::round_to(desc.dtype, before[k] + bias_values[c]))
        << context << " at " << test::index_string(dims, i);
    sums[c] += after[k];
    scale[c] += std::fabs(after[k]);
  }
  Tensor diff_bias = Tensor::empty(desc.bias_dims(), diff_bias_dtype, Layout::channels_first);
  diff_bias.fill(std::nanf(""));
  cpu().conv().bias_bwd(desc, dst, diff_bias);
  EXPECT_TRUE(test::all_finite(diff_bias, "diff_bias", context));
  EXPECT_TRUE(test::close_within_scale(
      diff_bias.to_f32(), std::vector<float>(sums.begin(), sums.end()), scale, desc.bias_dims(),
      test::conv_tolerance(diff_bias_dtype), "diff_bias", context));
}

class Bias : public ::testing::TestWithParam<std::tuple<DType, Layout>> {};

TEST_P(Bias, ForwardAddsAndBackwardSums) {
  const auto [dtype, layout] = GetParam();
  expect_bias(
      ConvDesc::from_shapes(Dims{3, 5, 6, 7}, Dims{24, 5, 3, 3}, {1}, {1}, {1}, 1, dtype, layout),
      dtype, dtype);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndLayouts, Bias,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16, DType::f16),
                                            ::testing::Values(Layout::channels_first,
                                                              Layout::channels_last)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, Layout>>& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

TEST(OneDnnBackend, BiasOfAnotherDtypeOnALargeTensor) {
  // The bias may have a dtype of its own; where the loops run (Note [bias without oneDNN]) a
  // tensor this large is split over the backend's threads.
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    expect_bias(ConvDesc::from_shapes(Dims{2, 32, 256, 128}, Dims{32, 32, 1, 1}, {1}, {0}, {1}, 1,
                                      DType::f16, layout),
                DType::f32, DType::bf16);
  }
}

TEST(OneDnnBackend, BiasOfOneOutputPosition) {
  // Batch 1 and a 1x1 output: diff_dst has the bias's dims, a reduction over nothing, which
  // oneDNN refuses (dnnl_invalid_arguments); the loops sum it.
  for (const DType dtype : {DType::f32, DType::bf16}) {
    expect_bias(ConvDesc::from_shapes(Dims{1, 3, 1, 1}, Dims{5, 3, 1, 1}, {1}, {0}, {1}, 1, dtype,
                                      Layout::channels_first),
                dtype, dtype);
    expect_bias(ConvDesc::from_shapes(Dims{1, 2, 3, 3}, Dims{4, 2, 3, 3}, {1}, {0}, {1}, 1, dtype,
                                      Layout::channels_last),
                dtype, dtype);
  }
}

TEST(OneDnnBackend, BiasRejectsMismatchedTensors) {
  const ConvDesc desc = ConvDesc::from_shapes(Dims{2, 4, 5, 5}, Dims{8, 4, 3, 3}, {1}, {1});
  Tensor dst = Tensor::zeros(desc.dst_dims(), DType::f32);
  const Tensor short_bias = Tensor::zeros(Dims{7}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"bias", "[8]"},
               [&] { cpu().conv().bias_fwd(desc, short_bias, dst); });
  const Tensor bias = Tensor::zeros(Dims{8}, DType::f32);
  Tensor wrong_dst = Tensor::zeros(Dims{2, 8, 5, 4}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"dst", "2x8x5x5"},
               [&] { cpu().conv().bias_fwd(desc, bias, wrong_dst); });
  const Tensor integer_bias = Tensor::zeros(Dims{8}, DType::i32);
  expect_error(ErrorKind::InvalidArgument, {"bias", "i32", "f16 or bf16"},
               [&] { cpu().conv().bias_fwd(desc, integer_bias, dst); });
}

}  // namespace
}  // namespace dnnx
