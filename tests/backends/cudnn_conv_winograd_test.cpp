// Winograd's F(4x4, 3x3) in the cudnn backend (cudnn:winograd:<matmul id>, Note [winograd
// candidates]). Without a GPU: the tile transforms against the direct sums they stand for, the
// kernels' thread index against the transformed layout, the forms (tiles, dilation classes, runs
// of tiles, passes) and the reasons, and whole convolutions run through each direction's form on
// the host (every kernel's work done with the tile and index functions the kernels use, the
// products as loops, in several passes where a small cap asks for them) against the reference
// backend. On a GPU: every direction in both layouts against the reference, the output
// overwritten and a second run's bits equal, two passes over the batch against cuDNN's own
// candidate, the variable that turns them off, and an exhaustive search that times them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_winograd.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace dnnx {
namespace {

namespace wg = cudnn::kernels::winograd;

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};

struct Case {
  std::string name;
  ConvDesc desc;  // f32 channels_first; every test runs it in channels_last too
};

ConvDesc conv(const Dims& src, const Dims& weights, std::int64_t pad, std::int64_t dilation = 1) {
  return ConvDesc::from_shapes(src, weights, {1}, {pad}, {dilation}, 1, DType::f32);
}

std::vector<Case> cases() {
  std::vector<Case> table{
      {"same_16_to_32", conv({2, 16, 12, 12}, {32, 16, 3, 3}, 1)},
      {"unpadded_partial_tiles", conv({1, 8, 13, 11}, {5, 8, 3, 3}, 0)},
      {"three_channels", conv({3, 3, 9, 17}, {7, 3, 3, 3}, 1)},
      {"two_rows", conv({2, 4, 2, 7}, {6, 4, 3, 3}, 1)},
      {"padding_of_2", conv({1, 5, 6, 5}, {4, 5, 3, 3}, 2)},
      {"wide_channels", conv({1, 64, 10, 9}, {48, 64, 3, 3}, 1)},
      // 33 x 33 tiles: the weight gradient's products in two runs of 545 tiles, the last slot
      // empty.
      {"runs_of_tiles", conv({1, 4, 130, 130}, {6, 4, 3, 3}, 1)},
  };
  ConvDesc sides = conv({2, 6, 10, 9}, {8, 6, 3, 3}, 0);
  sides.pad_before = {2, 0, 0};
  sides.pad_after = {0, 1, 0};
  table.push_back({"per_side_padding", sides});
  // Dilation: tiles of one residue class of 4 outputs 2 (3, 4) apart; per-dim, and with
  // padding of other than one dilation.
  table.push_back({"dilation_2", conv({2, 6, 17, 19}, {5, 6, 3, 3}, 2, 2)});
  table.push_back({"dilation_4_unpadded", conv({1, 3, 30, 27}, {4, 3, 3, 3}, 0, 4)});
  ConvDesc mixed = conv({1, 5, 20, 23}, {7, 5, 3, 3}, 0);
  mixed.dilation = {3, 1, 1};
  mixed.pad_before = {4, 1, 0};
  mixed.pad_after = {2, 0, 0};
  table.push_back({"dilation_3x1_per_side_padding", mixed});
  for (Case& c : table) c.desc.validate();
  return table;
}

ConvDesc in_layout(ConvDesc desc, Layout layout) {
  desc.layout = layout;
  return desc;
}

// ---------------------------------------------------------------------------------------------
// The tile transforms (host-side).

TEST(CudnnConvWinograd, TileTransformsAreTheDirectSums) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    float d[wg::points], g[9], dy[16];
    for (float& v : d) v = uniform(random);
    for (float& v : g) v = uniform(random);
    for (float& v : dy) v = uniform(random);
    float u[wg::points], v[wg::points], m[wg::points], y[16];
    wg::filter_tile(g, u);
    wg::input_tile(d, v);
    for (int p = 0; p < wg::points; ++p) m[p] = u[p] * v[p];
    wg::output_tile(m, y);
    // y is the correlation of d with g.
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        double direct = 0;
        for (int r = 0; r < 3; ++r) {
          for (int s = 0; s < 3; ++s) direct += double(d[(i + r) * 6 + j + s]) * g[r * 3 + s];
        }
        EXPECT_NEAR(y[i * 4 + j], direct, 2e-5) << "output " << i << "," << j;
      }
    }
    // g's gradient: G^T [(A dy A^T) . (B^T d B)] G is the correlation of d with dy.
    float z[wg::points], dg[9];
    wg::gradient_tile(dy, z);
    for (int p = 0; p < wg::points; ++p) m[p] = z[p] * v[p];
    wg::filter_gradient_tile(m, dg);
    for (int r = 0; r < 3; ++r) {
      for (int s = 0; s < 3; ++s) {
        double direct = 0;
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) direct += double(dy[i * 4 + j]) * d[(i + r) * 6 + j + s];
        }
        EXPECT_NEAR(dg[r * 3 + s], direct, 2e-5) << "filter gradient " << r << "," << s;
      }
    }
  }
}

// A kernel thread's index names the (tile slot, channel) whose transformed value it stores there,
// in both layouts, with one run of tiles and with several.
TEST(CudnnConvWinograd, ThreadIndicesInvertTheTransformedLayout) {
  for (bool last : {false, true}) {
    for (std::int64_t splits : {1, 3}) {
      wg::Geometry g;
      g.channels_last = last;
      g.batch = 2, g.tiles_h = 3, g.tiles_w = 4;
      g.splits = splits;
      g.split_tiles = (wg::tiles_of(g) + splits - 1) / splits;
      const std::int64_t channels = 5;
      for (std::int64_t index = 0; index < wg::slots_of(g) * channels; ++index) {
        const wg::TileChannel tc =
            wg::tile_channel_of(last, static_cast<std::uint32_t>(index),
                                static_cast<std::uint32_t>(g.split_tiles), channels);
        ASSERT_EQ(wg::transformed_offset(g, channels, 0, tc.channel, tc.tile), index)
            << "channels_last " << last << ", splits " << splits;
        ASSERT_EQ(wg::transformed_offset(g, channels, 7, tc.channel, tc.tile),
                  index + 7 * wg::slots_of(g) * channels);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The listing (host-side).

std::string form_reason(const ConvDesc& desc, Direction direction) {
  std::string why;
  return cudnn::winograd_form(desc, direction, why) ? std::string() : why;
}

TEST(CudnnConvWinograd, FormsAndReasons) {
  const ConvDesc desc = conv({2, 16, 12, 12}, {32, 16, 3, 3}, 1);
  for (Direction direction : all_directions)
    EXPECT_EQ(form_reason(desc, direction), "") << to_string(direction);
  std::string why;
  // 12x12 outputs: 3x3 tiles of 4 per sample, 18 in all; 16 -> 32 channels.
  const auto fwd = cudnn::winograd_form(desc, Direction::fwd, why);
  ASSERT_TRUE(fwd);
  EXPECT_EQ(wg::tiles_of(fwd->geometry), 18);
  EXPECT_EQ(fwd->passes, 1);
  EXPECT_EQ(fwd->product.batch, 36);
  EXPECT_EQ(fwd->product.m, 32);
  EXPECT_EQ(fwd->product.k, 16);
  EXPECT_EQ(fwd->product.n, 18);
  EXPECT_EQ(fwd->filter_bytes, cudnn::workspace_aligned(36 * 32 * 16 * 4));
  // bwd_data: diff_dst's 32 channels in, padded by 2 - 1.
  const auto data = cudnn::winograd_form(desc, Direction::bwd_data, why);
  ASSERT_TRUE(data);
  EXPECT_EQ(data->geometry.in_channels, 32);
  EXPECT_EQ(data->geometry.out_channels, 16);
  EXPECT_EQ(data->geometry.pad_h, 1);
  // The weight gradient's runs of tiles: one for these 18 tiles (and for the other directions
  // always); two runs of 545 for 33 x 33 tiles of 6 x 4 channels, 36 x 2 products.
  const auto weights = cudnn::winograd_form(desc, Direction::bwd_weights, why);
  ASSERT_TRUE(weights);
  EXPECT_EQ(weights->geometry.splits, 1);
  EXPECT_EQ(weights->product.k, 18);
  const auto runs =
      cudnn::winograd_form(conv({1, 4, 130, 130}, {6, 4, 3, 3}, 1), Direction::bwd_weights, why);
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->geometry.splits, 2);
  EXPECT_EQ(runs->geometry.split_tiles, 545);
  EXPECT_EQ(runs->product.batch, 72);
  EXPECT_EQ(runs->product.k, 545);
  EXPECT_EQ(runs->filter_bytes, cudnn::workspace_aligned(2 * 36 * 6 * 4 * 4));
  EXPECT_EQ(runs->in_bytes, cudnn::workspace_aligned(36 * 4 * 1090 * 4));
  // A candidate's listed entry.
  AlgoInfo inner;
  inner.id = "cublaslt:a5";
  inner.name = "cuBLASLt";
  inner.supported = true;
  inner.workspace_bytes = 1024;
  const AlgoInfo info = cudnn::winograd_info(inner, *fwd);
  EXPECT_EQ(info.id, "cudnn:winograd:cublaslt:a5");
  EXPECT_EQ(cudnn::winograd_inner_id(info.id), "cublaslt:a5");
  EXPECT_FALSE(cudnn::winograd_inner_id("cudnn:winograd:"));
  EXPECT_FALSE(cudnn::winograd_inner_id("cudnn:im2col:cublaslt:a5"));
  EXPECT_TRUE(info.has_note("winograd"));
  EXPECT_EQ(info.families, std::vector<std::string>{"winograd"});
  EXPECT_EQ(info.workspace_bytes,
            fwd->filter_bytes + fwd->in_bytes + fwd->out_bytes + inner.workspace_bytes);

  ConvDesc f16 = desc;
  f16.dtype = DType::f16;
  EXPECT_NE(form_reason(f16, Direction::fwd).find("f32 only"), std::string::npos);
  EXPECT_NE(form_reason(conv({2, 8, 9, 9}, {8, 8, 5, 5}, 2), Direction::fwd).find("3x3 kernel"),
            std::string::npos);
  EXPECT_NE(
      form_reason(ConvDesc::from_shapes({2, 8, 9, 9}, {8, 8, 3, 3}, {2}, {1}, {1}, 1, DType::f32),
                  Direction::fwd)
          .find("stride 2x2"),
      std::string::npos);
  // Dilation 2 on 9 outputs: classes of 5 and 4 in tiles of 4, 16 slots a dim for 9 outputs.
  EXPECT_NE(form_reason(conv({2, 8, 9, 9}, {8, 8, 3, 3}, 2, 2), Direction::bwd_data)
                .find("would hold 256 outputs for 81"),
            std::string::npos);
  const auto dilated =
      cudnn::winograd_form(conv({2, 8, 17, 17}, {8, 8, 3, 3}, 2, 2), Direction::bwd_data, why);
  ASSERT_TRUE(dilated) << why;
  EXPECT_EQ(dilated->geometry.class_tiles_h, 3);  // classes of 9 and 8 outputs
  EXPECT_EQ(dilated->geometry.tiles_h, 6);
  EXPECT_EQ(dilated->geometry.pad_h, 2);  // 2 dilations less the padding
  EXPECT_NE(
      form_reason(ConvDesc::from_shapes({2, 8, 9, 9}, {8, 2, 3, 3}, {1}, {1}, {1}, 4, DType::f32),
                  Direction::fwd)
          .find("groups=4"),
      std::string::npos);
  // Padding past the kernel's reach: outputs of only padding, exactly zero, which the
  // transforms would give only to within their rounding.
  EXPECT_NE(form_reason(conv({1, 5, 6, 5}, {4, 5, 3, 3}, 3), Direction::bwd_weights)
                .find("padding of at most 2 x dilation"),
            std::string::npos);
  // A tap that reads only padding: one row of input, padded by 1, with its first and last taps
  // on the padding.
  EXPECT_NE(form_reason(conv({2, 4, 1, 7}, {6, 4, 3, 3}, 1), Direction::fwd).find("dim 0: input 1"),
            std::string::npos);
  EXPECT_NE(form_reason(conv({2, 8, 9}, {8, 8, 3}, 1), Direction::fwd).find("2-D"),
            std::string::npos);
  EXPECT_NE(form_reason(conv({1, 2, 3, 4, 5}, {2, 2, 3, 3, 3}, 1), Direction::fwd).find("2-D"),
            std::string::npos);
  // One sample's tensors over the cap, and passes under a smaller one.
  EXPECT_FALSE(cudnn::winograd_form(desc, Direction::fwd, why, 1000));
  EXPECT_NE(why.find("over"), std::string::npos) << why;
  const std::size_t filter = 36 * 32 * 16 * 4, sample = 36 * 9 * (16 + 32) * 4;
  const auto passes = cudnn::winograd_form(desc, Direction::fwd, why, filter + sample);
  ASSERT_TRUE(passes) << why;
  EXPECT_EQ(passes->passes, 2);
  EXPECT_EQ(passes->geometry.batch, 1);
}

// ---------------------------------------------------------------------------------------------
// Whole convolutions through the forms on the host.

const float* floats(const Tensor& t) { return static_cast<const float*>(t.data()); }

// dst = op(a) op(b) (+ beta dst) for every product of `p`, row-major as MatmulDesc lays them.
void products(const MatmulDesc& p, const float* a, const float* b, float* dst) {
  for (std::int64_t i = 0; i < p.batch; ++i) {
    const float* ai = a + i * p.m * p.k;
    const float* bi = b + i * p.k * p.n;
    float* di = dst + i * p.m * p.n;
    for (std::int64_t r = 0; r < p.m; ++r) {
      for (std::int64_t c = 0; c < p.n; ++c) {
        double sum = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          const float x = p.transpose_a ? ai[k * p.m + r] : ai[r * p.k + k];
          const float y = p.transpose_b ? bi[c * p.k + k] : bi[k * p.n + c];
          sum += double(x) * y;
        }
        di[r * p.n + c] = static_cast<float>(sum + p.beta * di[r * p.n + c]);
      }
    }
  }
}

// The 36 transformed values of each (tile, channel) of `maps` (`channels` maps of h x w),
// reading Rows x Cols a dilation apart from each tile's origin shifted by (-pad_h, -pad_w) and
// transforming with `transform`, as the input and gradient kernels do.
template <int Rows, int Cols, typename Transform>
void transform_maps(const wg::Geometry& g, const float* maps, std::int64_t channels, std::int64_t h,
                    std::int64_t w, std::int64_t pad_h, std::int64_t pad_w, Transform transform,
                    float* out) {
  for (std::int64_t tile = 0; tile < wg::tiles_of(g); ++tile) {
    const wg::TileOrigin origin = wg::tile_origin(g, static_cast<std::uint32_t>(tile));
    for (std::int64_t c = 0; c < channels; ++c) {
      float tile_in[Rows * Cols], t[wg::points];
      for (int i = 0; i < Rows; ++i) {
        for (int j = 0; j < Cols; ++j) {
          const std::int64_t r = origin.row + i * g.dilation_h - pad_h;
          const std::int64_t s = origin.col + j * g.dilation_w - pad_w;
          tile_in[i * Cols + j] =
              r >= 0 && r < h && s >= 0 && s < w
                  ? maps[wg::map_offset(g.channels_last, channels, h, w, origin.n, c, r, s)]
                  : 0.0f;
        }
      }
      transform(tile_in, t);
      for (int p = 0; p < wg::points; ++p)
        out[wg::transformed_offset(g, channels, p, c, tile)] = t[p];
    }
  }
}

// The convolution through `form`, in the output's memory order.
std::vector<float> emulate(const ConvDesc& desc, Direction direction,
                           const cudnn::WinogradForm& form, const test::ConvOperands& operands) {
  const wg::Geometry& g = form.geometry;
  const bool last = g.channels_last;
  const std::int64_t co = g.out_channels, ci = g.in_channels, tiles = wg::tiles_of(g);
  // The slots past the last tile hold zeros, as the kernels write them.
  std::vector<float> filter(static_cast<std::size_t>(wg::points * g.splits * co * ci));
  std::vector<float> in(static_cast<std::size_t>(wg::points * ci * wg::slots_of(g)));
  std::vector<float> out(static_cast<std::size_t>(wg::points * co * wg::slots_of(g)));
  const cudnn::WinogradOperands roles = cudnn::winograd_operands(form, direction);
  const auto part = [&](cudnn::WinogradPart which) {
    return which == cudnn::WinogradPart::filter ? filter.data()
           : which == cudnn::WinogradPart::in   ? in.data()
                                                : out.data();
  };
  const auto product = [&](const MatmulDesc& p) {
    products(p, part(roles.a), part(roles.b), part(roles.dst));
  };
  const std::int64_t in_part = g.batch * ci * g.in_h * g.in_w;
  const std::int64_t out_part = g.batch * co * g.out_h * g.out_w;
  std::vector<float> result(
      static_cast<std::size_t>(test::conv_output_dims(desc, direction).product()));
  if (direction == Direction::bwd_weights) {
    for (std::int64_t pass = 0; pass < form.passes; ++pass) {
      transform_maps<6, 6>(g, floats(operands.src) + pass * in_part, ci, g.in_h, g.in_w, g.pad_h,
                           g.pad_w, wg::input_tile, in.data());
      transform_maps<4, 4>(g, floats(operands.diff_dst) + pass * out_part, co, g.out_h, g.out_w, 0,
                           0, wg::gradient_tile, out.data());
      product(pass == 0 ? form.product : form.accumulating);
    }
    for (std::int64_t o = 0; o < co; ++o) {
      for (std::int64_t i = 0; i < ci; ++i) {
        // The runs' partial gradients {36, splits, co, ci}, summed in run order.
        float t[wg::points], dg[9];
        for (int p = 0; p < wg::points; ++p) {
          t[p] = 0;
          for (std::int64_t r = 0; r < g.splits; ++r)
            t[p] += filter[static_cast<std::size_t>(((p * g.splits + r) * co + o) * ci + i)];
        }
        wg::filter_gradient_tile(t, dg);
        for (int r = 0; r < 3; ++r) {
          for (int s = 0; s < 3; ++s)
            result[wg::weight_offset(last, ci, o, i, r, s)] = dg[r * 3 + s];
        }
      }
    }
    return result;
  }
  const float* weights = floats(operands.weights);
  const bool turned = direction == Direction::bwd_data;
  for (std::int64_t o = 0; o < co; ++o) {
    for (std::int64_t i = 0; i < ci; ++i) {
      float w[9], t[wg::points];
      for (int r = 0; r < 3; ++r) {
        for (int s = 0; s < 3; ++s) {
          w[r * 3 + s] = weights[turned ? wg::weight_offset(last, co, i, o, 2 - r, 2 - s)
                                        : wg::weight_offset(last, ci, o, i, r, s)];
        }
      }
      wg::filter_tile(w, t);
      for (int p = 0; p < wg::points; ++p) filter[((p * co) + o) * ci + i] = t[p];
    }
  }
  const float* maps = floats(turned ? operands.diff_dst : operands.src);
  for (std::int64_t pass = 0; pass < form.passes; ++pass) {
    transform_maps<6, 6>(g, maps + pass * in_part, ci, g.in_h, g.in_w, g.pad_h, g.pad_w,
                         wg::input_tile, in.data());
    product(form.product);
    for (std::int64_t tile = 0; tile < tiles; ++tile) {
      const wg::TileOrigin origin = wg::tile_origin(g, static_cast<std::uint32_t>(tile));
      for (std::int64_t c = 0; c < co; ++c) {
        float t[wg::points], y[16];
        for (int p = 0; p < wg::points; ++p) t[p] = out[wg::transformed_offset(g, co, p, c, tile)];
        wg::output_tile(t, y);
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) {
            const std::int64_t r = origin.row + i * g.dilation_h;
            const std::int64_t s = origin.col + j * g.dilation_w;
            if (r < g.out_h && s < g.out_w) {
              result[static_cast<std::size_t>(
                  pass * out_part +
                  wg::map_offset(last, co, g.out_h, g.out_w, origin.n, c, r, s))] = y[i * 4 + j];
            }
          }
        }
      }
    }
  }
  return result;
}

// Winograd's sums differ from the direct ones by the transforms' rounding (the points 2 and -2
// scale terms by up to 8 each way), which is relative to the magnitudes across a tile rather than
// to each element's own sum of |products|: an input-gradient element at the border of a map,
// reached by few products, shares its tile with elements reached by many. Dense layers stay
// within the f32 bound every candidate meets (1e-5 of the sum of |products|: 0.40 of it at
// worst on the GPU); the dilated backward data passes reached 0.76 of it on the host, so the
// bound here is twice that one, still far below a wrong tap's O(1 / products) of the scale. The
// worst runs print their share.
const test::Tolerance winograd_tolerance{2 * test::conv_tolerance(DType::f32).rel, 0.0};

TEST(CudnnConvWinograd, HostRunsOfTheFormsMatchTheReference) {
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  double worst = 0;
  for (const Case& c : cases()) {
    for (Layout layout : {Layout::channels_first, Layout::channels_last}) {
      const ConvDesc desc = in_layout(c.desc, layout);
      for (Direction direction : all_directions) {
        for (bool small_cap : {false, true}) {
          const std::string where = c.name + (small_cap ? " (passes)" : "") + ": " +
                                    test::conv_context(desc, direction, "winograd on the host");
          std::string why;
          const auto full = cudnn::winograd_form(desc, direction, why);
          ASSERT_TRUE(full) << why << "\n" << where;
          // A cap that leaves room for one sample a pass.
          const std::size_t cap =
              small_cap ? full->filter_bytes + (full->in_bytes + full->out_bytes) /
                                                   static_cast<std::size_t>(desc.batch)
                        : cudnn::winograd_bytes_max;
          const auto form = cudnn::winograd_form(desc, direction, why, cap);
          ASSERT_TRUE(form) << why << "\n" << where;
          if (small_cap) {
            EXPECT_EQ(form->passes, desc.batch) << where;
          }
          const test::ConvOperands operands =
              test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
          const std::vector<float> expected =
              test::run_conv(reference, desc, direction, operands).output.to_f32();
          const Dims dims = test::conv_output_dims(desc, direction);
          std::vector<float> memory = emulate(desc, direction, *form, operands);
          const std::vector<float> actual =
              Tensor::view(memory.data(), dims, DType::f32, desc.layout).to_f32();
          double ratio = 0;
          EXPECT_TRUE(test::close_within_scale(actual, expected,
                                               test::conv_error_scale(desc, direction, operands),
                                               dims, winograd_tolerance, "output", where, &ratio));
          worst = std::max(worst, ratio);
          ++checked;
        }
      }
    }
  }
  std::cout << "[ winograd ] " << checked << " host runs matched the reference; worst error "
            << worst << " of the tolerance\n";
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

// Every Winograd candidate listed for a case, against the reference; the output starts as NaN
// and a second run must give the same bits where the candidate is deterministic.
TEST(CudnnConvWinograd, MatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  double worst = 0;
  for (const Case& c : cases()) {
    for (Layout layout : {Layout::channels_first, Layout::channels_last}) {
      const ConvDesc desc = in_layout(c.desc, layout);
      for (Direction direction : all_directions) {
        const test::CandidateCheck check = test::check_listed_candidates(
            context, reference, desc, direction, winograd_tolerance,
            [](const std::string& id) { return cudnn::winograd_inner_id(id).has_value(); },
            c.name + ": ");
        EXPECT_GT(check.listed, 0u) << c.name << ": " << test::conv_context(desc, direction, "(list)");
        checked += check.checked;
        worst = std::max(worst, check.worst);
      }
    }
  }
  std::cout << "[ cudnn    ] winograd: " << checked
            << " candidate runs matched the reference; worst error " << worst
            << " of the tolerance\n";
}

// A batch whose transformed tensors exceed the cap runs in passes (two samples of 64 channels
// at 900x900: 0.93 GB of transformed tiles each), against cuDNN's heuristic pick on the same
// operands (the reference backend would take minutes).
TEST(CudnnConvWinograd, PassesMatchCudnn) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc = conv({2, 64, 902, 902}, {64, 64, 3, 3}, 0);
  for (Direction direction : all_directions) {
    std::string why;
    const auto form = cudnn::winograd_form(desc, direction, why);
    ASSERT_TRUE(form) << why;
    EXPECT_EQ(form->passes, 2) << to_string(direction);
    const test::ConvOperands operands = test::random_conv_operands(desc, direction, 11);
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    const test::ConvRun cudnn_run = test::run_conv(context, desc, direction, operands);
    std::string id;
    for (const AlgoInfo& info : conv_list(context, desc, direction)) {
      if (cudnn::winograd_inner_id(info.id) && info.supported) {
        id = info.id;
        break;
      }
    }
    ASSERT_FALSE(id.empty()) << "no Winograd candidate listed";
    context.tune().policy(direction) = AlgoPolicy::fixed(id);
    const test::ConvRun winograd_run = test::run_conv(context, desc, direction, operands);
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    EXPECT_EQ(winograd_run.choice->algo.id, id);
    const Dims dims = test::conv_output_dims(desc, direction);
    const std::vector<float> expected = cudnn_run.output.to_f32();
    const std::vector<float> actual = winograd_run.output.to_f32();
    // The error scale conv_error_scale() would give (the sum of |products| of each element),
    // without the reference run: the operands are uniform in [-1, 1), so a product's mean
    // magnitude is 1/4, times the products an element sums (576 for an output and an interior
    // input element, 2 x 900 x 900 for a weight).
    const double terms = direction == Direction::bwd_weights ? 2.0 * 900 * 900 : 64.0 * 9;
    const std::vector<float> scale(expected.size(), static_cast<float>(terms / 4));
    EXPECT_TRUE(test::close_within_scale(actual, expected, scale, dims,
                                         test::conv_tolerance(DType::f32), "output",
                                         test::conv_context(desc, direction, id)));
  }
}

// DNNX_CUDNN_CONV_WINOGRAD=0: one unsupported entry naming the variable in their place.
TEST(CudnnConvWinograd, TurnedOffByTheVariable) {
  DNNX_REQUIRE_GPU();
  const test::ScopedEnv off("DNNX_CUDNN_CONV_WINOGRAD", "0");
  // A context of its own stream has a backend of its own, which reads the settings anew.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Context context = Context(BackendKind::cudnn).with_stream(stream);
  {
    Context context = Context(BackendKind::cudnn).with_stream(stream);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    const ConvDesc desc = cases()[0].desc;
    for (Direction direction : all_directions) {
      std::size_t entries = 0;
      for (const AlgoInfo& info : conv_list(context, desc, direction)) {
        EXPECT_FALSE(cudnn::winograd_inner_id(info.id)) << info.id;
        if (info.id != cudnn::winograd_off_id) continue;
        ++entries;
        EXPECT_FALSE(info.supported);
        EXPECT_NE(info.reason.find("DNNX_CUDNN_CONV_WINOGRAD=0"), std::string::npos) << info.reason;
      }
      EXPECT_EQ(entries, 1u) << to_string(direction);
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Exhaustive selection times the candidates with cuDNN's.
TEST(CudnnConvWinograd, ExhaustiveSelectionTimesThem) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc = conv({1, 64, 66, 66}, {64, 64, 3, 3}, 0);
  for (Direction direction : all_directions) {
    const ProfileResult profile = conv_profile(context, desc, direction);
    bool timed = false;
    for (const auto& row : profile.rows) {
      if (!cudnn::winograd_inner_id(row.algo.id)) continue;
      timed |= row.status == CandidateStatus::ok || row.status == CandidateStatus::abandoned;
    }
    EXPECT_TRUE(timed) << profile.table();
  }
}

}  // namespace
}  // namespace dnnx
