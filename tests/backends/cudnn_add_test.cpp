// Tensor add on the cudnn backend (label "gpu"): the candidate list and its support rules (checked
// on every case against Note [expected cudnn add support]), every supported candidate forward and
// backward against the reference backend on the whole add table, bitwise determinism, beta = 0
// never reading dst (nor, backward, diff_src), misaligned views, and large bias gradients in both
// layouts (the chunked reductions of the kernel). Every test skips with the reason when no usable
// GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/add.hpp>

#include "ops/add_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::test {
namespace {

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

const AlgoInfo* find(const std::vector<AlgoInfo>& algos, const std::string& id) {
  for (const AlgoInfo& algo : algos)
    if (algo.id == id) return &algo;
  return nullptr;
}

TEST(CudnnAdd, ListsTheKernelAndTheLegacyCalls) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const AddDesc bias = AddDesc::bias(Dims{2, 16, 5, 5});
  const auto fwd = add_list(context, bias, Direction::fwd);
  ASSERT_EQ(fwd.size(), 3u);
  EXPECT_EQ(fwd.front().id, "cudnn:kernel:add");
  for (const char* id : {"cudnn:kernel:add", "cudnn:legacy:add_tensor", "cudnn:legacy:op_tensor"}) {
    const AlgoInfo* algo = find(fwd, id);
    ASSERT_NE(algo, nullptr) << id;
    EXPECT_TRUE(algo->supported) << id << ": " << algo->reason;
  }
  const auto bwd = add_list(context, bias, Direction::bwd_data);
  ASSERT_EQ(bwd.size(), 3u);
  for (const char* id :
       {"cudnn:kernel:add", "cudnn:legacy:add_tensor", "cudnn:legacy:reduce_tensor"}) {
    ASSERT_NE(find(bwd, id), nullptr) << id;
  }
  EXPECT_EQ(bwd.front().id, "cudnn:kernel:add");
  EXPECT_TRUE(find(bwd, "cudnn:kernel:add")->supported);
  EXPECT_TRUE(find(bwd, "cudnn:legacy:reduce_tensor")->supported)
      << find(bwd, "cudnn:legacy:reduce_tensor")->reason;
  EXPECT_NE(find(bwd, "cudnn:legacy:add_tensor")->reason.find("which cudnnAddTensor does not do"),
            std::string::npos);

  // Without broadcast, backward is a scaled copy: cudnnAddTensor, not cudnnReduceTensor (which
  // rejects a reduction over no axis when run).
  const AddDesc full = AddDesc::from_dims(Dims{2, 3, 4, 5}, Dims{2, 3, 4, 5}, 0.5f, 1.0f);
  const auto full_bwd = add_list(context, full, Direction::bwd_data);
  EXPECT_TRUE(find(full_bwd, "cudnn:legacy:add_tensor")->supported)
      << find(full_bwd, "cudnn:legacy:add_tensor")->reason;
  EXPECT_NE(find(full_bwd, "cudnn:legacy:reduce_tensor")->reason.find("!dims_differ"),
            std::string::npos);
  // cudnnReduceTensor takes no bf16 (its workspace query does, its run does not).
  const AddDesc bf16_bias = AddDesc::bias(Dims{2, 16, 5, 5}, DType::bf16);
  EXPECT_NE(find(add_list(context, bf16_bias, Direction::bwd_data), "cudnn:legacy:reduce_tensor")
                ->reason.find("does not take bf16"),
            std::string::npos);

  // A pattern outside cudnnAddTensor's, and beta = 0 for cudnnOpTensor.
  AddDesc mixed = AddDesc::from_dims(Dims{2, 1, 1, 5}, Dims{2, 3, 4, 5}, 1.0f, 0.0f);
  const auto listed = add_list(context, mixed, Direction::fwd);
  EXPECT_NE(find(listed, "cudnn:legacy:add_tensor")->reason.find("former modes"),
            std::string::npos);
  EXPECT_NE(find(listed, "cudnn:legacy:op_tensor")->reason.find("beta = 0"), std::string::npos);
  EXPECT_TRUE(find(listed, "cudnn:kernel:add")->supported);
}

// Note [expected cudnn add support]: why each cudnn candidate is unsupported for `desc`, as a
// fragment of its reason (empty: supported), from the rules of Note [cudnn add candidates]. The
// parity test requires the listing to match exactly, so a rule that changes fails here instead
// of silently dropping (or adding) candidates.
std::string expected_unsupported(const AddDesc& desc, Direction direction, const std::string& id) {
  const bool same = desc.src_dims == desc.dst_dims;
  if (id == "cudnn:kernel:add") return {};
  if (direction == Direction::fwd) {
    if (id == "cudnn:legacy:add_tensor") {
      // The patterns of cudnnAddTensor's former modes among the table's, in N, C, spatial order
      // after lifting rank 1-3 to 4-D (W, NC, NCW): full, 1xCx1x1, 1xCxHxW, 1x1xHxW.
      static const std::vector<std::pair<Dims, Dims>> accepted = {
          {Dims{1, 3, 1, 1}, Dims{2, 3, 5, 7}},
          {Dims{1, 6, 1, 1}, Dims{1, 6, 4, 3}},
          {Dims{1, 16, 1, 1}, Dims{2, 16, 9, 11}},
          {Dims{1, 3, 5, 7}, Dims{2, 3, 5, 7}},
          {Dims{1, 1, 5, 7}, Dims{2, 3, 5, 7}},
          {Dims{1}, Dims{17}},
          {Dims{1, 8}, Dims{5, 8}},
          {Dims{1, 4, 1}, Dims{3, 4, 9}},
          {Dims{1, 3, 1, 1, 1}, Dims{2, 3, 2, 3, 4}}};
      const bool ok = same || std::find(accepted.begin(), accepted.end(),
                                        std::pair{desc.src_dims, desc.dst_dims}) != accepted.end();
      return ok ? "" : "former modes";
    }
    if (id == "cudnn:legacy:op_tensor") return desc.beta == 0 ? "beta = 0" : "";
  } else {
    if (id == "cudnn:legacy:add_tensor") return same ? "" : "which cudnnAddTensor does not do";
    if (id == "cudnn:legacy:reduce_tensor") {
      if (same) return "!dims_differ";
      return desc.dtype == DType::bf16 ? "does not take bf16" : "";
    }
  }
  return "<unknown candidate " + id + ">";
}

class CudnnAddParity : public ::testing::TestWithParam<AddCase> {};

TEST_P(CudnnAddParity, EveryCandidateBothDirections) {
  DNNX_REQUIRE_GPU();
  const AddCase& c = GetParam();
  const AddDesc& desc = c.desc;
  const Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from(c.name));
  const Tensor dst0 = desc.beta == 0 ? nan_tensor(desc.dst_dims, desc.dtype, desc.layout)
                                     : random_tensor(desc.dst_dims, desc.dtype, desc.layout,
                                                     seed_from(c.name + "dst"));
  const Tensor diff_dst =
      random_tensor(desc.dst_dims, desc.dtype, desc.layout, seed_from(c.name + "dy"));
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const Tensor expected = direction == Direction::fwd ? reference_add_fwd(desc, src, dst0)
                                                        : reference_add_bwd(desc, diff_dst);
    Context base = gpu_context();
    int ran = 0;
    for (const AlgoInfo& algo : add_list(base, desc, direction)) {
      const std::string context = add_context(desc, direction, algo.id);
      const std::string why = expected_unsupported(desc, direction, algo.id);
      EXPECT_EQ(algo.supported, why.empty())
          << "listed " << (algo.supported ? "supported" : "unsupported: " + algo.reason)
          << "; expected " << (why.empty() ? "supported" : "unsupported (" + why + ")")
          << " (Note [expected cudnn add support])\n  " << context;
      if (!algo.supported) {
        if (!why.empty()) {
          EXPECT_NE(algo.reason.find(why), std::string::npos) << algo.reason << "\n  " << context;
        }
        continue;
      }
      if (!why.empty()) continue;  // reported above; cuDNN may well fail when run
      Context fixed = base;
      fixed.tune().policy(OpKind::add, direction) = AlgoPolicy::fixed(algo.id);
      const auto run = [&] {
        if (direction == Direction::fwd) {
          const Tensor d_src = to_device(src, fixed);
          Tensor d_dst = to_device(dst0, fixed);
          EXPECT_EQ(add_fwd(fixed, desc, d_src, d_dst)->algo.id, algo.id) << context;
          return to_host(d_dst);
        }
        const Tensor d_diff_dst = to_device(diff_dst, fixed);
        Tensor d_diff_src = to_device(nan_tensor(desc.src_dims, desc.dtype, desc.layout), fixed);
        EXPECT_EQ(add_bwd(fixed, desc, d_diff_dst, d_diff_src)->algo.id, algo.id) << context;
        return to_host(d_diff_src);
      };
      const Tensor out = run();
      const Tensor again = run();
      EXPECT_TRUE(add_close(desc, direction, out, expected, src, dst0, diff_dst, context));
      if (algo.deterministic) {
        EXPECT_TRUE(bitwise_equal(out, again, "output", context));
      }
      ++ran;
    }
    EXPECT_GT(ran, 0) << add_context(desc, direction, "(none)");
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnAddParity, ::testing::ValuesIn(add_cases()),
                         [](const auto& info) { return info.param.name; });

// Bias gradients large enough that the kernel splits the reduction into chunks (Note [broadcast
// add kernels]): columns in channels_last, rows in channels_first; f16 accumulates in f32.
TEST(CudnnAdd, LargeBiasGradientsBothLayouts) {
  DNNX_REQUIRE_GPU();
  for (const Layout layout : {Layout::channels_last, Layout::channels_first}) {
    for (const DType dtype : {DType::f32, DType::f16}) {
      const AddDesc desc = AddDesc::bias(Dims{8, 256, 56, 56}, dtype, layout);
      SCOPED_TRACE(desc.key());
      const Tensor diff_dst = random_tensor(desc.dst_dims, dtype, layout, 3);
      const Tensor expected = reference_add_bwd(desc, diff_dst);
      Context context = gpu_context();
      const Tensor d_diff_dst = to_device(diff_dst, context);
      for (const AlgoInfo& algo : add_list(context, desc, Direction::bwd_data)) {
        if (!algo.supported) continue;
        Context fixed = context;
        fixed.tune().policy(OpKind::add, Direction::bwd_data) = AlgoPolicy::fixed(algo.id);
        Tensor d_diff_src = to_device(nan_tensor(desc.src_dims, dtype, layout), fixed);
        add_bwd(fixed, desc, d_diff_dst, d_diff_src);
        const Tensor out = to_host(d_diff_src);
        EXPECT_TRUE(add_close(desc, Direction::bwd_data, out, expected, Tensor(), Tensor(),
                              diff_dst, add_context(desc, Direction::bwd_data, algo.id)));
        Tensor again_device = to_device(nan_tensor(desc.src_dims, dtype, layout), fixed);
        add_bwd(fixed, desc, d_diff_dst, again_device);
        if (algo.deterministic) {
          EXPECT_TRUE(bitwise_equal(out, to_host(again_device), "output", algo.id));
        }
      }
      const ProfileResult profile = add_profile(context, desc, Direction::bwd_data);
      std::cout << profile.table();
    }
  }
}

// dst at an odd element offset: the forward kernel's scalar path.
TEST(CudnnAdd, MisalignedDst) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const AddDesc desc = AddDesc::from_dims(Dims{1, 8, 1, 1}, Dims{3, 8, 5, 5}, 0.5f, 2.0f,
                                          DType::f16, Layout::channels_last);
  const Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
  const Tensor dst0 = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
  const Tensor expected = reference_add_fwd(desc, src, dst0);
  Tensor buffer = to_device(
      nan_tensor(Dims{desc.dst_dims.product() + 1}, desc.dtype, Layout::channels_first), context);
  Tensor d_dst = Tensor::view(static_cast<char*>(buffer.data()) + size_of(desc.dtype),
                              desc.dst_dims, desc.dtype, desc.layout, context.device());
  copy(dst0, d_dst);
  const Tensor d_src = to_device(src, context);
  context.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::fixed("cudnn:kernel:add");
  add_fwd(context, desc, d_src, d_dst);
  Tensor out = Tensor::empty(desc.dst_dims, desc.dtype, desc.layout);
  copy(d_dst, out);
  EXPECT_TRUE(add_close(desc, Direction::fwd, out, expected, src, dst0, Tensor(), "misaligned"));
}

// Note [graphs that do not pay]: a plan whose pointer sets each come twice and never again
// captures a graph per set and replays none; after captures_before_judging of them it runs its
// launches directly. Every call's result, on either side of that switch, matches the reference.
TEST(CudnnAdd, StopsCapturingWhenGraphsAreNotReplayed) {
  DNNX_REQUIRE_GPU();
  const AddDesc desc = AddDesc::from_dims(Dims{2, 8, 4, 4}, Dims{2, 8, 4, 4}, 1.0f, 1.0f,
                                          DType::f16, Layout::channels_last);
  Context context = gpu_context();
  context.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::fixed("cudnn:kernel:add");
  const int sets = 40;  // more than the 32 captures after which the plan is judged
  std::vector<Tensor> srcs, dsts, d_srcs, d_dsts;  // all alive: 40 distinct pointer sets
  for (int i = 0; i < sets; ++i) {
    srcs.push_back(random_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from("s") + i));
    dsts.push_back(random_tensor(desc.dst_dims, desc.dtype, desc.layout, seed_from("d") + i));
    d_srcs.push_back(to_device(srcs.back(), context));
    d_dsts.push_back(to_device(dsts.back(), context));
  }
  for (int i = 0; i < sets; ++i) {
    for (int call = 0; call < 3; ++call) {  // the second call with these pointers captures
      copy(dsts[i], d_dsts[i]);
      add_fwd(context, desc, d_srcs[i], d_dsts[i]);
      EXPECT_TRUE(add_close(desc, Direction::fwd, to_host(d_dsts[i]),
                            reference_add_fwd(desc, srcs[i], dsts[i]), srcs[i], dsts[i], Tensor(),
                            "set " + std::to_string(i) + " call " + std::to_string(call)));
      if (call == 1 && i + 1 < sets) break;  // the last set's third call: after the switch
    }
  }
}

// Note [graph replay]: one plan called in turn on several pointer sets (as a network's identical
// layers call it) replays each set's own graph; every call's result matches the reference, with
// each set's dst refilled before the call so that a replay on another set's memory shows.
TEST(CudnnAdd, ReplaysEachPointerSetOfOnePlan) {
  DNNX_REQUIRE_GPU();
  const AddDesc desc = AddDesc::from_dims(Dims{4, 16, 6, 6}, Dims{4, 16, 6, 6}, 1.0f, 1.0f,
                                          DType::f16, Layout::channels_last);
  for (const char* id : {"cudnn:legacy:op_tensor", "cudnn:kernel:add"}) {
    Context context = gpu_context();
    context.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::fixed(id);
    constexpr int sets = 3;
    std::vector<Tensor> srcs, dsts, d_srcs, d_dsts;
    for (int i = 0; i < sets; ++i) {
      srcs.push_back(random_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from("src") + i));
      dsts.push_back(random_tensor(desc.dst_dims, desc.dtype, desc.layout, seed_from("dst") + i));
      d_srcs.push_back(to_device(srcs.back(), context));
      d_dsts.push_back(to_device(dsts.back(), context));
    }
    for (int round = 0; round < 4; ++round) {
      for (int i = 0; i < sets; ++i) {
        copy(dsts[i], d_dsts[i]);
        EXPECT_EQ(add_fwd(context, desc, d_srcs[i], d_dsts[i])->algo.id, id);
        const std::string what =
            std::string(id) + " set " + std::to_string(i) + " round " + std::to_string(round);
        EXPECT_TRUE(add_close(desc, Direction::fwd, to_host(d_dsts[i]),
                              reference_add_fwd(desc, srcs[i], dsts[i]), srcs[i], dsts[i], Tensor(),
                              what));
      }
    }
  }
}

}  // namespace
}  // namespace dnnx::test
