#include "backends/cudnn/conv_winograd.hpp"

#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <utility>

namespace dnnx::cudnn {

// Note [winograd candidates]
// Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, 2016) computes a 4x4 tile of a 3x3
// convolution's output from a 6x6 tile of its input with 36 multiplications per input and
// output channel pair where the direct sum takes 144: transformed, every one of the 36 points
// of a tile is an independent matrix product over the channels (kernels/winograd.hpp has the
// transforms). So a 2-D ungrouped 3x3 convolution of stride 1 runs as
//   fwd          U = G w G^T per filter, V = B^T d B per input tile and channel, M = U V (36
//                products {out, in} x {in, tiles}), y = A^T M A per tile;
//   bwd_data     the same on diff_dst with the filters turned by 180 degrees and transposed
//                (the input gradient of a stride-1 3x3 correlation of dilation d is the
//                correlation of the output gradient padded by 2 d - pad with the turned filters);
//   bwd_weights  V as in fwd, Z = A dy A^T per output-gradient tile, dU = Z V^T (36 products
//                {out, tiles} x {tiles, in}, summed over the tiles), dw = G^T dU G;
// the products one batched call of the cudnn matmul backend (cuBLASLt), the transforms dnnx's
// kernels (Note [winograd transform kernels] in kernels/winograd.cu), in channels_first with the
// tiles innermost and in channels_last with the channels innermost, so that each product reads
// and writes its operands as they lie. This is cuDNN's own WINOGRAD_NONFUSED algorithm, but
// with the product over every tile of the batch in one call and cuBLASLt's configurations for
// it: in fp32 without tensor cores, cuDNN's candidates (its Winograd ones among them) ran the
// suite's batch-1 U-Net 3x3 layers at 30-40 TFLOP/s of direct arithmetic on an H200
// (docs/benchmarks.md), a quarter of the multiplications that would take less time even at a
// lower rate. Only f32 is listed: f16 and bf16 have cuDNN's tensor-core engines, and the
// transforms' rounding (the points 2 and -2 scale by up to 8 each way) costs more there.
// A dilation d interleaves d independent convolutions per dim (the outputs of one residue class
// mod d read only inputs of theirs), so a tile takes 4 outputs of one class, d apart, and its 6
// inputs d apart (kernels/winograd.hpp, Geometry): cuDNN has no Winograd algorithm for them. A
// class shorter than its tiles leaves slots empty; where the tiles would hold more than 3 times
// the outputs (a dilation close to the map's size: DeepLabV3's rate 36 on 65x65), nothing is
// saved and none is listed.
// The result differs from the direct sum by the transforms' rounding, relative to the magnitudes
// across a tile (tests/backends/cudnn_conv_winograd_test.cpp prints its worst share of the f32
// bound). An output or a weight tap that reads only padding is exactly zero, which the
// transforms would give only to within their rounding, so every output and every tap must reach
// the input: padding of at most 2 d per side, and 2 d within the input and its smaller padding.
// The transformed tensors of a whole batch can take gigabytes (36 values per 16 outputs per
// channel), so a pass takes the largest divisor of the batch whose tensors fit
// winograd_bytes_max (the filters' included); bwd_weights' passes after the first add their
// products into dU (beta 1), and the filter gradient is transformed once at the end. The
// weight gradient's products are small ({out, in}) and long (every tile of the pass): 36 of them
// leave most of a GPU idle where the channels are few (64 x 64: 36 output tiles of 128 x 128 on
// 132 SMs), so the tiles are cut into runs (Geometry::splits, enough for about 512 output tiles
// in all, each run at least 512 tiles long), one product per point and run, into partial dU
// that the filter gradient transform sums in run order (deterministic: no atomics). The
// candidates are listed after every other supported one, the first 8 of the matmul backend's
// candidates for the product; DNNX_CUDNN_CONV_WINOGRAD=0 turns them off (part of the backend's
// fingerprint). One unsupported "cudnn:winograd" entry says why where none is listed.

namespace {

constexpr std::string_view prefix = "cudnn:winograd:";
namespace wg = kernels::winograd;

// Bytes of a transformed tensor of `rows` x `columns` per point.
std::size_t transformed_bytes(std::int64_t rows, std::int64_t columns) {
  return static_cast<std::size_t>(wg::points * rows * columns) * sizeof(float);
}

// Spatial sizes the transforms' 32-bit tile arithmetic takes.
constexpr std::int64_t size_limit = std::int64_t{1} << 30;

// The weight gradient's runs of tiles (Note [winograd candidates]): enough products for about
// this many output tiles of 128 x 128 in all, each run at least split_tiles_min tiles long.
constexpr std::int64_t split_target = 512;
constexpr std::int64_t split_tiles_min = 512;
constexpr std::int64_t product_tile = 128;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A dilation leaves tiles partly empty (a class of fewer outputs than its tiles hold): listed
// where the tiles hold at most this many times the outputs (F(4x4, 3x3) does a quarter of the
// multiplications of the direct sum).
constexpr std::int64_t waste_max = 3;

}  // namespace

std::optional<WinogradForm> winograd_form(const ConvDesc& d, Direction direction, std::string& why,
                                          std::size_t cap) {
  if (d.dtype != DType::f32) {
    why = detail::cat("f32 only (dtype ", to_string(d.dtype),
                      "): f16 and bf16 run cuDNN's tensor-core engines (Note [winograd "
                      "candidates])");
    return std::nullopt;
  }
  if (d.spatial_dims != 2) {
    why = detail::cat("2-D convolutions only (", d.spatial_dims, " spatial dims)");
    return std::nullopt;
  }
  if (d.groups != 1) {
    why = detail::cat("ungrouped convolutions only (groups=", d.groups, ")");
    return std::nullopt;
  }
  for (std::size_t i = 0; i < 2; ++i) {
    if (d.kernel[i] != wg::filter_size || d.stride[i] != 1) {
      why = detail::cat("a 3x3 kernel of stride 1 only (kernel ", d.kernel[0], "x", d.kernel[1],
                        ", stride ", d.stride[0], "x", d.stride[1], ")");
      return std::nullopt;
    }
    if (d.input[i] >= size_limit || d.output_size(static_cast<int>(i)) >= size_limit ||
        d.dilation[i] >= size_limit / 8) {
      why =
          "a spatial size of 2^30 or more (or a dilation of 2^27), beyond the transforms' "
          "32-bit arithmetic";
      return std::nullopt;
    }
    // Every output reads some input (padding of at most 2 dilations a side) and every tap some
    // input (two dilations within the input and its smaller padding): an output or a weight tap
    // that reads only padding is exactly zero, which the transforms give only to within their
    // rounding.
    const std::int64_t reach = (wg::filter_size - 1) * d.dilation[i];
    const std::int64_t pb = d.pad_before[i], pa = d.pad_after[i];
    if (pb > reach || pa > reach || reach > d.input[i] - 1 + std::min(pb, pa)) {
      why = detail::cat(
          "every output and every tap reading some input (padding of at most 2 x "
          "dilation per side, and 2 x dilation within the input and its smaller "
          "padding; dim ",
          i, ": input ", d.input[i], ", padding ", pb, " and ", pa, ", dilation ", d.dilation[i],
          "): an output or a tap that reads only padding is exactly zero, which the "
          "transforms give only to within their rounding");
      return std::nullopt;
    }
  }
  WinogradForm form;
  wg::Geometry& g = form.geometry;
  g.channels_last = d.layout == Layout::channels_last;
  const std::int64_t ih = d.input[0], iw = d.input[1];
  const std::int64_t oh = d.output_size(0), ow = d.output_size(1);
  g.dilation_h = d.dilation[0], g.dilation_w = d.dilation[1];
  if (direction == Direction::bwd_data) {
    // The correlation of diff_dst, padded by 2 dilations less the padding before, with the
    // turned filters.
    g.in_channels = d.out_channels, g.out_channels = d.in_channels;
    g.in_h = oh, g.in_w = ow, g.out_h = ih, g.out_w = iw;
    g.pad_h = (wg::filter_size - 1) * g.dilation_h - d.pad_before[0];
    g.pad_w = (wg::filter_size - 1) * g.dilation_w - d.pad_before[1];
  } else {
    g.in_channels = d.in_channels, g.out_channels = d.out_channels;
    g.in_h = ih, g.in_w = iw, g.out_h = oh, g.out_w = ow;
    g.pad_h = d.pad_before[0], g.pad_w = d.pad_before[1];
  }
  // Tiles of 4 outputs of one residue class mod the dilation (Geometry): ceil(out / d) outputs
  // in the longest class.
  g.class_tiles_h = ceil_div(ceil_div(g.out_h, g.dilation_h), wg::out_tile);
  g.class_tiles_w = ceil_div(ceil_div(g.out_w, g.dilation_w), wg::out_tile);
  g.tiles_h = g.dilation_h * g.class_tiles_h;
  g.tiles_w = g.dilation_w * g.class_tiles_w;
  const std::int64_t slots_per_sample = g.tiles_h * g.tiles_w * wg::out_tile * wg::out_tile;
  if (slots_per_sample > waste_max * g.out_h * g.out_w) {
    why = detail::cat("tiles of 4 x 4 outputs, each of one residue class of the dilation (",
                      g.dilation_h, "x", g.dilation_w, "), would hold ", slots_per_sample,
                      " outputs for ", g.out_h * g.out_w, ", over ", waste_max,
                      " times as many: the transforms would save no multiplications");
    return std::nullopt;
  }
  const std::int64_t sample_tiles = g.tiles_h * g.tiles_w;
  const std::size_t filter = transformed_bytes(g.out_channels, g.in_channels);
  const std::size_t sample = transformed_bytes(g.in_channels + g.out_channels, sample_tiles);
  if (filter + sample > cap) {
    why = detail::cat("the transformed filters and one sample's transformed tiles would take ",
                      detail::format_bytes(static_cast<double>(filter + sample)),
                      " of workspace, over ", detail::format_bytes(static_cast<double>(cap)),
                      " (Note [winograd candidates])");
    return std::nullopt;
  }
  // The samples of one pass: the largest divisor of the batch whose tensors fit the cap.
  std::int64_t chunk = 1;
  for (std::int64_t samples = d.batch; samples >= 1; --samples) {
    if (d.batch % samples == 0 && filter + static_cast<std::size_t>(samples) * sample <= cap) {
      chunk = samples;
      break;
    }
  }
  g.batch = chunk;
  form.passes = d.batch / chunk;
  const std::int64_t tiles = wg::tiles_of(g);
  if (direction == Direction::bwd_weights) {
    const std::int64_t outputs =
        ceil_div(g.out_channels, product_tile) * ceil_div(g.in_channels, product_tile);
    g.splits = std::clamp<std::int64_t>(ceil_div(split_target, wg::points * outputs), 1,
                                        std::max<std::int64_t>(1, tiles / split_tiles_min));
  }
  g.split_tiles = ceil_div(tiles, g.splits);
  const std::int64_t slots = wg::slots_of(g);
  form.filter_bytes = workspace_aligned(filter * static_cast<std::size_t>(g.splits));
  form.in_bytes = workspace_aligned(transformed_bytes(g.in_channels, slots));
  form.out_bytes = workspace_aligned(transformed_bytes(g.out_channels, slots));
  MatmulDesc& p = form.product;
  p.batch = wg::points;
  p.dtype = DType::f32;
  if (direction == Direction::bwd_weights) {
    // dU {out, in} = Z V^T per point and run of tiles: Z {out, split_tiles} (channels_last
    // {split_tiles, out}), V alike.
    p.batch = wg::points * g.splits;
    p.m = g.out_channels, p.n = g.in_channels, p.k = g.split_tiles;
    (g.channels_last ? p.transpose_a : p.transpose_b) = true;
  } else if (!g.channels_last) {
    // M {out, tiles} = U {out, in} V {in, tiles}.
    p.m = g.out_channels, p.n = tiles, p.k = g.in_channels;
  } else {
    // M {tiles, out} = V {tiles, in} U^T, U {out, in}.
    p.m = tiles, p.n = g.out_channels, p.k = g.in_channels;
    p.transpose_b = true;
  }
  form.accumulating = p;
  form.accumulating.beta = 1.0f;
  return form;
}

WinogradOperands winograd_operands(const WinogradForm& form, Direction direction) {
  if (direction == Direction::bwd_weights)
    return {WinogradPart::out, WinogradPart::in, WinogradPart::filter};
  if (form.geometry.channels_last)
    return {WinogradPart::in, WinogradPart::filter, WinogradPart::out};
  return {WinogradPart::filter, WinogradPart::in, WinogradPart::out};
}

std::string winograd_id(std::string_view matmul_id) { return product_id(prefix, matmul_id, false); }

std::optional<std::string> winograd_inner_id(std::string_view id) {
  std::optional<GemmInnerId> inner = product_inner_id(prefix, id);
  if (!inner || inner->packed) return std::nullopt;
  return std::move(inner->matmul_id);
}

AlgoInfo winograd_info(const AlgoInfo& inner, const WinogradForm& form) {
  AlgoInfo info = inner;
  info.id = winograd_id(inner.id);
  if (!inner.variant_of.empty()) info.variant_of = winograd_id(inner.variant_of);
  info.name =
      detail::cat("Winograd F(4x4, 3x3): transformed tiles and 36 matrix products: ", inner.name);
  info.workspace_bytes = form.filter_bytes + form.in_bytes + form.out_bytes + inner.workspace_bytes;
  info.notes.push_back("winograd");
  info.notes.push_back("conv_winograd");
  info.families = {"winograd"};
  return info;
}

AlgoInfo winograd_off_info() {
  return off_entry(
      winograd_off_id,
      "Winograd F(4x4, 3x3): dnnx's transforms and a cuBLASLt / cuBLAS batched product",
      "not listed (Note [winograd candidates])", "conv_winograd");
}

namespace {

class WinogradPlan final : public detail::ConvPlan {
 public:
  WinogradPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
               WinogradForm form, std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product,
               std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating, AlgoInfo info)
      : runtime_(std::move(runtime)),
        direction_(direction),
        form_(std::move(form)),
        device_(Device::cuda(runtime_->device())),
        product_(std::move(product)),
        accumulating_(std::move(accumulating)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();  // the kernels launch on this device's stream
    const BoundTensors t = bind_tensors(args, direction_, context_);
    char* base = static_cast<char*>(workspace.data);
    auto* filter = reinterpret_cast<float*>(base);
    auto* in = reinterpret_cast<float*>(base + form_.filter_bytes);
    auto* out = reinterpret_cast<float*>(base + form_.filter_bytes + form_.in_bytes);
    const std::size_t used = form_.filter_bytes + form_.in_bytes + form_.out_bytes;
    const detail::Workspace rest{base + used, workspace.bytes - used};
    bind_views(filter, in, out);
    const detail::MatmulArgs product{.a = &a_, .b = &b_, .dst = &dst_};
    const cudaStream_t stream = runtime_->stream();
    const kernels::winograd::Geometry& g = form_.geometry;
    const bool last = g.channels_last;
    // Elements of one pass's part of the maps the input transform reads and of those the tiles
    // cover.
    const std::int64_t in_part = g.batch * g.in_channels * g.in_h * g.in_w;
    const std::int64_t out_part = g.batch * g.out_channels * g.out_h * g.out_w;
    if (direction_ == Direction::bwd_weights) {
      const auto* src = static_cast<const float*>(t.first);
      const auto* diff_dst = static_cast<const float*>(t.second);
      for (std::int64_t pass = 0; pass < form_.passes; ++pass) {
        DNNX_CUDNN_CHECK(kernels::winograd::input_transform(g, src + pass * in_part, in, stream),
                         context_, "launching the Winograd input transform");
        DNNX_CUDNN_CHECK(
            kernels::winograd::gradient_transform(g, diff_dst + pass * out_part, out, stream),
            context_, "launching the Winograd gradient transform");
        (pass > 0 && accumulating_ ? accumulating_ : product_)->execute(product, rest);
      }
      DNNX_CUDNN_CHECK(kernels::winograd::filter_gradient_transform(
                           filter, static_cast<float*>(t.output), g.out_channels, g.in_channels,
                           g.splits, last, stream),
                       context_, "launching the Winograd filter gradient transform");
      return;
    }
    DNNX_CUDNN_CHECK(kernels::winograd::filter_transform(
                         static_cast<const float*>(t.second), filter, g.out_channels, g.in_channels,
                         last, direction_ == Direction::bwd_data, stream),
                     context_, "launching the Winograd filter transform");
    const auto* source = static_cast<const float*>(t.first);
    auto* target = static_cast<float*>(t.output);
    for (std::int64_t pass = 0; pass < form_.passes; ++pass) {
      DNNX_CUDNN_CHECK(kernels::winograd::input_transform(g, source + pass * in_part, in, stream),
                       context_, "launching the Winograd input transform");
      product_->execute(product, rest);
      DNNX_CUDNN_CHECK(
          kernels::winograd::output_transform(g, out, target + pass * out_part, stream), context_,
          "launching the Winograd output transform");
    }
  }

 private:
  // The product's operands over the workspace's parts (winograd_operands()), kept while the
  // workspace stays.
  void bind_views(float* filter, float* in, float* out) {
    if (bound_ == filter) return;
    const auto part = [&](WinogradPart which) {
      return which == WinogradPart::filter ? filter : which == WinogradPart::in ? in : out;
    };
    const MatmulDesc& p = form_.product;
    const WinogradOperands operands = winograd_operands(form_, direction_);
    a_ = Tensor::view(part(operands.a), p.a_dims(), DType::f32, Layout::channels_first, device_);
    b_ = Tensor::view(part(operands.b), p.b_dims(), DType::f32, Layout::channels_first, device_);
    dst_ =
        Tensor::view(part(operands.dst), p.dst_dims(), DType::f32, Layout::channels_first, device_);
    bound_ = filter;
  }

  std::shared_ptr<Runtime> runtime_;
  Direction direction_;
  WinogradForm form_;
  Device device_;
  std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product_;
  std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating_;  // bwd_weights, passes > 1
  AlgoInfo info_;
  ErrorContext context_;
  Tensor a_, b_, dst_;
  const float* bound_ = nullptr;  // the workspace the views are over
};

}  // namespace

std::shared_ptr<detail::ConvPlan> make_winograd_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, WinogradForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating) {
  AlgoInfo info = winograd_info(product->algo(), form);
  if (accumulating) {
    info.workspace_bytes =
        std::max(info.workspace_bytes, form.filter_bytes + form.in_bytes + form.out_bytes +
                                           accumulating->algo().workspace_bytes);
  }
  return std::make_shared<WinogradPlan>(std::move(runtime), desc, direction, std::move(form),
                                        std::move(product), std::move(accumulating),
                                        std::move(info));
}

}  // namespace dnnx::cudnn
