// The reference convolution: plain loops with f64 accumulation, the oracle every other backend is
// tested against. Clarity comes first; speed only where it keeps the test suite usable.
//
// Note [dense copies]
// Every input is first copied, through its own element strides, into a dense row-major f32 array
// in logical order (activations N, C, [D,] [H,] W; weights O, I/groups, [KD,] [KH,] KW). The loops
// run on those arrays, accumulate into dense f64 arrays, and the result is written back through
// the output's strides. One set of loops thus serves every layout, dtype and strided view, and an
// output aliasing an input is harmless. f32/f16/bf16 values are exact in f32 (which halves the
// memory traffic against f64 copies), and the product of two of them is exact in f64, so the only
// rounding before the final store is in the f64 sums.
//
// Note [rounding once]
// The f64 result must be rounded once to the storage dtype. Going f64 -> f32 -> f16 by round to
// nearest twice can land one ulp off (a value just above an f16 tie first rounds onto the tie).
// Rounding f64 -> f32 *to odd* (truncate, then set the last bit if anything was cut off) keeps the
// information the second step needs, so f32 -> f16/bf16 by round to nearest even then gives the
// correctly rounded result: f32 carries 24 bits, at least 2 more than f16's 11 and bf16's 8
// (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
// rounding to odd", IEEE Trans. Computers, 2008).
//
// Note [spatial promotion]
// 1-D and 2-D convolutions run as 3-D ones whose missing leading spatial dims have size 1, kernel
// 1, stride 1, dilation 1 and no padding. Size-1 dims change no row-major offset, so the dense
// arrays of Note [dense copies] are already laid out as the 3-D loops expect.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo direct_info() {
  return reference::direct_info("direct loops (f64 accumulation)", {"direct", "reference"});
}

ErrorContext context_of(const ConvDesc& desc, Direction direction, std::string_view op,
                        std::string implementation) {
  ErrorContext context;
  context.op = detail::cat("conv ", op);
  context.repro = desc.repro(direction);
  context.backend = "reference";
  context.implementation = std::move(implementation);
  return context;
}

// ---------------------------------------------------------------------------------------------
// Moving data between tensors and dense arrays (Note [dense copies]).

// Visits every element of `tensor` in logical row-major order, passing its byte address.
template <typename Visit>
void for_each_element(const Tensor& tensor, Visit&& visit) {
  const int rank = tensor.rank();
  const Dims& dims = tensor.dims();
  const Dims& strides = tensor.strides();
  const std::int64_t count = tensor.numel();
  if (count == 0) return;
  const std::int64_t element_bytes = static_cast<std::int64_t>(size_of(tensor.dtype()));
  auto* base = static_cast<std::byte*>(tensor.data());
  std::array<std::int64_t, Dims::max_rank> index{};
  std::int64_t offset = 0;  // elements
  for (std::int64_t i = 0; i < count; ++i) {
    visit(i, base + offset * element_bytes);
    // Odometer step: bump the last dim, carrying into the earlier ones.
    for (int d = rank - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[static_cast<std::size_t>(d)] < dims[d]) break;
      offset -= strides[d] * dims[d];
      index[static_cast<std::size_t>(d)] = 0;
    }
  }
}

std::vector<float> to_dense(const Tensor& tensor) {
  std::vector<float> values(static_cast<std::size_t>(tensor.numel()));
  const DType dtype = tensor.dtype();
  for_each_element(tensor, [&](std::int64_t i, const std::byte* element) {
    values[static_cast<std::size_t>(i)] = detail::load_f32(element, dtype);
  });
  return values;
}

// Stores `value` rounded once to `dtype`.
void store_rounded(std::byte* element, DType dtype, double value) {
  const float narrowed =
      dtype == DType::f32 ? static_cast<float>(value) : detail::round_to_odd(value);
  detail::store_f32(element, dtype, narrowed);
}

void from_dense(const std::vector<double>& values, Tensor& tensor) {
  const DType dtype = tensor.dtype();
  for_each_element(tensor, [&](std::int64_t i, std::byte* element) {
    store_rounded(element, dtype, values[static_cast<std::size_t>(i)]);
  });
}

// ---------------------------------------------------------------------------------------------
// Checks on what the caller handed in. The op layer validates calls already; these keep direct
// callers (tests, tools) from reading out of bounds, and cost nothing next to the loops.

void check_tensor(const Tensor* tensor, const char* role, const Dims& expected, DType dtype,
                  const ErrorContext& context) {
  if (tensor == nullptr || tensor->is_null()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is missing (null); expected a ", to_string(dtype),
                              " tensor of ", "shape ", expected),
                  context);
  }
  if (!(tensor->dims() == expected)) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " has shape ", tensor->dims(), ", expected ", expected),
                  context);
  }
  if (tensor->dtype() != dtype) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " has dtype ", to_string(tensor->dtype()), ", expected ",
                              to_string(dtype), " (the desc's dtype)"),
                  context);
  }
  if (tensor->device() != Device::cpu()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is on ", to_string(tensor->device()),
                              "; the reference backend reads host memory only (cpu)"),
                  context);
  }
}

// ---------------------------------------------------------------------------------------------
// Geometry and the loops.

// One convolution's sizes, always 3 spatial dims (D, H, W), see Note [spatial promotion].
struct Geometry {
  std::int64_t batch = 0;
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t in_per_group = 0;  // weights' I dim
  std::int64_t out_per_group = 0;
  std::array<std::int64_t, 3> in{};
  std::array<std::int64_t, 3> kernel{};
  std::array<std::int64_t, 3> out{};
  std::array<std::int64_t, 3> stride{};
  std::array<std::int64_t, 3> pad{};  // before; padding after only bounds `out`
  std::array<std::int64_t, 3> dilation{};

  std::int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  std::int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  std::int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
};

Geometry geometry_of(const ConvDesc& desc) {
  Geometry g;
  g.batch = desc.batch;
  g.in_channels = desc.in_channels;
  g.out_channels = desc.out_channels;
  g.in_per_group = desc.in_channels / desc.groups;
  g.out_per_group = desc.out_channels / desc.groups;
  const int missing = 3 - desc.spatial_dims;
  for (int i = 0; i < 3; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (i < missing) {
      g.in[k] = g.kernel[k] = g.out[k] = g.stride[k] = g.dilation[k] = 1;
      g.pad[k] = 0;
      continue;
    }
    const int j = i - missing;
    const auto s = static_cast<std::size_t>(j);
    g.in[k] = desc.input[s];
    g.kernel[k] = desc.kernel[s];
    g.out[k] = desc.output_size(j);
    g.stride[k] = desc.stride[s];
    g.pad[k] = desc.pad_before[s];
    g.dilation[k] = desc.dilation[s];
  }
  return g;
}

struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// Along one dim, the outputs o in [0, out) whose tap o * stride - pad + tap_offset falls inside
// the input [0, in); every other tap reads zero padding and contributes nothing.
Range valid_outputs(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t pad,
                    std::int64_t tap_offset) {
  const std::int64_t shift = pad - tap_offset;  // need o * stride >= shift
  const std::int64_t last = in - 1 + shift;     // need o * stride <= last
  Range range;
  range.begin = shift <= 0 ? 0 : (shift + stride - 1) / stride;
  range.end = last < 0 ? 0 : std::min(out, last / stride + 1);
  range.begin = std::min(range.begin, range.end);
  return range;
}

// One kernel tap applied along one output row: output elements out_row + ow, for ow in
// [begin, end), each read input element in_row + ow * stride[2] (offsets within a channel plane).
// Tap positions in the padding are left out, so the loops need no bounds checks.
struct RowTap {
  std::int64_t tap = 0;      // flat index into the kernel volume
  std::int64_t out_row = 0;  // offset of output element (od, oh, 0)
  std::int64_t in_row = 0;   // may be negative: only in_row + begin * stride[2] is an element
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// The geometric walk all three directions share. It depends on the sizes only, so a plan builds it
// once and every channel pair of every call reuses it.
std::vector<RowTap> row_taps_of(const Geometry& g) {
  std::vector<RowTap> row_taps;
  std::int64_t tap = 0;
  for (std::int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const std::int64_t offset_d = kd * g.dilation[0];
    const Range rows_d = valid_outputs(g.in[0], g.out[0], g.stride[0], g.pad[0], offset_d);
    for (std::int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const std::int64_t offset_h = kh * g.dilation[1];
      const Range rows_h = valid_outputs(g.in[1], g.out[1], g.stride[1], g.pad[1], offset_h);
      for (std::int64_t kw = 0; kw < g.kernel[2]; ++kw, ++tap) {
        const std::int64_t offset_w = kw * g.dilation[2];
        const Range cols = valid_outputs(g.in[2], g.out[2], g.stride[2], g.pad[2], offset_w);
        if (cols.begin == cols.end) continue;
        for (std::int64_t od = rows_d.begin; od < rows_d.end; ++od) {
          const std::int64_t id = od * g.stride[0] - g.pad[0] + offset_d;
          for (std::int64_t oh = rows_h.begin; oh < rows_h.end; ++oh) {
            const std::int64_t ih = oh * g.stride[1] - g.pad[1] + offset_h;
            RowTap row;
            row.tap = tap;
            row.out_row = (od * g.out[1] + oh) * g.out[2];
            row.in_row = (id * g.in[1] + ih) * g.in[2] - g.pad[2] + offset_w;
            row.begin = cols.begin;
            row.end = cols.end;
            row_taps.push_back(row);
          }
        }
      }
    }
  }
  return row_taps;
}

// Runs body(begin, end) over [0, count) in contiguous chunks, one per hardware thread when the
// work is worth starting threads for. Every output element is produced by exactly one chunk in a
// fixed order, so the result does not depend on the split (the candidate stays deterministic).
void parallel_for(std::int64_t count, double macs_per_item,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  // Starting a thread costs tens of microseconds: below ~1M multiply-adds one thread is faster.
  constexpr double min_macs_per_thread = 1 << 20;
  const auto hardware = static_cast<std::int64_t>(detail::hardware_threads());
  const auto worth =
      static_cast<std::int64_t>(static_cast<double>(count) * macs_per_item / min_macs_per_thread);
  const std::int64_t threads = std::clamp<std::int64_t>(std::min(hardware, worth), 1, count);
  if (threads <= 1) {
    body(0, count);
    return;
  }
  std::vector<std::jthread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));
  for (std::int64_t t = 1; t < threads; ++t) {
    workers.emplace_back(body, count * t / threads, count * (t + 1) / threads);
  }
  body(0, count / threads);
}  // the jthreads join here

// The two data passes, one loop: forward (to_src false) accumulates each dst plane (n, oc) from
// the src planes of oc's group, dst[n, oc] = sum over the group's input channels and taps of
// weights * src; bwd_data (to_src true) is its exact adjoint: every product weights * src of the
// forward pass sends weights * diff_dst back to the src element it read, each diff_src plane
// (n, ic) summed over its own group's output channels. Elements no output reads stay 0.
template <bool to_src>
std::vector<double> conv_data(const Geometry& g, const std::vector<RowTap>& row_taps,
                              const std::vector<float>& from, const std::vector<float>& weights) {
  const std::int64_t in_plane = g.in_plane();
  const std::int64_t out_plane = g.out_plane();
  const std::int64_t taps = g.kernel_volume();
  const std::int64_t in_step = g.stride[2];
  // The accumulated tensor's channels and planes, and those of the tensor read (`from`).
  const std::int64_t channels = to_src ? g.in_channels : g.out_channels;
  const std::int64_t per_group = to_src ? g.in_per_group : g.out_per_group;
  const std::int64_t plane = to_src ? in_plane : out_plane;
  const std::int64_t from_channels = to_src ? g.out_channels : g.in_channels;
  const std::int64_t from_per_group = to_src ? g.out_per_group : g.in_per_group;
  const std::int64_t from_plane = to_src ? out_plane : in_plane;
  std::vector<double> acc(static_cast<std::size_t>(g.batch * channels * plane), 0.0);
  const double macs_per_item =
      static_cast<double>(out_plane) * static_cast<double>(from_per_group * taps);
  // Each item is one (n, channel) plane of the accumulated tensor, accumulated in place.
  parallel_for(g.batch * channels, macs_per_item, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t n = item / channels;
      const std::int64_t c = item % channels;
      const std::int64_t group = c / per_group;
      double* to = acc.data() + item * plane;
      for (std::int64_t fg = 0; fg < from_per_group; ++fg) {
        const std::int64_t f = group * from_per_group + fg;
        const float* read = from.data() + (n * from_channels + f) * from_plane;
        const std::int64_t oc = to_src ? f : c;
        const std::int64_t icg = to_src ? c % per_group : fg;
        const float* w = weights.data() + (oc * g.in_per_group + icg) * taps;
        for (const RowTap& row : row_taps) {
          const double weight = w[row.tap];
          for (std::int64_t ow = row.begin; ow < row.end; ++ow) {
            if constexpr (to_src) {
              to[row.in_row + ow * in_step] += weight * read[row.out_row + ow];
            } else {
              to[row.out_row + ow] += weight * read[row.in_row + ow * in_step];
            }
          }
        }
      }
    }
  });
  return acc;
}

// diff_weights[oc, icg, tap] = sum over n and outputs of diff_dst * the src element the tap read.
std::vector<double> conv_bwd_weights(const Geometry& g, const std::vector<RowTap>& row_taps,
                                     const std::vector<float>& src,
                                     const std::vector<float>& diff_dst) {
  const std::int64_t in_plane = g.in_plane();
  const std::int64_t out_plane = g.out_plane();
  const std::int64_t taps = g.kernel_volume();
  const std::int64_t in_step = g.stride[2];
  std::vector<double> diff_weights(static_cast<std::size_t>(g.out_channels * g.in_per_group * taps),
                                   0.0);
  const double macs_per_item = static_cast<double>(out_plane) * static_cast<double>(g.batch * taps);
  // Each item is one (oc, icg) filter, summed over the whole batch.
  parallel_for(
      g.out_channels * g.in_per_group, macs_per_item, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t item = first; item < last; ++item) {
          const std::int64_t oc = item / g.in_per_group;
          const std::int64_t icg = item % g.in_per_group;
          const std::int64_t ic = (oc / g.out_per_group) * g.in_per_group + icg;
          double* w = diff_weights.data() + item * taps;
          for (std::int64_t n = 0; n < g.batch; ++n) {
            const float* in = src.data() + (n * g.in_channels + ic) * in_plane;
            const float* out = diff_dst.data() + (n * g.out_channels + oc) * out_plane;
            for (const RowTap& row : row_taps) {
              double sum = 0.0;
              for (std::int64_t ow = row.begin; ow < row.end; ++ow) {
                sum += static_cast<double>(out[row.out_row + ow]) * in[row.in_row + ow * in_step];
              }
              w[row.tap] += sum;
            }
          }
        }
      });
  return diff_weights;
}

// Calls body(c, first, plane) for every (n, c) plane of dst, n-major: c its channel, `first` the
// offset of its first element in a dense dst, `plane` its element count.
template <typename Body>
void for_each_out_plane(const ConvDesc& desc, Body&& body) {
  const std::int64_t plane = geometry_of(desc).out_plane();
  for (std::int64_t n = 0; n < desc.batch; ++n) {
    for (std::int64_t c = 0; c < desc.out_channels; ++c)
      body(c, (n * desc.out_channels + c) * plane, plane);
  }
}

// ---------------------------------------------------------------------------------------------
// The plan and the backend.

class DirectPlan final : public detail::ConvPlan {
 public:
  DirectPlan(const ConvDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        geometry_(geometry_of(desc)),
        row_taps_(row_taps_of(geometry_)),
        info_(direct_info()),
        context_(context_of(desc_, direction_, to_string(direction_), direct_id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace /*workspace*/) override {
    const ErrorContext& context = context_;
    switch (direction_) {
      case Direction::fwd: {
        check_tensor(args.src, "src", desc_.src_dims(), desc_.dtype, context);
        check_tensor(args.weights, "weights", desc_.weights_dims(), desc_.dtype, context);
        check_tensor(args.dst, "dst", desc_.dst_dims(), desc_.dtype, context);
        from_dense(
            conv_data<false>(geometry_, row_taps_, to_dense(*args.src), to_dense(*args.weights)),
            *args.dst);
        return;
      }
      case Direction::bwd_data: {
        check_tensor(args.diff_dst, "diff_dst", desc_.dst_dims(), desc_.dtype, context);
        check_tensor(args.weights, "weights", desc_.weights_dims(), desc_.dtype, context);
        check_tensor(args.diff_src, "diff_src", desc_.src_dims(), desc_.dtype, context);
        from_dense(conv_data<true>(geometry_, row_taps_, to_dense(*args.diff_dst),
                                   to_dense(*args.weights)),
                   *args.diff_src);
        return;
      }
      case Direction::bwd_weights: {
        check_tensor(args.src, "src", desc_.src_dims(), desc_.dtype, context);
        check_tensor(args.diff_dst, "diff_dst", desc_.dst_dims(), desc_.dtype, context);
        check_tensor(args.diff_weights, "diff_weights", desc_.weights_dims(), desc_.dtype, context);
        from_dense(
            conv_bwd_weights(geometry_, row_taps_, to_dense(*args.src), to_dense(*args.diff_dst)),
            *args.diff_weights);
        return;
      }
      case Direction::fwd_training: break;  // not a convolution direction
    }
    DNNX_ASSERT(false, "unknown direction ", static_cast<int>(direction_));
  }

 private:
  ConvDesc desc_;
  Direction direction_;
  Geometry geometry_;
  std::vector<RowTap> row_taps_;
  AlgoInfo info_;
  ErrorContext context_;  // built once: a repro string per call cost more than a tiny conv
};

// Throws the desc's own InvalidArgument, with the call's context, if it is not a valid conv;
// returns that context.
ErrorContext validate(const ConvDesc& desc, ErrorContext context) {
  try {
    desc.validate();
  } catch (const Error& error) {
    throw error.with_context(context);
  }
  return context;
}

// One tensor of a bias call and the dims it must have.
struct BiasTensor {
  const Tensor* tensor;
  const char* role;
  Dims dims;
};

// Validates the desc, then checks the tensors in order, with the context of bias call `what`.
void check_bias_call(const ConvDesc& desc, Direction direction, std::string_view what,
                     std::initializer_list<BiasTensor> tensors) {
  const ErrorContext context = validate(desc, context_of(desc, direction, what, direct_id));
  for (const BiasTensor& t : tensors) check_tensor(t.tensor, t.role, t.dims, desc.dtype, context);
}

// The one candidate, reference:direct, runs every valid desc; listing, id checks and the plan
// cache are DirectBackend's. The bias calls are convolution's own.
class DirectConvBackend final
    : public DirectBackend<ConvDesc, detail::ConvArgs, detail::ConvBackend> {
 public:
  DirectConvBackend()
      : DirectBackend([](const ConvDesc&, Direction) { return direct_info(); },
                      [](const ConvDesc& desc, Direction direction) {
                        return std::make_shared<DirectPlan>(desc, direction);
                      }) {}

  void bias_fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) override {
    check_bias_call(desc, Direction::fwd, "bias_fwd",
                    {{&bias, "bias", desc.bias_dims()}, {&dst, "dst", desc.dst_dims()}});
    const std::vector<float> bias_values = to_dense(bias);
    const std::vector<float> dst_values = to_dense(dst);
    std::vector<double> values(dst_values.begin(), dst_values.end());
    for_each_out_plane(desc, [&](std::int64_t c, std::int64_t first, std::int64_t plane) {
      double* out = values.data() + first;
      const double b = bias_values[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < plane; ++i) out[i] += b;
    });
    from_dense(values, dst);
  }

  void bias_bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) override {
    check_bias_call(
        desc, Direction::bwd_weights, "bias_bwd",
        {{&diff_dst, "diff_dst", desc.dst_dims()}, {&diff_bias, "diff_bias", desc.bias_dims()}});
    const std::vector<float> values = to_dense(diff_dst);
    std::vector<double> sums(static_cast<std::size_t>(desc.out_channels), 0.0);
    for_each_out_plane(desc, [&](std::int64_t c, std::int64_t first, std::int64_t plane) {
      const float* out = values.data() + first;
      double& sum = sums[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < plane; ++i) sum += out[i];
    });
    from_dense(sums, diff_bias);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv>> make_conv_backend(const detail::OpBackends&) {
  return std::make_unique<DirectConvBackend>();
}

}  // namespace dnnx::reference
