// Activations on the cudnn backend (label "gpu"): the candidate list and its support rules (checked
// on every case against Note [expected cudnn activation support]), every supported candidate of
// every direction and desc.saved against the reference backend on the whole activation table, out
// of place and in place, bitwise determinism, misaligned views (the kernels' scalar and head/tail
// paths), odd and large sizes, and the benchmark shape. Every test skips with the reason when no
// usable GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "ops/activation_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

namespace dnnx::test {
namespace {

// A cudnn context with a private, memory-only choice cache (fixed ids must not reach the
// persistent cache file).
Context gpu_context() {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

Tensor to_device(const Tensor& host, Context& context) {
  Tensor device =
      Tensor::empty(host.dims(), host.dtype(), host.layout().value(), context.allocator());
  copy(host, device);
  return device;
}

Tensor to_host(const Tensor& device) {
  Tensor host = Tensor::empty(device.dims(), device.dtype(), device.layout().value());
  copy(device, host);
  return host;
}

std::vector<std::string> ids_of(const std::vector<AlgoInfo>& algos) {
  std::vector<std::string> ids;
  ids.reserve(algos.size());
  for (const AlgoInfo& algo : algos) ids.push_back(algo.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(CudnnActivation, ListsTheKernelAndTheLegacyCall) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::tanh, Dims{2, 3, 4, 5});
  EXPECT_EQ(ids_of(activation_list(context, desc, Direction::fwd)),
            (std::vector<std::string>{"cudnn:kernel:act", "cudnn:legacy:act:tanh"}));
  EXPECT_EQ(activation_list(context, desc, Direction::fwd).front().id, "cudnn:kernel:act");
  EXPECT_EQ(ids_of(activation_list(context, desc, Direction::bwd_data)),
            (std::vector<std::string>{"cudnn:kernel:act:dst", "cudnn:kernel:act:src",
                                      "cudnn:legacy:act:tanh"}));
  for (const AlgoInfo& algo : activation_list(context, desc, Direction::bwd_data)) {
    EXPECT_TRUE(algo.supported) << algo.id << ": " << algo.reason;
    EXPECT_TRUE(algo.deterministic) << algo.id;
    EXPECT_EQ(algo.workspace_bytes, 0u) << algo.id;
  }
  // In-place layers keep dst only: cuDNN's backward, which takes both, is out.
  desc.saved = ActivationSaved::dst;
  for (const AlgoInfo& algo : activation_list(context, desc, Direction::bwd_data)) {
    if (algo.id == "cudnn:kernel:act:dst") {
      EXPECT_TRUE(algo.supported);
    }
    if (algo.id == "cudnn:kernel:act:src") {
      EXPECT_NE(algo.reason.find("reads src"), std::string::npos);
    }
    if (algo.id == "cudnn:legacy:act:tanh") {
      EXPECT_NE(algo.reason.find("reads both x and y"), std::string::npos);
    }
  }
  // cuDNN has no identity activation call.
  const ActivationDesc identity = ActivationDesc::from_dims(ActivationKind::identity, Dims{9});
  for (const AlgoInfo& algo : activation_list(context, identity, Direction::fwd)) {
    if (algo.id.starts_with("cudnn:legacy:")) {
      EXPECT_FALSE(algo.supported);
      EXPECT_NE(algo.reason.find("no identity activation"), std::string::npos) << algo.reason;
    }
  }
  // cudnnActivationBackward's gradient differs from PyTorch's for clipped relu (at the ceiling)
  // and for elu unless alpha = 1 (Note [cudnn activation backward semantics]); their forward
  // calls are exact.
  const ActivationDesc clipped = ActivationDesc::clipped_relu(Dims{2, 9}, 6.0);
  const ActivationDesc elu_half = ActivationDesc::elu(Dims{2, 9}, 0.5);
  const ActivationDesc elu_one = ActivationDesc::elu(Dims{2, 9}, 1.0);
  const auto legacy = [&](const ActivationDesc& d, Direction direction) {
    for (const AlgoInfo& algo : activation_list(context, d, direction))
      if (algo.id.starts_with("cudnn:legacy:")) return algo;
    ADD_FAILURE() << "no legacy candidate for " << d.key();
    return AlgoInfo{};
  };
  EXPECT_TRUE(legacy(clipped, Direction::fwd).supported);
  EXPECT_FALSE(legacy(clipped, Direction::bwd_data).supported);
  EXPECT_NE(legacy(clipped, Direction::bwd_data).reason.find("also at x == ceiling"),
            std::string::npos)
      << legacy(clipped, Direction::bwd_data).reason;
  EXPECT_TRUE(legacy(elu_half, Direction::fwd).supported);
  EXPECT_FALSE(legacy(elu_half, Direction::bwd_data).supported);
  EXPECT_NE(legacy(elu_half, Direction::bwd_data).reason.find("agree only for alpha = 1"),
            std::string::npos)
      << legacy(elu_half, Direction::bwd_data).reason;
  EXPECT_TRUE(legacy(elu_one, Direction::bwd_data).supported)
      << legacy(elu_one, Direction::bwd_data).reason;

  // Swish backward from dst does not exist anywhere.
  ActivationDesc swish = ActivationDesc::from_dims(ActivationKind::swish, Dims{9});
  swish.saved = ActivationSaved::dst;
  for (const AlgoInfo& algo : activation_list(context, swish, Direction::bwd_data)) {
    EXPECT_FALSE(algo.supported) << algo.id;
  }
}

struct GpuRun {
  Tensor output;  // on the host
  std::shared_ptr<const Choice> choice;
};

GpuRun run_gpu(Context& context, const ActivationDesc& desc, Direction direction, const Tensor& src,
               const Tensor& dst, const Tensor& diff_dst, bool in_place) {
  GpuRun run;
  Tensor d_src = to_device(src, context);
  if (direction == Direction::fwd) {
    if (in_place) {
      run.choice = activation_fwd(context, desc, d_src, d_src);
      run.output = to_host(d_src);
    } else {
      Tensor out = to_device(nan_tensor(desc.dims, desc.dtype, desc.layout), context);
      run.choice = activation_fwd(context, desc, d_src, out);
      run.output = to_host(out);
    }
    return run;
  }
  const Tensor d_dst = to_device(dst, context);
  Tensor d_diff_dst = to_device(diff_dst, context);
  const Tensor* saved_src = desc.saved != ActivationSaved::dst ? &d_src : nullptr;
  const Tensor* saved_dst = desc.saved != ActivationSaved::src ? &d_dst : nullptr;
  if (in_place) {
    run.choice = activation_bwd(context, desc, saved_src, saved_dst, d_diff_dst, d_diff_dst);
    run.output = to_host(d_diff_dst);
  } else {
    Tensor out = to_device(nan_tensor(desc.dims, desc.dtype, desc.layout), context);
    run.choice = activation_bwd(context, desc, saved_src, saved_dst, d_diff_dst, out);
    run.output = to_host(out);
  }
  return run;
}

// Note [expected cudnn activation support]: why each cudnn candidate is unsupported for `desc`,
// as a fragment of its reason (empty: supported), from Note [cudnn activation candidates] and
// Note [cudnn activation backward semantics]. The parity test requires the listing to match it
// exactly, so a candidate cannot silently drop out of (or into) the comparison.
std::string expected_unsupported(const ActivationDesc& desc, Direction direction,
                                 const std::string& id) {
  const bool fwd = direction == Direction::fwd;
  const bool has_src = desc.saved != ActivationSaved::dst;
  const bool has_dst = desc.saved != ActivationSaved::src;
  const bool identity = desc.kind == ActivationKind::identity;
  if (id == "cudnn:kernel:act") return {};
  if (id == "cudnn:kernel:act:dst") {
    if (!activation_bwd_from_dst(desc.kind, desc.alpha))
      return "has no derivative as a function of dst";
    return has_dst || identity ? "" : "reads dst";
  }
  if (id == "cudnn:kernel:act:src") return has_src || identity ? "" : "reads src";
  if (id == "cudnn:legacy:act:" + std::string(to_string(desc.kind))) {
    if (identity) return "no identity activation";
    if (fwd) return {};
    if (desc.kind == ActivationKind::clipped_relu) return "also at x == ceiling";
    if (desc.kind == ActivationKind::elu && desc.alpha != 1.0) return "agree only for alpha = 1";
    return has_src && has_dst ? "" : "reads both x and y";
  }
  return "<unknown candidate " + id + ">";
}

class CudnnActivationParity : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(CudnnActivationParity, EveryCandidateEveryDirection) {
  DNNX_REQUIRE_GPU();
  const ActivationCase& c = GetParam();
  const Tensor src = activation_src(c.desc, seed_from(c.name));
  const Tensor dst = reference_activation_fwd(c.desc, src);
  const Tensor diff_dst =
      random_tensor(c.desc.dims, c.desc.dtype, c.desc.layout, seed_from(c.name + "dy"));
  struct Variant {
    Direction direction;
    ActivationSaved saved;
  };
  for (const Variant v : {Variant{Direction::fwd, ActivationSaved::src_and_dst},
                          Variant{Direction::bwd_data, ActivationSaved::src_and_dst},
                          Variant{Direction::bwd_data, ActivationSaved::dst},
                          Variant{Direction::bwd_data, ActivationSaved::src}}) {
    ActivationDesc desc = c.desc;
    desc.saved = v.saved;
    const bool computable = v.direction == Direction::fwd || desc.bwd_computable();
    const Tensor expected = !computable ? Tensor()
                            : v.direction == Direction::fwd
                                ? dst
                                : reference_activation_bwd(desc, src, dst, diff_dst);
    Context base = gpu_context();
    int ran = 0;
    for (const AlgoInfo& algo : activation_list(base, desc, v.direction)) {
      const std::string context = activation_context(desc, v.direction, algo.id);
      const std::string why = expected_unsupported(desc, v.direction, algo.id);
      EXPECT_EQ(algo.supported, why.empty())
          << "listed " << (algo.supported ? "supported" : "unsupported: " + algo.reason)
          << "; expected " << (why.empty() ? "supported" : "unsupported (" + why + ")")
          << " (Note [expected cudnn activation support])\n  " << context;
      if (!algo.supported) {
        if (!why.empty()) {
          EXPECT_NE(algo.reason.find(why), std::string::npos) << algo.reason << "\n  " << context;
        }
        continue;
      }
      if (!why.empty()) continue;  // reported above
      ASSERT_TRUE(computable) << "supported without a derivative\n  " << context;
      Context fixed = base;
      fixed.tune().policy(OpKind::activation, v.direction) = AlgoPolicy::fixed(algo.id);
      const GpuRun out = run_gpu(fixed, desc, v.direction, src, dst, diff_dst, false);
      const GpuRun again = run_gpu(fixed, desc, v.direction, src, dst, diff_dst, false);
      const GpuRun in_place = run_gpu(fixed, desc, v.direction, src, dst, diff_dst, true);
      EXPECT_EQ(out.choice->algo.id, algo.id) << context;
      EXPECT_TRUE(activation_close(desc, v.direction, out.output, expected,
                                   v.direction == Direction::fwd ? nullptr : &diff_dst, context));
      EXPECT_TRUE(bitwise_equal(out.output, again.output, "output", context));
      EXPECT_TRUE(bitwise_equal(out.output, in_place.output, "in-place output", context));
      ++ran;
    }
    // The kernels cover every computable case.
    if (computable) {
      EXPECT_GT(ran, 0) << activation_context(desc, v.direction, "(none)");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnActivationParity, ::testing::ValuesIn(activation_cases()),
                         [](const auto& info) { return info.param.name; });

// Views at element offsets: equal offsets take the vector kernels with a scalar head and tail,
// different ones the scalar kernel. Odd counts leave tails of every length.
TEST(CudnnActivation, MisalignedViewsAndOddCounts) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const std::int64_t count : {1, 7, 8, 9, 1021, 100003}) {
      for (const auto& [src_offset, dst_offset] :
           {std::pair<int, int>{0, 0}, {1, 1}, {3, 3}, {1, 2}, {0, 5}}) {
        ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::elu, Dims{count}, dtype);
        const std::string label = desc.key() + " offsets " + std::to_string(src_offset) + "," +
                                  std::to_string(dst_offset);
        SCOPED_TRACE(label);
        const Tensor src = activation_src(desc, static_cast<std::uint64_t>(count));
        const Tensor expected = reference_activation_fwd(desc, src);
        const std::int64_t padded = count + 8;
        Tensor src_buffer =
            to_device(nan_tensor(Dims{padded}, dtype, Layout::channels_first), context);
        Tensor dst_buffer =
            to_device(nan_tensor(Dims{padded}, dtype, Layout::channels_first), context);
        const std::size_t element = size_of(dtype);
        Tensor d_src = Tensor::view(static_cast<char*>(src_buffer.data()) + src_offset * element,
                                    desc.dims, dtype, Layout::channels_first, context.device());
        Tensor d_dst = Tensor::view(static_cast<char*>(dst_buffer.data()) + dst_offset * element,
                                    desc.dims, dtype, Layout::channels_first, context.device());
        copy(src, d_src);
        for (const char* id : {"cudnn:kernel:act", "cudnn:legacy:act:elu"}) {
          Context fixed = context;
          fixed.tune().policy(OpKind::activation, Direction::fwd) = AlgoPolicy::fixed(id);
          activation_fwd(fixed, desc, d_src, d_dst);
          Tensor got = Tensor::empty(desc.dims, dtype);
          copy(d_dst, got);
          EXPECT_TRUE(
              activation_close(desc, Direction::fwd, got, expected, nullptr, label + " " + id));
        }
        // The elements around the view are untouched.
        const std::vector<float> around = to_host(dst_buffer).to_f32();
        for (std::int64_t i = 0; i < padded; ++i) {
          if (i >= dst_offset && i < dst_offset + count) continue;
          EXPECT_TRUE(std::isnan(around[static_cast<std::size_t>(i)])) << "element " << i;
        }
      }
    }
  }
}

// The relu benchmark case (ResNet-50's relu on 56x56x256 at batch 64, f16, NHWC): correct in
// place, and the kernel at least about as fast as cuDNN's own call (it must beat PyTorch's, which
// the benchmark measures; this guards against regressions that make it clearly slower).
TEST(CudnnActivation, BenchmarkShapeReluInPlace) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::relu, Dims{64, 256, 56, 56},
                                                  DType::f16, Layout::channels_last);
  const Tensor src = activation_src(desc, 5);
  const Tensor expected = reference_activation_fwd(desc, src);
  Tensor d = to_device(src, context);
  const auto choice = activation_fwd(context, desc, d, d);
  EXPECT_EQ(choice->algo.id, "cudnn:kernel:act");
  EXPECT_TRUE(bitwise_equal(to_host(d), expected, "relu in place", desc.repro()));

  const ProfileResult profile = activation_profile(context, desc, Direction::fwd);
  std::cout << profile.table();
  std::map<std::string, double> median;
  for (const ProfileRow& row : profile.rows) {
    if (row.status == CandidateStatus::ok) median[row.algo.id] = row.median_ms;
  }
  ASSERT_TRUE(median.count("cudnn:kernel:act"));
  const double bytes = 2.0 * static_cast<double>(desc.numel()) * 2;
  std::cout << "[ cudnn    ] cudnn:kernel:act moves " << bytes / median["cudnn:kernel:act"] / 1e6
            << " GB/s\n";
  if (median.count("cudnn:legacy:act:relu")) {
    EXPECT_LE(median["cudnn:kernel:act"], 1.25 * median["cudnn:legacy:act:relu"])
        << profile.table();
  }
}

TEST(CudnnActivation, ErrorsNameTheCandidate) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::swish, Dims{2, 3, 4});
  desc.saved = ActivationSaved::dst;
  context.tune().policy(OpKind::activation, Direction::bwd_data) =
      AlgoPolicy::fixed("cudnn:kernel:act:dst");
  try {
    activation_select(context, desc, Direction::bwd_data);
    ADD_FAILURE() << "swish from dst was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported);
    EXPECT_NE(error.message().find("swish has no derivative as a function of dst"),
              std::string::npos)
        << error.what();
  }
  // Host tensors on a cudnn context: named, not crashed on.
  const Tensor host = random_tensor(desc.dims, desc.dtype, desc.layout, 1);
  Tensor out = Tensor::empty(desc.dims, desc.dtype, desc.layout);
  try {
    activation_fwd(context, desc, host, out);
    ADD_FAILURE() << "host tensors were accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("src is on cpu"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
