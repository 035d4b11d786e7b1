// The stacked folds of the cudnn backend (cudnn:fold:stacked:<inner id>, Note [stacked folds]).
// Without a GPU: the forms (each dim's treatment, the sets, the inner convolution, the share of
// the products) and the reasons where there is none, the ids and listing entries, and whole
// convolutions run through each direction's form on the host (the sets' weights and boxes copied
// as the plan copies them, the inner convolution on the reference backend) against the reference
// convolution, for 1-, 2- and 3-D forms of stacked and center dims. On a GPU: every stacked
// candidate listed for those convolutions in both layouts (and f16) against the reference, a
// second run's bits equal, the variable that turns them off, and an exhaustive search that
// times them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_folds.hpp"
#include "backends/cudnn/conv_stacked.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {
namespace {

using cudnn::FoldKind;
using cudnn::StackedDim;

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};

struct Case {
  std::string name;
  ConvDesc desc;  // f32 channels_first; the GPU tests run it in channels_last (and f16) too
};

ConvDesc conv(const Dims& src, const Dims& weights, const std::vector<std::int64_t>& pad,
              const std::vector<std::int64_t>& dilation) {
  return ConvDesc::from_shapes(src, weights, {1}, pad, dilation, 1, DType::f32);
}

std::vector<Case> cases() {
  return {
      // DeepLabV3's ASPP at rate 36 on 65x65, scaled down: both dims stacked (4 sets).
      {"aspp_like_stacked", conv({2, 6, 13, 13}, {5, 6, 3, 3}, {7}, {7})},
      // A rate beyond the map: the center tap alone (1 set).
      {"center_both", conv({2, 5, 5, 6}, {4, 5, 3, 3}, {6}, {6})},
      // One dim stacked, the other whole (kernel 3 of dilation 1 over 20).
      {"stacked_and_whole", conv({1, 4, 9, 20}, {6, 4, 3, 3}, {5, 1}, {5, 1})},
      {"stacked_and_center", conv({2, 3, 11, 4}, {5, 3, 3, 3}, {6, 4}, {6, 4})},
      // A 5x5 kernel whose outer taps never reach the 3x3 map.
      {"kernel_5_center", conv({1, 4, 3, 3}, {3, 4, 5, 5}, {6}, {3})},
      {"one_dim", conv({2, 4, 9}, {3, 4, 3}, {5}, {5})},
      {"three_dims", conv({1, 3, 5, 6, 7}, {4, 3, 3, 3, 3}, {3, 4, 4}, {3, 4, 4})},
  };
}

ConvDesc in_layout(ConvDesc desc, Layout layout, DType dtype = DType::f32) {
  desc.layout = layout;
  desc.dtype = dtype;
  return desc;
}

// ---------------------------------------------------------------------------------------------
// The forms (host-side).

TEST(CudnnConvStacked, FormsAndReasons) {
  // DeepLabV3's aspp.d36: 2048 -> 256 channels at 65x65, dilation and padding 36.
  const ConvDesc aspp = ConvDesc::from_shapes({16, 2048, 65, 65}, {256, 2048, 3, 3}, {1}, {36},
                                              {36}, 1, DType::f16, Layout::channels_last);
  std::string why;
  const std::optional<cudnn::StackedForm> form = cudnn::stacked_form(aspp, why);
  ASSERT_TRUE(form) << why;
  EXPECT_EQ(form->dims[0], StackedDim::stacked);
  EXPECT_EQ(form->dims[1], StackedDim::stacked);
  EXPECT_NEAR(form->work, (144.0 / 195) * (144.0 / 195), 1e-12);
  ASSERT_EQ(form->sets.size(), 4u);
  const ConvDesc& inner = form->inner;
  EXPECT_EQ(inner.weights_dims(), (Dims{4 * 256, 2048, 2, 2}));
  EXPECT_EQ(inner.dst_dims(), (Dims{16, 4 * 256, 36, 36}));
  // The input padded by 2 x 36 - 65 after, as a copy: the inner convolution is unpadded.
  EXPECT_EQ(inner.src_dims(), (Dims{16, 2048, 72, 72}));
  EXPECT_TRUE(cudnn::stacked_input_copied(*form));
  EXPECT_EQ(inner.pad_before[0], 0);
  EXPECT_EQ(inner.pad_after[0], 0);
  EXPECT_EQ(inner.dilation[1], 36);
  EXPECT_EQ(inner.layout, Layout::channels_last);
  EXPECT_EQ(inner.dtype, DType::f16);
  // Sets: the first dim slowest; taps 1-2 for outputs [0, 36), taps 0-1 for [36, 65).
  const cudnn::StackedSet& second = form->sets[1];
  EXPECT_EQ(second.tap_first[0], 1);
  EXPECT_EQ(second.outputs[0], 36);
  EXPECT_EQ(second.out_begin[0], 0);
  EXPECT_EQ(second.tap_first[1], 0);
  EXPECT_EQ(second.outputs[1], 29);
  EXPECT_EQ(second.out_begin[1], 36);
  // The workspace besides the inner plan's: the stacked weights, dst and input in f16.
  EXPECT_EQ(cudnn::stacked_buffers_bytes(*form),
            (1024u * 2048 * 4 + 16u * 1024 * 36 * 36 + 16u * 2048 * 72 * 72) * 2);

  // A rate beyond the map (the same ASPP at output stride 16: 33x33): the center tap alone.
  ConvDesc os16 = aspp;
  os16.input = {33, 33, 0};
  const auto center = cudnn::stacked_form(os16, why);
  ASSERT_TRUE(center) << why;
  EXPECT_EQ(center->dims[0], StackedDim::center);
  EXPECT_EQ(center->sets.size(), 1u);
  EXPECT_EQ(center->inner.weights_dims(), (Dims{256, 2048, 1, 1}));
  EXPECT_EQ(center->inner.dst_dims(), os16.dst_dims());
  EXPECT_FALSE(cudnn::stacked_input_copied(*center));
  EXPECT_EQ(cudnn::stacked_buffers_bytes(*center), (256u * 2048 + 16u * 256 * 33 * 33) * 2);
  EXPECT_NEAR(center->work, 1.0 / 9, 1e-12);
  // H = 2d: stacked with no padding to copy.
  ConvDesc exact = aspp;
  exact.input = {72, 72, 0};
  const auto unpadded = cudnn::stacked_form(exact, why);
  ASSERT_TRUE(unpadded) << why;
  EXPECT_FALSE(cudnn::stacked_input_copied(*unpadded));

  // Rate 24 on 65x65: the middle band reads all three taps, no form.
  ConvDesc d24 = aspp;
  d24.dilation = {24, 24, 1};
  d24.pad_before = d24.pad_after = {24, 24, 0};
  EXPECT_FALSE(cudnn::stacked_form(d24, why));
  EXPECT_NE(why.find("no dim whose dilated taps mostly read padding"), std::string::npos) << why;
  // Rate 24 on 33x33: stacked, but 0.94 of the products.
  d24.input = {33, 33, 0};
  EXPECT_FALSE(cudnn::stacked_form(d24, why));
  EXPECT_NE(why.find("of the products, over 0.8"), std::string::npos) << why;
  // Grouped, strided, or padded otherwise: none.
  ConvDesc grouped = aspp;
  grouped.groups = 2;
  EXPECT_FALSE(cudnn::stacked_form(grouped, why));
  EXPECT_NE(why.find("grouped"), std::string::npos) << why;
  ConvDesc strided = aspp;
  strided.stride = {2, 2, 1};
  EXPECT_FALSE(cudnn::stacked_form(strided, why));
  ConvDesc uneven = aspp;
  uneven.pad_after = {35, 35, 0};
  EXPECT_FALSE(cudnn::stacked_form(uneven, why));

  // The fold: its inner convolution, its id, its workspace.
  const std::optional<cudnn::ConvFold> fold = cudnn::conv_fold(aspp, FoldKind::stacked);
  ASSERT_TRUE(fold);
  EXPECT_EQ(fold->folded, inner);
  EXPECT_FALSE(cudnn::conv_fold(d24, FoldKind::stacked));
  AlgoInfo wrapped;
  wrapped.id = "cudnn:engine:45:tile_size=0,kblock=3,stages=4";
  wrapped.variant_of = "cudnn:engine:45";
  wrapped.supported = true;
  wrapped.workspace_bytes = 1000;
  wrapped.notes = {"heuristics_top"};
  const AlgoInfo info = cudnn::fold_info(aspp, *fold, wrapped);
  EXPECT_EQ(info.id, "cudnn:fold:stacked:" + wrapped.id);
  EXPECT_EQ(info.variant_of, "cudnn:fold:stacked:cudnn:engine:45");
  EXPECT_TRUE(info.has_note("fold_stacked"));
  EXPECT_FALSE(info.has_note("heuristics_top"));
  EXPECT_EQ(info.workspace_bytes, 1024u + cudnn::stacked_buffers_bytes(*form));
  const std::optional<cudnn::FoldInnerId> parsed = cudnn::fold_inner_id(info.id);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, FoldKind::stacked);
  EXPECT_EQ(parsed->inner, wrapped.id);
  EXPECT_FALSE(cudnn::fold_inner_id(cudnn::stacked_off_id));
  const AlgoInfo off = cudnn::folds_off_info(FoldKind::stacked, "off here");
  EXPECT_EQ(off.id, cudnn::stacked_off_id);
  EXPECT_FALSE(off.supported);

  // Every case of this file has a form; each output is in exactly one set's box.
  for (const Case& c : cases()) {
    const auto f = cudnn::stacked_form(c.desc, why);
    ASSERT_TRUE(f) << c.name << ": " << why;
    std::int64_t covered = 0;
    for (const cudnn::StackedSet& set : f->sets) {
      std::int64_t box = 1;
      for (int i = 0; i < c.desc.spatial_dims; ++i) {
        const auto s = static_cast<std::size_t>(i);
        box *= set.outputs[s];
        EXPECT_LE(set.outputs[s], f->inner.output_size(i)) << c.name;
        EXPECT_LE(set.out_begin[s] + set.outputs[s], c.desc.output_size(i)) << c.name;
        EXPECT_LE(set.tap_first[s] + f->inner.kernel[s], c.desc.kernel[s]) << c.name;
      }
      covered += box;
    }
    std::int64_t outputs = 1;
    for (int i = 0; i < c.desc.spatial_dims; ++i) outputs *= c.desc.output_size(i);
    EXPECT_EQ(covered, outputs) << c.name;
    EXPECT_LE(f->work, cudnn::stacked_work_max) << c.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Whole convolutions through the forms, on the host.

// A dense channels_first tensor's element index of (n, c, spatial...), spatial padded with 0.
struct Index {
  std::array<std::int64_t, 5> dims{1, 1, 1, 1, 1};
  explicit Index(const Dims& d) {
    for (int i = 0; i < d.rank(); ++i) dims[static_cast<std::size_t>(i)] = d[i];
  }
  std::int64_t operator()(std::int64_t n, std::int64_t c,
                          const std::array<std::int64_t, 3>& p) const {
    return (((n * dims[1] + c) * dims[2] + p[0]) * dims[3] + p[1]) * dims[4] + p[2];
  }
  std::int64_t size() const { return dims[0] * dims[1] * dims[2] * dims[3] * dims[4]; }
};

// Every position of a box of spatial extents `extents` (unused dims 1).
template <typename F>
void for_each_position(const std::array<std::int64_t, 3>& extents, F f) {
  for (std::int64_t a = 0; a < extents[0]; ++a)
    for (std::int64_t b = 0; b < extents[1]; ++b)
      for (std::int64_t c = 0; c < extents[2]; ++c) f(std::array<std::int64_t, 3>{a, b, c});
}

Tensor f32_tensor(const std::vector<float>& values, const Dims& dims) {
  Tensor t = Tensor::empty(dims, DType::f32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

std::array<std::int64_t, 3> extents_of(const ConvDesc& desc, const std::array<std::int64_t, 3>& v) {
  std::array<std::int64_t, 3> e{1, 1, 1};
  for (int i = 0; i < desc.spatial_dims; ++i)
    e[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i)];
  return e;
}

std::array<std::int64_t, 3> plus(const std::array<std::int64_t, 3>& a,
                                 const std::array<std::int64_t, 3>& b) {
  return {a[0] + b[0], a[1] + b[1], a[2] + b[2]};
}

// Runs (desc, direction) as the stacked plan does, with the reference backend for the inner
// convolution and host loops for the sets' copies; returns what the direction writes,
// channels_first f32.
std::vector<float> emulate(Context& reference, const ConvDesc& desc, Direction direction,
                           const cudnn::StackedForm& form, const test::ConvOperands& operands) {
  const ConvDesc& inner = form.inner;
  const std::int64_t k_count = desc.out_channels, c_count = desc.in_channels;
  const Index w(desc.weights_dims()), sw(inner.weights_dims());
  const Index y(desc.dst_dims()), sy(inner.dst_dims());
  std::array<std::int64_t, 3> taps{1, 1, 1};
  for (int i = 0; i < desc.spatial_dims; ++i)
    taps[static_cast<std::size_t>(i)] = inner.kernel[static_cast<std::size_t>(i)];
  auto set_taps = [&](const std::vector<float>& whole, std::vector<float>& stacked, bool gather) {
    for (std::size_t s = 0; s < form.sets.size(); ++s) {
      const std::array<std::int64_t, 3>& from = form.sets[s].tap_first;
      for (std::int64_t k = 0; k < k_count; ++k) {
        for (std::int64_t c = 0; c < c_count; ++c) {
          for_each_position(taps, [&](const std::array<std::int64_t, 3>& p) {
            const std::int64_t outer = w(k, c, plus(p, from));
            const std::int64_t packed = sw(static_cast<std::int64_t>(s) * k_count + k, c, p);
            if (gather) {
              stacked[static_cast<std::size_t>(packed)] = whole[static_cast<std::size_t>(outer)];
            } else {
              stacked[static_cast<std::size_t>(outer)] += whole[static_cast<std::size_t>(packed)];
            }
          });
        }
      }
    }
  };
  // Each set's box between the whole y and the stacked one.
  auto boxes = [&](std::vector<float>& whole, std::vector<float>& stacked, bool into_stacked) {
    for (std::size_t s = 0; s < form.sets.size(); ++s) {
      const auto box = extents_of(desc, form.sets[s].outputs);
      const auto begin = form.sets[s].out_begin;
      for (std::int64_t n = 0; n < desc.batch; ++n) {
        for (std::int64_t k = 0; k < k_count; ++k) {
          for_each_position(box, [&](const std::array<std::int64_t, 3>& p) {
            const auto outer = static_cast<std::size_t>(y(n, k, plus(p, begin)));
            const auto packed =
                static_cast<std::size_t>(sy(n, static_cast<std::int64_t>(s) * k_count + k, p));
            if (into_stacked) {
              stacked[packed] = whole[outer];
            } else {
              whole[outer] = stacked[packed];
            }
          });
        }
      }
    }
  };
  std::vector<float> stacked_weights(static_cast<std::size_t>(sw.size()), 0.0f);
  std::vector<float> stacked_dst(static_cast<std::size_t>(sy.size()), 0.0f);
  test::ConvOperands inner_operands;
  if (direction != Direction::bwd_weights) {
    set_taps(operands.weights.to_f32(), stacked_weights, true);
    inner_operands.weights = f32_tensor(stacked_weights, inner.weights_dims());
  }
  if (direction != Direction::fwd) {
    std::vector<float> diff_dst = operands.diff_dst.to_f32();
    boxes(diff_dst, stacked_dst, true);
    inner_operands.diff_dst = f32_tensor(stacked_dst, inner.dst_dims());
  }
  // The input as the inner convolution reads it: zeros after each padded dim.
  const Index x(desc.src_dims()), sx(inner.src_dims());
  auto interior = [&](const std::vector<float>& from, std::vector<float>& to, bool into_padded) {
    for (std::int64_t n = 0; n < desc.batch; ++n) {
      for (std::int64_t c = 0; c < c_count; ++c) {
        for_each_position(extents_of(desc, desc.input), [&](const std::array<std::int64_t, 3>& p) {
          const auto outer = static_cast<std::size_t>(x(n, c, p));
          const auto padded = static_cast<std::size_t>(sx(n, c, p));
          if (into_padded) {
            to[padded] = from[outer];
          } else {
            to[outer] = from[padded];
          }
        });
      }
    }
  };
  if (direction != Direction::bwd_data) {
    std::vector<float> padded(static_cast<std::size_t>(sx.size()), 0.0f);
    interior(operands.src.to_f32(), padded, true);
    inner_operands.src = f32_tensor(padded, inner.src_dims());
  }
  const std::vector<float> out =
      test::run_conv(reference, inner, direction, inner_operands).output.to_f32();
  switch (direction) {
    case Direction::fwd: {
      // NaN where no box writes.
      std::vector<float> dst(static_cast<std::size_t>(y.size()), std::nanf(""));
      std::vector<float> stacked = out;
      boxes(dst, stacked, false);
      return dst;
    }
    case Direction::bwd_data: {
      std::vector<float> diff_src(static_cast<std::size_t>(x.size()), std::nanf(""));
      interior(out, diff_src, false);
      return diff_src;
    }
    default: {
      std::vector<float> diff_weights(static_cast<std::size_t>(w.size()), 0.0f);
      set_taps(out, diff_weights, false);
      return diff_weights;
    }
  }
}

TEST(CudnnConvStacked, HostRunsOfTheFormsMatchTheReference) {
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::vector<std::pair<std::string, ConvDesc>> named;
  for (const Case& c : cases()) {
    std::string why;
    ASSERT_TRUE(cudnn::stacked_form(c.desc, why)) << c.name << ": " << why;
    named.emplace_back(c.name, c.desc);
  }
  const std::size_t checked = test::check_host_emulation(
      reference, named,
      [&](const ConvDesc& desc, Direction direction, const test::ConvOperands& operands) {
        std::string why;
        return emulate(reference, desc, direction, *cudnn::stacked_form(desc, why), operands);
      },
      "stacked on the host");
  std::cout << "[ stacked  ] " << checked << " host runs matched the reference\n";
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

bool is_stacked_id(const std::string& id) {
  const std::optional<cudnn::FoldInnerId> parsed = cudnn::fold_inner_id(id);
  return parsed && parsed->kind == FoldKind::stacked;
}

// Every stacked candidate listed for a case, against the reference; the output starts as NaN and
// a second run must give the same bits where the candidate is deterministic.
TEST(CudnnConvStacked, MatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  double worst = 0;
  std::vector<ConvDesc> descs;
  for (const Case& c : cases()) {
    for (Layout layout : {Layout::channels_first, Layout::channels_last})
      descs.push_back(in_layout(c.desc, layout));
  }
  descs.push_back(in_layout(cases()[0].desc, Layout::channels_last, DType::f16));
  descs.push_back(in_layout(cases()[1].desc, Layout::channels_last, DType::bf16));
  for (const ConvDesc& desc : descs) {
    for (Direction direction : all_directions) {
      const test::CandidateCheck check =
          test::check_listed_candidates(context, reference, desc, direction,
                                        test::conv_tolerance(desc.dtype), is_stacked_id, "");
      EXPECT_GT(check.listed, 0u) << test::conv_context(desc, direction, "(list)");
      checked += check.checked;
      worst = std::max(worst, check.worst);
    }
  }
  std::cout << "[ cudnn    ] stacked: " << checked
            << " candidate runs matched the reference; worst error " << worst
            << " of the tolerance\n";
}

// DNNX_CUDNN_CONV_STACKED=off: one unsupported entry naming the variable in their place.
TEST(CudnnConvStacked, TurnedOffByTheVariable) {
  DNNX_REQUIRE_GPU();
  const test::ScopedEnv off("DNNX_CUDNN_CONV_STACKED", "off");
  // A context of its own stream has a backend of its own, which reads the settings anew.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    Context context = Context(BackendKind::cudnn).with_stream(stream);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    const ConvDesc desc = cases()[0].desc;
    for (Direction direction : all_directions) {
      std::size_t entries = 0;
      for (const AlgoInfo& info : conv_list(context, desc, direction)) {
        EXPECT_FALSE(is_stacked_id(info.id)) << info.id;
        if (info.id != cudnn::stacked_off_id) continue;
        ++entries;
        EXPECT_FALSE(info.supported);
        EXPECT_NE(info.reason.find("DNNX_CUDNN_CONV_STACKED"), std::string::npos) << info.reason;
      }
      EXPECT_EQ(entries, 1u) << to_string(direction);
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Exhaustive selection times the candidates with cuDNN's.
TEST(CudnnConvStacked, ExhaustiveSelectionTimesThem) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc = in_layout(conv({4, 64, 33, 33}, {32, 64, 3, 3}, {18}, {18}),
                                  Layout::channels_last, DType::f16);
  for (Direction direction : all_directions) {
    const ProfileResult profile = conv_profile(context, desc, direction);
    bool timed = false;
    for (const auto& row : profile.rows) {
      if (!is_stacked_id(row.algo.id)) continue;
      timed |= row.status == CandidateStatus::ok || row.status == CandidateStatus::abandoned;
    }
    EXPECT_TRUE(timed) << profile.table();
  }
}

}  // namespace
}  // namespace dnnx
