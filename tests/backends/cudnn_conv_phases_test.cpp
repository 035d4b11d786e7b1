// The phase folds of the cudnn backend (cudnn:fold:phases:<inner id>, Note [phase folds]).
// Without a GPU: the forms (the inner convolution, the copies' geometry) and the reasons where
// there is none, the ids and listing entries, the copies' index functions (each element of x and
// w in exactly one place of X' and W', both layouts), and whole convolutions run through each
// direction's form on the host (the copies by the kernels' own index functions, the inner
// convolution on the reference backend) against the reference convolution: 1-, 2- and 3-D,
// strides that do and do not divide the padded sizes, a dilated unstrided dim. On a GPU: every
// phase candidate listed for those convolutions in both layouts (and f16, bf16) against the
// reference, a second run's bits equal, the variable that turns them off, and an exhaustive
// search that times them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_folds.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/conv_phases.hpp"
#include "backends/cudnn/kernels/phases.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {
namespace {

using cudnn::FoldKind;
namespace ph = cudnn::kernels::phases;

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};

struct Case {
  std::string name;
  ConvDesc desc;  // f32 channels_first; the GPU tests run it in channels_last (and f16) too
};

ConvDesc conv(const Dims& src, const Dims& weights, const std::vector<std::int64_t>& stride,
              const std::vector<std::int64_t>& pad,
              const std::vector<std::int64_t>& dilation = {1}) {
  return ConvDesc::from_shapes(src, weights, stride, pad, dilation, 1, DType::f32);
}

std::vector<Case> cases() {
  // Its last column is read by no output, but lies within X'.
  ConvDesc uneven = conv({2, 3, 12, 9}, {4, 3, 5, 3}, {2}, {0});
  uneven.pad_before = {2, 1, 0};
  uneven.pad_after = {1, 0, 0};
  return {
      // ResNet-50's stem, scaled down: 7x7 stride 2 over 3 channels (16 taps of 12).
      {"stem_7x7_s2", conv({2, 3, 15, 13}, {4, 3, 7, 7}, {2}, {3})},
      {"stem_3x3_s2", conv({2, 3, 9, 10}, {5, 3, 3, 3}, {2}, {1})},
      // A stride of 3 that does not divide the input: its last two rows and columns are read by
      // no output (past X').
      {"stride_3_unread", conv({2, 2, 11, 8}, {3, 2, 3, 3}, {3}, {0})},
      // One dim strided, the other of stride 1 and dilation 2 (its padding copied into X').
      {"strided_and_dilated", conv({1, 2, 9, 11}, {3, 2, 3, 3}, {2, 1}, {1, 2}, {1, 2})},
      {"uneven_padding", uneven},
      {"one_dim", conv({2, 3, 17}, {4, 3, 5}, {2}, {2})},
      // R(2+1)D's stem, scaled down: 1x7x7 of stride 1, 2, 2.
      {"three_dims_frames", conv({1, 3, 3, 9, 8}, {4, 3, 1, 7, 7}, {1, 2, 2}, {0, 3, 3})},
      {"three_dims_all", conv({1, 2, 5, 7, 6}, {3, 2, 3, 3, 3}, {2}, {1})},
  };
}

ConvDesc in_layout(ConvDesc desc, Layout layout, DType dtype = DType::f32) {
  desc.layout = layout;
  desc.dtype = dtype;
  return desc;
}

// ---------------------------------------------------------------------------------------------
// The forms (host-side).

TEST(CudnnConvPhases, FormsAndReasons) {
  // ResNet-50's stem: 64 x 3 x 224 x 224, 7x7 stride 2, padding 3.
  const ConvDesc stem = ConvDesc::from_shapes({64, 3, 224, 224}, {64, 3, 7, 7}, {2}, {3}, {1}, 1,
                                              DType::f16, Layout::channels_last);
  std::string why;
  const std::optional<cudnn::PhaseForm> form = cudnn::phase_form(stem, why);
  ASSERT_TRUE(form) << why;
  const ConvDesc& inner = form->inner;
  // 16 taps of 4 phases x 3 channels, rounded up to 16 channels in f16; 112 + 4 - 1 positions.
  EXPECT_EQ(inner.src_dims(), (Dims{64, 16, 115, 115}));
  EXPECT_EQ(inner.weights_dims(), (Dims{64, 16, 4, 4}));
  EXPECT_EQ(inner.dst_dims(), stem.dst_dims());
  EXPECT_EQ(inner.stride[0], 1);
  EXPECT_EQ(inner.pad_before[1], 0);
  EXPECT_EQ(inner.pad_after[1], 0);
  EXPECT_EQ(inner.layout, Layout::channels_last);
  EXPECT_EQ(inner.dtype, DType::f16);
  const ph::Geometry& g = form->geometry;
  EXPECT_TRUE(g.channels_last);
  EXPECT_EQ(ph::phase_count(g), 4);
  EXPECT_EQ(g.folded_channels, 16);
  EXPECT_EQ(g.stride[0], 1);  // the lifted dim
  EXPECT_EQ(g.stride[1], 2);
  EXPECT_EQ(g.folded[2], 115);
  EXPECT_EQ(g.folded_kernel[2], 4);
  EXPECT_EQ(ph::geometry_unsupported(g), nullptr);
  // The workspace besides the inner plan's: X' and W' in f16.
  EXPECT_EQ(cudnn::phase_buffers_bytes(*form), cudnn::workspace_aligned(64u * 16 * 115 * 115 * 2) +
                                                   cudnn::workspace_aligned(64u * 16 * 4 * 4 * 2));
  // In f32 the channels stay 12.
  ConvDesc stem32 = stem;
  stem32.dtype = DType::f32;
  stem32.layout = Layout::channels_first;
  const auto form32 = cudnn::phase_form(stem32, why);
  ASSERT_TRUE(form32) << why;
  EXPECT_EQ(form32->inner.src_dims(), (Dims{64, 12, 115, 115}));

  // No form: grouped, unstrided, a dilated strided dim, a kernel shorter than its stride, too
  // many channels x phases.
  ConvDesc grouped = ConvDesc::from_shapes({2, 4, 16, 16}, {4, 2, 3, 3}, {2}, {1}, {1}, 2);
  EXPECT_FALSE(cudnn::phase_form(grouped, why));
  EXPECT_NE(why.find("grouped"), std::string::npos) << why;
  EXPECT_FALSE(cudnn::phase_form(conv({2, 3, 16, 16}, {4, 3, 3, 3}, {1}, {1}), why));
  EXPECT_NE(why.find("no strided dim"), std::string::npos) << why;
  EXPECT_FALSE(cudnn::phase_form(conv({2, 3, 16, 16}, {4, 3, 3, 3}, {2}, {2}, {2}), why));
  EXPECT_NE(why.find("dilation"), std::string::npos) << why;
  EXPECT_FALSE(cudnn::phase_form(conv({2, 3, 16, 16}, {4, 3, 1, 1}, {2}, {0}), why));
  EXPECT_NE(why.find("shorter than its stride"), std::string::npos) << why;
  EXPECT_FALSE(cudnn::phase_form(conv({2, 16, 16, 16}, {4, 16, 3, 3}, {2}, {1}), why));
  EXPECT_NE(why.find("16 x 4 over 32"), std::string::npos) << why;
  EXPECT_TRUE(cudnn::phase_form(conv({2, 8, 16, 16}, {4, 8, 3, 3}, {2}, {1}), why)) << why;

  // The fold: its inner convolution, its id, its workspace.
  const std::optional<cudnn::ConvFold> fold = cudnn::conv_fold(stem, FoldKind::phases);
  ASSERT_TRUE(fold);
  EXPECT_EQ(fold->folded, inner);
  EXPECT_TRUE(fold->copies);
  EXPECT_FALSE(cudnn::conv_fold(grouped, FoldKind::phases));
  AlgoInfo wrapped;
  wrapped.id = "cudnn:engine:40:tile_size=16,tilek=0,stages=3";
  wrapped.variant_of = "cudnn:engine:40";
  wrapped.supported = true;
  wrapped.workspace_bytes = 1000;
  wrapped.notes = {"heuristics_top"};
  const AlgoInfo info = cudnn::fold_info(stem, *fold, wrapped);
  EXPECT_EQ(info.id, "cudnn:fold:phases:" + wrapped.id);
  EXPECT_EQ(info.variant_of, "cudnn:fold:phases:cudnn:engine:40");
  EXPECT_TRUE(info.has_note("fold_phases"));
  EXPECT_FALSE(info.has_note("heuristics_top"));
  EXPECT_EQ(info.workspace_bytes, 1024u + cudnn::phase_buffers_bytes(*form));
  const std::optional<cudnn::FoldInnerId> parsed = cudnn::fold_inner_id(info.id);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, FoldKind::phases);
  EXPECT_EQ(parsed->inner, wrapped.id);
  EXPECT_FALSE(cudnn::fold_inner_id(cudnn::phases_off_id));
  const AlgoInfo off = cudnn::folds_off_info(FoldKind::phases, "off here");
  EXPECT_EQ(off.id, cudnn::phases_off_id);
  EXPECT_FALSE(off.supported);

  // Every case of this file has a form whose inner convolution gives the same output.
  for (const Case& c : cases()) {
    const auto f = cudnn::phase_form(c.desc, why);
    ASSERT_TRUE(f) << c.name << ": " << why;
    EXPECT_EQ(f->inner.dst_dims(), c.desc.dst_dims()) << c.name;
    EXPECT_EQ(ph::geometry_unsupported(f->geometry), nullptr) << c.name;
  }
}

// Each element of x that some output reads is one element of X', the one that holds it (and
// each tap of w one element of W'), in both layouts; the others have no image.
TEST(CudnnConvPhases, CopiesAreInverse) {
  std::size_t checked = 0;
  for (const Case& c : cases()) {
    for (Layout layout : {Layout::channels_first, Layout::channels_last}) {
      std::string why;
      const auto form = cudnn::phase_form(in_layout(c.desc, layout, DType::f16), why);
      ASSERT_TRUE(form) << c.name << ": " << why;
      const ph::Geometry& g = form->geometry;
      const std::int64_t x_count = g.batch * g.channels * g.input[0] * g.input[1] * g.input[2];
      const std::int64_t folded_count =
          g.batch * g.folded_channels * g.folded[0] * g.folded[1] * g.folded[2];
      std::vector<std::int64_t> image(static_cast<std::size_t>(x_count), -2);
      std::int64_t unread = 0;
      for (std::int64_t n = 0; n < g.batch; ++n) {
        for (std::int64_t ch = 0; ch < g.channels; ++ch) {
          for (std::int64_t a = 0; a < g.input[0]; ++a) {
            for (std::int64_t b = 0; b < g.input[1]; ++b) {
              for (std::int64_t d = 0; d < g.input[2]; ++d) {
                const std::int64_t at[3] = {a, b, d};
                const std::int64_t x = ph::offset(g.channels_last, n, ch, at, g.channels, g.input);
                ASSERT_GE(x, 0);
                ASSERT_LT(x, x_count);
                image[static_cast<std::size_t>(x)] = ph::input_image(g, n, ch, at);
                unread += image[static_cast<std::size_t>(x)] < 0;
              }
            }
          }
        }
      }
      // The elements of X' that hold an element of x: each that element's image.
      std::int64_t held = 0;
      for (std::int64_t n = 0; n < g.batch; ++n) {
        for (std::int64_t ch = 0; ch < g.folded_channels; ++ch) {
          for (std::int64_t a = 0; a < g.folded[0]; ++a) {
            for (std::int64_t b = 0; b < g.folded[1]; ++b) {
              for (std::int64_t d = 0; d < g.folded[2]; ++d) {
                const std::int64_t f[3] = {a, b, d};
                const std::int64_t from = ph::input_source(g, n, ch, f);
                // Not an element of x, or one no output reads (its gradient zero, not read).
                if (from < 0 || image[static_cast<std::size_t>(from)] < 0) continue;
                ++held;
                const std::int64_t at =
                    ph::offset(g.channels_last, n, ch, f, g.folded_channels, g.folded);
                ASSERT_LT(at, folded_count);
                EXPECT_EQ(image[static_cast<std::size_t>(from)], at) << c.name;
              }
            }
          }
        }
      }
      EXPECT_EQ(held + unread, x_count) << c.name;
      EXPECT_EQ(unread > 0, c.name == "stride_3_unread" || c.name == "uneven_padding") << c.name;
      // The weights: every tap of w in W', once.
      std::int64_t taps_held = 0;
      for (std::int64_t o = 0; o < g.out_channels; ++o) {
        for (std::int64_t ch = 0; ch < g.folded_channels; ++ch) {
          for (std::int64_t a = 0; a < g.folded_kernel[0]; ++a) {
            for (std::int64_t b = 0; b < g.folded_kernel[1]; ++b) {
              for (std::int64_t d = 0; d < g.folded_kernel[2]; ++d) {
                const std::int64_t q[3] = {a, b, d};
                const std::int64_t from = ph::weight_source(g, o, ch, q);
                if (from < 0) continue;
                ++taps_held;
                // w's element at `from` maps back here.
                std::int64_t tap[3] = {0, 0, 0};
                std::int64_t rest = from, wc = 0;
                if (g.channels_last) {
                  wc = rest % g.channels;
                  rest /= g.channels;
                }
                tap[2] = rest % g.kernel[2];
                rest /= g.kernel[2];
                tap[1] = rest % g.kernel[1];
                rest /= g.kernel[1];
                tap[0] = rest % g.kernel[0];
                rest /= g.kernel[0];
                if (!g.channels_last) {
                  wc = rest % g.channels;
                  rest /= g.channels;
                }
                EXPECT_EQ(rest, o);
                EXPECT_EQ(ph::weight_image(g, o, wc, tap),
                          ph::offset(g.channels_last, o, ch, q, g.folded_channels, g.folded_kernel))
                    << c.name;
              }
            }
          }
        }
      }
      EXPECT_EQ(taps_held, g.out_channels * g.channels * g.kernel[0] * g.kernel[1] * g.kernel[2])
          << c.name;
      ++checked;
    }
  }
  std::cout << "[ phases   ] " << checked << " geometries' copies checked\n";
}

// ---------------------------------------------------------------------------------------------
// Whole convolutions through the forms, on the host.

Tensor f32_tensor(const std::vector<float>& values, const Dims& dims) {
  Tensor t = Tensor::empty(dims, DType::f32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

// Runs (desc, direction) as the phase plan does (desc channels_first f32), with the copies by
// the kernels' index functions and the inner convolution on the reference backend; returns what
// the direction writes.
std::vector<float> emulate(Context& reference, const ConvDesc& desc, Direction direction,
                           const cudnn::PhaseForm& form, const test::ConvOperands& operands) {
  const ph::Geometry& g = form.geometry;
  const ConvDesc& inner = form.inner;
  auto fold = [&](const std::vector<float>& from, const Dims& dims, bool weights) {
    std::vector<float> out(static_cast<std::size_t>(dims.product()), 0.0f);
    const std::int64_t* extents = weights ? g.folded_kernel : g.folded;
    const std::int64_t outer = weights ? g.out_channels : g.batch;
    for (std::int64_t n = 0; n < outer; ++n) {
      for (std::int64_t ch = 0; ch < g.folded_channels; ++ch) {
        for (std::int64_t a = 0; a < extents[0]; ++a) {
          for (std::int64_t b = 0; b < extents[1]; ++b) {
            for (std::int64_t d = 0; d < extents[2]; ++d) {
              const std::int64_t f[3] = {a, b, d};
              const std::int64_t src =
                  weights ? ph::weight_source(g, n, ch, f) : ph::input_source(g, n, ch, f);
              const auto at =
                  static_cast<std::size_t>(ph::offset(false, n, ch, f, g.folded_channels, extents));
              out[at] = src < 0 ? 0.0f : from[static_cast<std::size_t>(src)];
            }
          }
        }
      }
    }
    return out;
  };
  auto unfold = [&](const std::vector<float>& from, const Dims& dims, bool weights) {
    std::vector<float> out(static_cast<std::size_t>(dims.product()), std::nanf(""));
    const std::int64_t* extents = weights ? g.kernel : g.input;
    const std::int64_t outer = weights ? g.out_channels : g.batch;
    for (std::int64_t n = 0; n < outer; ++n) {
      for (std::int64_t ch = 0; ch < g.channels; ++ch) {
        for (std::int64_t a = 0; a < extents[0]; ++a) {
          for (std::int64_t b = 0; b < extents[1]; ++b) {
            for (std::int64_t d = 0; d < extents[2]; ++d) {
              const std::int64_t at[3] = {a, b, d};
              const std::int64_t image =
                  weights ? ph::weight_image(g, n, ch, at) : ph::input_image(g, n, ch, at);
              out[static_cast<std::size_t>(ph::offset(false, n, ch, at, g.channels, extents))] =
                  image < 0 ? 0.0f : from[static_cast<std::size_t>(image)];
            }
          }
        }
      }
    }
    return out;
  };
  test::ConvOperands inner_operands;
  if (direction != Direction::bwd_data) {
    inner_operands.src =
        f32_tensor(fold(operands.src.to_f32(), inner.src_dims(), false), inner.src_dims());
  }
  if (direction != Direction::bwd_weights) {
    inner_operands.weights = f32_tensor(fold(operands.weights.to_f32(), inner.weights_dims(), true),
                                        inner.weights_dims());
  }
  if (direction != Direction::fwd)
    inner_operands.diff_dst = f32_tensor(operands.diff_dst.to_f32(), desc.dst_dims());
  const std::vector<float> out =
      test::run_conv(reference, inner, direction, inner_operands).output.to_f32();
  switch (direction) {
    case Direction::fwd: return out;
    case Direction::bwd_data: return unfold(out, desc.src_dims(), false);
    default: return unfold(out, desc.weights_dims(), true);
  }
}

TEST(CudnnConvPhases, HostRunsOfTheFormsMatchTheReference) {
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::vector<std::pair<std::string, ConvDesc>> named;
  for (const Case& c : cases()) {
    std::string why;
    ASSERT_TRUE(cudnn::phase_form(c.desc, why)) << c.name << ": " << why;
    named.emplace_back(c.name, c.desc);
  }
  const std::size_t checked = test::check_host_emulation(
      reference, named,
      [&](const ConvDesc& desc, Direction direction, const test::ConvOperands& operands) {
        std::string why;
        return emulate(reference, desc, direction, *cudnn::phase_form(desc, why), operands);
      },
      "phases on the host");
  std::cout << "[ phases   ] " << checked << " host runs matched the reference\n";
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

bool is_phase_id(const std::string& id) {
  const std::optional<cudnn::FoldInnerId> parsed = cudnn::fold_inner_id(id);
  return parsed && parsed->kind == FoldKind::phases;
}

// Every phase candidate listed for a case, against the reference; the output starts as NaN and a
// second run must give the same bits where the candidate is deterministic.
TEST(CudnnConvPhases, MatchesTheReference) {
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
    descs.push_back(in_layout(c.desc, Layout::channels_last, DType::f16));
  }
  descs.push_back(in_layout(cases()[0].desc, Layout::channels_last, DType::bf16));
  descs.push_back(in_layout(cases()[1].desc, Layout::channels_first, DType::f16));
  for (const ConvDesc& desc : descs) {
    for (Direction direction : all_directions) {
      const test::CandidateCheck check = test::check_listed_candidates(
          context, reference, desc, direction, test::conv_tolerance(desc.dtype), is_phase_id, "");
      EXPECT_GT(check.listed, 0u) << test::conv_context(desc, direction, "(list)");
      checked += check.checked;
      worst = std::max(worst, check.worst);
    }
  }
  std::cout << "[ cudnn    ] phases: " << checked
            << " candidate runs matched the reference; worst error " << worst
            << " of the tolerance\n";
}

// DNNX_CUDNN_CONV_PHASES=off: one unsupported entry naming the variable in their place.
TEST(CudnnConvPhases, TurnedOffByTheVariable) {
  DNNX_REQUIRE_GPU();
  const test::ScopedEnv off("DNNX_CUDNN_CONV_PHASES", "off");
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
        EXPECT_FALSE(is_phase_id(info.id)) << info.id;
        if (info.id != cudnn::phases_off_id) continue;
        ++entries;
        EXPECT_FALSE(info.supported);
        EXPECT_NE(info.reason.find("DNNX_CUDNN_CONV_PHASES"), std::string::npos) << info.reason;
      }
      EXPECT_EQ(entries, 1u) << to_string(direction);
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Exhaustive selection times the candidates with cuDNN's.
TEST(CudnnConvPhases, ExhaustiveSelectionTimesThem) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc =
      in_layout(conv({8, 3, 64, 64}, {32, 3, 7, 7}, {2}, {3}), Layout::channels_last, DType::f16);
  for (Direction direction : all_directions) {
    const ProfileResult profile = conv_profile(context, desc, direction);
    bool timed = false;
    for (const auto& row : profile.rows) {
      if (!is_phase_id(row.algo.id)) continue;
      timed |= row.status == CandidateStatus::ok || row.status == CandidateStatus::abandoned;
    }
    EXPECT_TRUE(timed) << profile.table();
  }
}

}  // namespace
}  // namespace dnnx
