// The cudnn convolution's single-candidate descriptions (label "gpu"; Note [re-validating
// persisted choices] in src/ops/dispatch.cpp, Note [cudnn conv candidates] in conv.cpp): every
// kind of id is parsed back into its candidate and described on a backend that never listed the
// desc, as the listing describes it; a choice read from the cache file runs in a fresh context
// with no listing at all; the listing made afterwards is the full one. The id parsing tests need
// no GPU.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/matmul.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/conv_im2col.hpp"
#include "backends/cudnn/conv_padded.hpp"
#include "backends/cudnn/graph_util.hpp"
#include "ops/context_state.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx {
namespace {

constexpr Direction directions[] = {Direction::fwd, Direction::bwd_data, Direction::bwd_weights};

using test::ScopedEnv;

// A context with a cudnn backend instance of its own (contexts on one stream share one, so a
// context on a new stream has nothing listed and reads the environment afresh). The stream lives
// as long as the process, as Context::with_stream requires.
Context fresh_context(std::shared_ptr<ChoiceCache> cache = std::make_shared<ChoiceCache>()) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Context context = Context(BackendKind::cudnn).with_stream(stream);
  context.set_choice_cache(std::move(cache));
  return context;
}

ConvDesc make_desc(const Dims& src, const Dims& weights, std::int64_t stride, std::int64_t pad,
                   std::int64_t groups, DType dtype, Layout layout) {
  return ConvDesc::from_shapes(src, weights, {stride}, {pad}, {1}, groups, dtype, layout);
}

// One desc of each kind of candidate: tensor-core engines and knob variants (f16 NHWC), f32
// without TF32 (fma legacy, non-tensor-core engines), 3-D, dnnx's depthwise kernels, grouped,
// and unaligned f16 channels (channel-padded candidates).
struct NamedDesc {
  const char* name;
  ConvDesc desc;
};
std::vector<NamedDesc> descs() {
  return {
      {"f16_nhwc",
       make_desc({4, 64, 14, 14}, {64, 64, 3, 3}, 1, 1, 1, DType::f16, Layout::channels_last)},
      {"f32_nchw",
       make_desc({2, 16, 15, 15}, {32, 16, 3, 3}, 2, 1, 1, DType::f32, Layout::channels_first)},
      {"f16_3d",
       make_desc({2, 16, 6, 8, 8}, {16, 16, 3, 3, 3}, 1, 1, 1, DType::f16, Layout::channels_last)},
      {"depthwise",
       make_desc({2, 32, 16, 16}, {32, 1, 3, 3}, 1, 1, 32, DType::f16, Layout::channels_last)},
      {"grouped",
       make_desc({2, 16, 12, 12}, {16, 4, 3, 3}, 1, 1, 4, DType::f32, Layout::channels_first)},
      {"padc",
       make_desc({2, 12, 16, 16}, {20, 12, 3, 3}, 1, 1, 1, DType::f16, Layout::channels_last)},
  };
}

// `direction` of desc on `context`'s device: the host operands copied there, the output a
// NaN-filled device tensor (unwritten elements fail the finiteness check).
test::ConvRun run_on_device(Context& context, const ConvDesc& desc, Direction direction,
                            const test::ConvOperands& host) {
  test::ConvOperands device;
  if (!host.src.is_null()) device.src = test::device_copy(host.src, context);
  if (!host.weights.is_null()) device.weights = test::device_copy(host.weights, context);
  if (!host.diff_dst.is_null()) device.diff_dst = test::device_copy(host.diff_dst, context);
  test::ConvRun run{test::device_copy(test::nan_tensor(test::conv_output_dims(desc, direction),
                                                       desc.dtype, desc.layout),
                                      context),
                    nullptr};
  switch (direction) {
    case Direction::fwd:
      run.choice = conv_fwd(context, desc, device.src, device.weights, run.output);
      break;
    case Direction::bwd_data:
      run.choice = conv_bwd_data(context, desc, device.diff_dst, device.weights, run.output);
      break;
    case Direction::bwd_weights:
      run.choice = conv_bwd_weights(context, desc, device.src, device.diff_dst, run.output);
      break;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return run;
}

// The notes but those saying where a candidate came from, which a description of one id may
// not know (OpBackend::describe_candidate): cuDNN's heuristics' top configs, a cuBLASLt
// configuration from its heuristic or its list of algorithms (Note [matmul descriptions]), a
// fold's first candidate (Note [scout candidates] in src/tune/select.cpp).
std::vector<std::string> without_origin(std::vector<std::string> notes) {
  for (const char* note : {"heuristics_top", "heuristic", "enumerated", "scout"})
    notes.erase(std::remove(notes.begin(), notes.end(), note), notes.end());
  return notes;
}

// ---- ids (no GPU needed) -----------------------------------------------------------------------

TEST(CudnnConvIds, EngineIdsParseBackIntoTheirConfigs) {
  const std::vector<cudnn::ConfigKey> keys{
      {0, {}},
      {5, {}},
      {123, {}},
      {7, {{0, 2}}},
      {12, {{0, 2}, {3, -1}, {9, 64}}},
      {64, {{1, 0}, {1000, 7}}},  // a knob type past the named ones is spelled k<type>
  };
  for (const auto& key : keys) {
    for (const std::string_view prefix :
         {cudnn::engine_id_prefix, std::string_view("cudnn:fused:engine:")}) {
      const std::string id = cudnn::config_id(key, prefix);
      const std::optional<cudnn::ConfigKey> parsed = cudnn::parse_config_id(id, prefix);
      ASSERT_TRUE(parsed.has_value()) << id;
      EXPECT_EQ(*parsed, key) << id;
      EXPECT_EQ(cudnn::config_id(*parsed, prefix), id);
    }
  }
  // Strings config_id() never makes.
  const std::string k0 = cudnn::config_id({1, {{0, 1}}});  // the first knob's own name
  const std::string named = k0.substr(k0.rfind(':') + 1, k0.find('=') - k0.rfind(':') - 1);
  ASSERT_NE(named, "k0");
  for (const std::string& id :
       {std::string("cudnn:engine:"), std::string("cudnn:engine:none"),
        std::string("cudnn:engine:05"), std::string("cudnn:engine:+5"),
        std::string("cudnn:engine:-1"), std::string("cudnn:engine:5 "),
        std::string("cudnn:engine:5:"), std::string("cudnn:engine:5:") + named,
        std::string("cudnn:engine:5:") + named + "=",
        std::string("cudnn:engine:5:") + named + "=01",
        std::string("cudnn:engine:5:") + named + "=1," + named + "=2",  // repeated
        std::string("cudnn:engine:5:k0=1"),                             // named knob as k<type>
        std::string("cudnn:engine:5:k1000=1,") + named + "=1",          // out of order
        std::string("cudnn:engine:5:no_such_knob=1"), std::string("cudnn:legacy:fwd:gemm:fma"),
        std::string("cudnn:padc:cudnn:engine:5"), std::string("cudnn:fused:engine:5"),
        std::string("engine:5")}) {
    EXPECT_FALSE(cudnn::parse_config_id(id).has_value()) << id;
  }
}

TEST(CudnnConvIds, PaddedIdsNameTheirInnerId) {
  const ConvDesc desc =
      make_desc({2, 3, 16, 16}, {12, 3, 3, 3}, 1, 1, 1, DType::f16, Layout::channels_last);
  const std::optional<ConvDesc> padded = cudnn::channel_padded(desc);
  ASSERT_TRUE(padded.has_value());
  for (const std::string inner : {"cudnn:engine:5", "cudnn:engine:12:tile_k=2",
                                  "cudnn:legacy:fwd:implicit_precomp_gemm:tensor_op"}) {
    AlgoInfo info;
    info.id = inner;
    info.supported = true;
    const AlgoInfo wrapped = cudnn::padded_info(desc, *padded, info);
    EXPECT_EQ(cudnn::padded_inner_id(wrapped.id), inner) << wrapped.id;
  }
  EXPECT_FALSE(cudnn::padded_inner_id("cudnn:engine:5").has_value());
  EXPECT_FALSE(cudnn::padded_inner_id("cudnn:pad:cudnn:engine:5").has_value());
}

// The arguments of `direction` over the operands `host` and the output `out`.
detail::ConvArgs args_into(Direction direction, test::ConvOperands& host, Tensor& out) {
  return detail::ConvArgs::by_shape(direction, direction == Direction::bwd_data ? out : host.src,
                                    direction == Direction::bwd_weights ? out : host.weights,
                                    direction == Direction::fwd ? out : host.diff_dst);
}

// Runs the product of `form` on `context` over the arguments gemm_args() bound.
void run_product(Context& context, const cudnn::GemmForm& form, const detail::MatmulArgs& m) {
  switch (form.direction) {
    case Direction::fwd: matmul_fwd(context, form.desc, *m.a, *m.b, *m.dst); break;
    case Direction::bwd_data:
      matmul_bwd_data(context, form.desc, *m.diff_dst, *m.b, *m.diff_a);
      break;
    default: matmul_bwd_weights(context, form.desc, *m.a, *m.diff_dst, *m.diff_b); break;
  }
}

// Note [gemm candidates]: which convolutions are matrix products, their ids, and that the product
// gemm_args() binds over the convolution's own memory computes what the convolution does, in
// every direction and layout, on the reference backend: the roles and the directions the
// mapping swaps are what a GPU run of the candidates relies on.
TEST(CudnnConvIds, GemmFormsComputeWhatTheConvolutionDoes) {
  for (const bool packed : {false, true}) {
    const std::optional<cudnn::GemmInnerId> inner =
        cudnn::gemm_inner_id(cudnn::gemm_id("cublaslt:a5:t1", packed));
    ASSERT_TRUE(inner.has_value());
    EXPECT_EQ(inner->matmul_id, "cublaslt:a5:t1");
    EXPECT_EQ(inner->packed, packed);
  }
  EXPECT_EQ(cudnn::gemm_id("cublas:gemm_ex", true), "cudnn:gemm:packed:cublas:gemm_ex");
  EXPECT_FALSE(cudnn::gemm_inner_id("cudnn:gemm").has_value());
  EXPECT_FALSE(cudnn::gemm_inner_id("cudnn:gemm:packed:").has_value());
  EXPECT_FALSE(cudnn::gemm_inner_id("cudnn:engine:5").has_value());
  for (const ConvDesc& desc :
       {make_desc({2, 8, 5, 5}, {8, 8, 1, 1}, 2, 0, 1, DType::f32, Layout::channels_first),
        make_desc({2, 8, 5, 5}, {8, 8, 1, 1}, 1, 1, 1, DType::f32, Layout::channels_first),
        make_desc({2, 8, 5, 5}, {8, 4, 1, 1}, 1, 0, 2, DType::f32, Layout::channels_first),
        make_desc({2, 8, 5, 5}, {8, 8, 3, 3}, 1, 1, 1, DType::f32, Layout::channels_last)}) {
    std::string why;
    EXPECT_FALSE(cudnn::gemm_form(desc, Direction::fwd, why).has_value()) << desc;
    EXPECT_NE(why.find("not a matrix product"), std::string::npos) << why;
  }
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<ConvDesc> descs{
      make_desc({3, 6, 4, 5}, {7, 6, 1, 1}, 1, 0, 1, DType::f32, Layout::channels_first),
      make_desc({1, 6, 4, 5}, {7, 6, 1, 1}, 1, 0, 1, DType::f32, Layout::channels_first),
      make_desc({2, 6, 4, 5}, {7, 6, 1, 1}, 1, 0, 1, DType::f32, Layout::channels_last),
      ConvDesc::from_shapes({2, 5, 3, 2, 4}, {6, 5, 1, 1, 1}, {1}, {0}, {2}, 1, DType::f32,
                            Layout::channels_first)};
  // Note [packed gemm]: what the plan's kernel does, on the host: count row-major rows x cols
  // matrices side by side in one rows x (count * cols) matrix.
  const auto side_by_side = [](const Tensor& from, std::int64_t count, std::int64_t rows,
                               std::int64_t cols, char* to_bytes) {
    const auto* in = static_cast<const float*>(from.data());
    auto* to = reinterpret_cast<float*>(to_bytes);
    for (std::int64_t g = 0; g < count; ++g)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          to[(r * count + g) * cols + c] = in[(g * rows + r) * cols + c];
  };
  {  // No packed form where its matrices would take more than its workspace cap.
    const ConvDesc large = make_desc({64, 2048, 56, 56}, {2048, 2048, 1, 1}, 1, 0, 1, DType::f32,
                                     Layout::channels_first);
    std::string why;
    EXPECT_TRUE(cudnn::gemm_form(large, Direction::bwd_weights, why).has_value()) << why;
    EXPECT_FALSE(cudnn::gemm_form(large, Direction::bwd_weights, why, true).has_value());
    EXPECT_NE(why.find("workspace"), std::string::npos) << why;
  }
  for (const ConvDesc& desc : descs) {
    for (const auto& [direction, packed] : {std::pair{Direction::fwd, false},
                                            {Direction::bwd_data, false},
                                            {Direction::bwd_weights, false},
                                            {Direction::fwd, true},
                                            {Direction::bwd_data, true},
                                            {Direction::bwd_weights, true}}) {
      const std::string where = test::conv_context(
          desc, direction, packed ? "cudnn:gemm:packed (reference)" : "cudnn:gemm (reference)");
      std::string why;
      const std::optional<cudnn::GemmForm> form = cudnn::gemm_form(desc, direction, why, packed);
      if (packed && (direction != Direction::bwd_weights || desc.batch < 2 ||
                     desc.layout != Layout::channels_first)) {
        EXPECT_FALSE(form.has_value()) << where;
        EXPECT_NE(why.find("no packed form"), std::string::npos) << why;
        continue;
      }
      ASSERT_TRUE(form.has_value()) << why << "\n" << where;
      EXPECT_EQ(form->packed, packed);
      test::ConvOperands host =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      const std::vector<float> expected =
          test::run_conv(reference, desc, direction, host).output.to_f32();
      const Dims dims = test::conv_output_dims(desc, direction);
      Tensor out = test::nan_tensor(dims, desc.dtype, desc.layout);
      const detail::ConvArgs args = args_into(direction, host, out);
      std::vector<char> packed_memory(cudnn::gemm_packing_bytes(*form));
      if (packed) {
        std::int64_t positions = 1;
        for (int i = 0; i < desc.spatial_dims; ++i) positions *= desc.input[i];
        EXPECT_EQ(form->samples, desc.batch);
        EXPECT_EQ(form->positions, positions);
        EXPECT_GE(packed_memory.size(),
                  static_cast<std::size_t>((desc.out_channels + desc.in_channels) * desc.batch *
                                           positions) *
                      sizeof(float));
        side_by_side(host.diff_dst, desc.batch, desc.out_channels, positions, packed_memory.data());
        side_by_side(host.src, desc.batch, desc.in_channels, positions,
                     packed_memory.data() + cudnn::gemm_packed_src_offset(*form));
      }
      cudnn::GemmViews views;
      const detail::MatmulArgs m =
          cudnn::gemm_args(desc, direction, *form, args, Device::cpu(), views,
                           cudnn::conv_context(desc, direction, "cudnn:gemm"),
                           packed ? static_cast<void*>(packed_memory.data()) : nullptr);
      run_product(reference, *form, m);
      EXPECT_TRUE(test::close_within_scale(out.to_f32(), expected,
                                           test::conv_error_scale(desc, direction, host), dims,
                                           test::conv_tolerance(desc.dtype), "output", where));
    }
  }
}

// Note [im2col candidates]: which convolutions have a column product, and that the column
// matrix of the index functions the kernels share (kernels/im2col.hpp: split, source_position,
// gathered_sum; Note [im2col kernels]), the product
// gemm_args() binds over it and, for bwd_data, the sum back into the input compute what the
// convolution does, in every direction, both layouts, 1-D to 3-D, with stride, asymmetric
// padding and dilation, the packed form of NCHW bwd_weights too, on the reference backend.
TEST(CudnnConvIds, Im2colFormsComputeWhatTheConvolutionDoes) {
  for (const bool packed : {false, true}) {
    const std::optional<cudnn::GemmInnerId> inner =
        cudnn::im2col_inner_id(cudnn::im2col_id("cublaslt:a5:t1", packed));
    ASSERT_TRUE(inner.has_value());
    EXPECT_EQ(inner->matmul_id, "cublaslt:a5:t1");
    EXPECT_EQ(inner->packed, packed);
  }
  EXPECT_FALSE(cudnn::im2col_inner_id("cudnn:im2col").has_value());
  EXPECT_FALSE(cudnn::im2col_inner_id("cudnn:im2col:packed:").has_value());
  EXPECT_FALSE(cudnn::im2col_inner_id("cudnn:gemm:cublaslt:a5").has_value());
  {
    std::string why;
    EXPECT_FALSE(cudnn::im2col_form(
        make_desc({2, 8, 5, 5}, {8, 4, 3, 3}, 1, 1, 2, DType::f32, Layout::channels_first),
        Direction::fwd, why));
    EXPECT_NE(why.find("grouped"), std::string::npos) << why;
    EXPECT_FALSE(cudnn::im2col_form(
        make_desc({2, 8, 5, 5}, {8, 8, 1, 1}, 1, 0, 1, DType::f32, Layout::channels_first),
        Direction::fwd, why));
    EXPECT_NE(why.find("cudnn:gemm"), std::string::npos) << why;
    // A pass takes as many samples as fit the cap; one sample over it has no column product.
    const ConvDesc large = make_desc({64, 256, 112, 112}, {256, 256, 3, 3}, 1, 1, 1, DType::f32,
                                     Layout::channels_first);
    const std::optional<cudnn::Im2colForm> passes = cudnn::im2col_form(large, Direction::fwd, why);
    ASSERT_TRUE(passes.has_value()) << why;
    EXPECT_LE(passes->col_bytes, cudnn::im2col_bytes_max);
    EXPECT_EQ(passes->passes * passes->col_desc.batch, 64);
    EXPECT_GT(passes->passes, 1);
    EXPECT_FALSE(cudnn::im2col_form(
        make_desc({2, 512, 512, 512}, {8, 512, 3, 3}, 1, 1, 1, DType::f32, Layout::channels_first),
        Direction::fwd, why));
    EXPECT_NE(why.find("one sample"), std::string::npos) << why;
  }
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::vector<ConvDesc> descs{
      make_desc({2, 3, 7, 6}, {5, 3, 3, 3}, 1, 1, 1, DType::f32, Layout::channels_first),
      make_desc({2, 4, 9, 8}, {6, 4, 3, 2}, 2, 1, 1, DType::f32, Layout::channels_last),
      make_desc({1, 3, 6, 7}, {4, 3, 2, 3}, 1, 0, 1, DType::f32, Layout::channels_first),
      ConvDesc::from_shapes({2, 3, 4, 5, 6}, {4, 3, 3, 1, 3}, {1, 2, 1}, {1, 0, 1}, {2, 1, 1}, 1,
                            DType::f32, Layout::channels_first),
      ConvDesc::from_shapes({3, 5, 4, 3, 5}, {2, 5, 2, 3, 3}, {2}, {1}, {1}, 1, DType::f32,
                            Layout::channels_last),
      ConvDesc::from_shapes({2, 3, 11}, {4, 3, 3}, {2}, {2}, {2}, 1, DType::f32,
                            Layout::channels_first)};
  descs[0].pad_after = {0, 2, 0};  // asymmetric
  descs[1].dilation = {2, 1, 1};
  // The column matrix of `geometry` over src, and the sum of a column matrix back into src.
  const auto im2col = [](const cudnn::kernels::im2col::Geometry& g, const void* src, Tensor& col) {
    namespace k = cudnn::kernels::im2col;
    const auto* in = static_cast<const float*>(src);
    auto* out = static_cast<float*>(col.data());
    for (std::int64_t i = 0; i < k::col_elements(g); ++i) {
      const k::ColEntry e = k::col_entry(g, i);
      ASSERT_EQ(k::col_offset(g, e.n, e.c, e.tap, e.p), i);
      const std::int64_t q = k::tap_source(g, e.tap, e.p);
      out[i] = q < 0 ? 0.0f : in[k::src_offset(g, e.n, e.c, q)];
    }
  };
  const auto col2im = [](const cudnn::kernels::im2col::Geometry& g, const Tensor& col, void* src) {
    namespace k = cudnn::kernels::im2col;
    const auto* in = static_cast<const float*>(col.data());
    auto* out = static_cast<float*>(src);
    const auto load = [in](std::int64_t offset) { return in[offset]; };
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t c = 0; c < g.channels; ++c)
        for (std::int64_t q = 0; q < g.in_positions; ++q)
          out[k::src_offset(g, n, c, q)] = k::gathered_sum(g, n, c, q, load);
  };
  // Each desc whole, and in passes of one sample (a cap of one sample's column matrix).
  for (const ConvDesc& desc : descs) {
    for (const bool one_sample : {false, true}) {
      for (const auto& [direction, packed] : {std::pair{Direction::fwd, false},
                                              {Direction::bwd_data, false},
                                              {Direction::bwd_weights, false},
                                              {Direction::bwd_weights, true}}) {
        const std::string where = test::conv_context(
            desc, direction,
            detail::cat(packed ? "cudnn:im2col:packed" : "cudnn:im2col",
                        one_sample ? " in passes of one sample" : "", " (reference)"));
        std::string why;
        std::size_t cap = cudnn::im2col_bytes_max;
        if (one_sample) {
          const std::optional<cudnn::Im2colForm> whole = cudnn::im2col_form(desc, direction, why);
          ASSERT_TRUE(whole.has_value()) << why << "\n" << where;
          cap = whole->col_bytes / static_cast<std::size_t>(desc.batch);
        }
        const std::optional<cudnn::Im2colForm> form =
            cudnn::im2col_form(desc, direction, why, packed, cap);
        const std::int64_t samples = one_sample ? 1 : desc.batch;
        if (packed && (samples < 2 || desc.layout != Layout::channels_first)) {
          EXPECT_FALSE(form.has_value()) << where;
          continue;
        }
        ASSERT_TRUE(form.has_value()) << why << "\n" << where;
        EXPECT_EQ(form->passes, desc.batch / samples) << where;
        EXPECT_EQ(form->col_desc.batch, samples) << where;
        EXPECT_EQ(form->gemm.packed, packed);
        EXPECT_EQ(form->geometry.packed, packed);
        EXPECT_EQ(form->col_desc.in_channels, desc.in_channels * form->geometry.taps);
        EXPECT_EQ(form->accumulating.desc.beta, 1.0f);
        test::ConvOperands host =
            test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
        const std::vector<float> expected =
            test::run_conv(reference, desc, direction, host).output.to_f32();
        const Dims dims = test::conv_output_dims(desc, direction);
        Tensor out = test::nan_tensor(dims, desc.dtype, desc.layout);
        Tensor col = test::nan_tensor(form->col_desc.src_dims(), desc.dtype, desc.layout);
        EXPECT_GE(form->col_bytes, col.span_bytes());
        const detail::ConvArgs args = args_into(direction, host, out);
        const ErrorContext context = cudnn::conv_context(desc, direction, "cudnn:im2col");
        Tensor part;
        for (std::int64_t pass = 0; pass < form->passes; ++pass) {
          const cudnn::Im2colPass p = cudnn::im2col_pass(desc, direction, *form, args, pass, col,
                                                         part, Device::cpu(), context);
          if (direction != Direction::bwd_data) im2col(form->geometry, p.src, col);
          // bwd_weights adds the passes after the first.
          const cudnn::GemmForm& gemm =
              pass > 0 && direction == Direction::bwd_weights ? form->accumulating : form->gemm;
          std::vector<char> packed_memory(cudnn::gemm_packing_bytes(gemm));
          if (packed) {  // the part's diff_dst side by side (Note [packed gemm])
            const auto* in = static_cast<const float*>(p.product.diff_dst->data());
            auto* to = reinterpret_cast<float*>(packed_memory.data());
            const std::int64_t rows = desc.out_channels, cols = form->geometry.positions;
            for (std::int64_t g = 0; g < samples; ++g)
              for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < cols; ++c)
                  to[(r * samples + g) * cols + c] = in[(g * rows + r) * cols + c];
          }
          cudnn::GemmViews views;
          const detail::MatmulArgs m = cudnn::gemm_args(
              form->col_desc, direction, gemm, p.product, Device::cpu(), views, context,
              packed ? static_cast<void*>(packed_memory.data()) : nullptr);
          run_product(reference, gemm, m);
          if (direction == Direction::bwd_data) col2im(form->geometry, col, p.diff_src);
        }
        EXPECT_TRUE(test::close_within_scale(out.to_f32(), expected,
                                             test::conv_error_scale(desc, direction, host), dims,
                                             test::conv_tolerance(desc.dtype), "output", where));
      }
    }
  }
}

// ---- descriptions ------------------------------------------------------------------------------

// For every desc and direction: every listed id described by a backend that has never listed the
// desc, compared with the listing (and, for the workspace, with the plan the listing's path
// builds: the plan's workspace is exact); the describing backend lists nothing until asked, and
// then lists exactly what a listing always did.
TEST(CudnnConvDescribe, EveryListedIdIsDescribedAloneAsListed) {
  DNNX_REQUIRE_GPU();
  // Runtime-compiled plans compile for seconds each: listed unsupported on both sides here
  // (their single description is the engine path, exercised by every other engine id).
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", "0");
  const ScopedEnv plans("DNNX_PLAN_DIR", nullptr);
  std::size_t described_ids = 0;
  for (const NamedDesc& named : descs()) {
    for (const Direction direction : directions) {
      const ConvDesc& desc = named.desc;
      SCOPED_TRACE(std::string(named.name) + " " + std::string(to_string(direction)) + ": " +
                   desc.repro(direction));
      Context lister = fresh_context();
      const std::vector<AlgoInfo> listed = conv_list(lister, desc, direction);
      auto& listing_backend = detail::state_of(lister).backend().conv();

      Context describer = fresh_context();
      auto& backend = detail::state_of(describer).backend().conv();
      const cudnn::ConvListingCounts before = cudnn::conv_listing_counts();
      bool any_padded = false;
      for (const AlgoInfo& info : listed) {
        SCOPED_TRACE(info.id);
        std::optional<AlgoInfo> described;
        std::string threw;
        try {
          described = backend.describe_candidate(desc, direction, info.id);
        } catch (const Error& error) {
          threw = error.message();
        }
        if (!threw.empty()) {
          // Allowed only where the plan cannot be built either way (the dispatcher then lists).
          EXPECT_TRUE(info.supported) << "describing an unsupported id threw: " << threw;
          EXPECT_THROW(listing_backend.plan(desc, direction, info.id), Error)
              << "describing threw (" << threw << ") but the listing's plan builds";
          continue;
        }
        if (!info.supported) {
          // An unsupported id is never described as supported (unknown is allowed: the listing
          // decides then).
          EXPECT_TRUE(!described || !described->supported)
              << "listed unsupported (" << info.reason << ") but described supported";
          continue;
        }
        ++described_ids;
        any_padded = any_padded || info.id.rfind("cudnn:padc:", 0) == 0;
        ASSERT_TRUE(described.has_value()) << "a listed supported id is described unknown";
        EXPECT_TRUE(described->supported) << described->reason;
        EXPECT_EQ(described->id, info.id);
        EXPECT_EQ(described->deterministic, info.deterministic);
        EXPECT_EQ(described->overflow_risk, info.overflow_risk);
        EXPECT_EQ(described->saved_state_format, info.saved_state_format);
        EXPECT_EQ(described->families, info.families);
        EXPECT_EQ(without_origin(described->notes), without_origin(info.notes));
        const auto listed_plan = listing_backend.plan(desc, direction, info.id);
        EXPECT_EQ(described->workspace_bytes, listed_plan->algo().workspace_bytes)
            << "the described workspace must be the plan's";
        // The plan the description built is the one the call gets, without listing.
        const auto plan = backend.plan(desc, direction, info.id);
        EXPECT_EQ(plan->algo().workspace_bytes, described->workspace_bytes);
      }
      for (const std::string id :
           {"cudnn:engine:999999", "cudnn:engine:none", "cudnn:nothing",
            "cudnn:legacy:fwd:no_such_algo:fma", "cudnn:padc:cudnn:kernel:depthwise:direct"}) {
        std::optional<AlgoInfo> described;
        ASSERT_NO_THROW(described = backend.describe_candidate(desc, direction, id)) << id;
        EXPECT_TRUE(!described || !described->supported) << id << " described supported";
      }
      const cudnn::ConvListingCounts after = cudnn::conv_listing_counts();
      EXPECT_EQ(after.listed, before.listed) << "describing must not list";
      EXPECT_GT(after.described, before.described);

      // The describing backend's own listing is the full one, plans built above included.
      const std::vector<AlgoInfo> relisted = conv_list(describer, desc, direction);
      EXPECT_GT(cudnn::conv_listing_counts().listed, after.listed);
      ASSERT_EQ(relisted.size(), listed.size());
      for (std::size_t i = 0; i < listed.size(); ++i) {
        EXPECT_EQ(relisted[i].id, listed[i].id) << i;
        EXPECT_EQ(relisted[i].supported, listed[i].supported) << listed[i].id;
      }
      if (const std::optional<ConvDesc> padded = cudnn::channel_padded(desc)) {
        // Note [channel padding]: wrapped are the padded desc's supported tensor-core candidates.
        const std::vector<AlgoInfo> inner = conv_list(lister, *padded, direction);
        const bool wrappable = std::any_of(inner.begin(), inner.end(), [](const AlgoInfo& a) {
          const auto has = [&](const char* note) {
            return std::find(a.notes.begin(), a.notes.end(), note) != a.notes.end();
          };
          return a.supported && has("tensor_cores") && !has("runtime_compiled");
        });
        EXPECT_EQ(any_padded, wrappable) << "channel-padded ids described";
      }
    }
  }
  std::cout << "[ cudnn    ] described " << described_ids << " supported ids alone\n";
}

// A choice an exhaustive search made and saved, read by a fresh context with a fresh backend
// (as another process would): the call runs it with no listing, builds at most its plan (none
// when the plan store has it), and gives the output the first context gave.
TEST(CudnnConvDescribe, AChoiceFromTheFileRunsInAFreshContextWithoutListing) {
  DNNX_REQUIRE_GPU();
  test::TempFolder folder("dnnx-describe");
  const ScopedEnv dir("DNNX_PLAN_DIR", folder.file("plans").c_str());
  // Every plan compiles within its search, so the choice lists no late plans: a late plan at hand
  // by the second context's call would be timed there (Note [late plans]), one more candidate.
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "60");
  CacheFileOptions file;
  file.mode = CacheMode::readwrite;
  file.path = folder.file("tune.json");
  for (const NamedDesc& named : descs()) {
    for (const Direction direction : directions) {
      const ConvDesc& desc = named.desc;
      SCOPED_TRACE(std::string(named.name) + " " + std::string(to_string(direction)) + ": " +
                   desc.repro(direction));
      const test::ConvOperands operands =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      test::ConvRun first;
      {
        Context context = fresh_context(std::make_shared<ChoiceCache>(file));
        context.tune().fwd = context.tune().bwd_data = context.tune().bwd_weights =
            AlgoPolicy::exhaustive();
        first = run_on_device(context, desc, direction, operands);
        EXPECT_GT(first.choice->candidates_timed, 0);
        EXPECT_TRUE(first.choice->late_plans.empty());
      }
      const auto cache = std::make_shared<ChoiceCache>(file);
      Context context = fresh_context(cache);
      context.tune().fwd = context.tune().bwd_data = context.tune().bwd_weights =
          AlgoPolicy::exhaustive();
      const cudnn::ConvListingCounts before = cudnn::conv_listing_counts();
      const test::ConvRun second = run_on_device(context, desc, direction, operands);
      const cudnn::ConvListingCounts after = cudnn::conv_listing_counts();
      EXPECT_EQ(second.choice->algo.id, first.choice->algo.id);
      EXPECT_EQ(second.choice->candidates_timed, first.choice->candidates_timed)
          << "the file's choice, not a new search";
      EXPECT_EQ(cache->file_stats().applied, 1u);
      EXPECT_EQ(after.listed, before.listed) << "a valid choice from the file must not list";
      EXPECT_EQ(after.described, before.described + 1);
      const std::string where = test::conv_context(desc, direction, second.choice->algo.id);
      const Tensor a = test::host_copy_of(first.output);
      const Tensor b = test::host_copy_of(second.output);
      ASSERT_TRUE(test::all_finite(b, "output", where));
      if (second.choice->algo.deterministic) {
        EXPECT_TRUE(test::bitwise_equal(a, b, "output", where));
      } else {
        const Dims dims = test::conv_output_dims(desc, direction);
        EXPECT_TRUE(test::close_within_scale(
            b.to_f32(), a.to_f32(), test::conv_error_scale(desc, direction, operands), dims,
            test::conv_tolerance(desc.dtype), "output", where));
      }
      std::cout << "[ cudnn    ] " << named.name << ' ' << to_string(direction) << ": "
                << second.choice->algo.id << " from the file, nothing listed\n";
    }
  }
}

}  // namespace
}  // namespace dnnx
