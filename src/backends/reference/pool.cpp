// The reference pooling: plain loops with f64 accumulation, the oracle every other backend is
// tested against. Readable first: inputs are read into dense f32 arrays in logical order (every
// layout and strided view reads the same), outputs are accumulated in f64 and rounded once.
//
// Note [pooling windows]
// Along one spatial dim, output o's window starts at o * stride - pad_before and holds `kernel`
// positions of the padded input [-pad_before, input + pad_after), `dilation` apart (1: adjacent).
// Its input elements are those in [0, input). PyTorch's avg_pool divides by
//   count_include_pad=True:  the window clipped to the padded input (padding counts, but not the
//                            ceil-mode overhang beyond input + pad_after), and
//   count_include_pad=False: the number of input elements in the window;
// the product over the spatial dims in both cases; dnnx counts the window's positions the same
// way when they are dilated (PyTorch's avg_pool has no dilation). max_pool takes the largest
// input element,
// the first one in scan order (D, then H, then W) on ties, and a NaN wins over any number, as
// PyTorch's `val > max || isnan(val)` does; its gradient goes to that element only.
// PoolDesc::validate() guarantees every window holds at least one input element (Note [windows
// between input elements] in core/pool_desc.cpp).
//
// Note [reference pool indices]
// With desc.indices the forward also writes each window's argmax (the same scan as above) as a
// flat index into its (n, c) input plane, and the backward adds every diff_dst element at the
// index saved for it, in output order. As the oracle, the backward checks every index fully: one
// outside its output's window (outside the plane included) raises InvalidArgument naming its
// position and value (detail::bad_pool_index_message); other backends check what is cheap.
//
// Note [rounding once] (conv.cpp): f64 results are narrowed to f32 by rounding to odd, so that the
// final f32 -> f16/bf16 rounding to nearest even is the correctly rounded f64 -> dtype result.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/pool_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {


AlgoInfo info_of(const PoolDesc&, Direction) {
  return direct_info("direct loops (f64 accumulation)", {"direct", "reference"});
}

// The window of one output position along one dim (Note [pooling windows]).
using Window = detail::PoolSpan;

// One pooling's sizes, always 3 spatial dims (D, H, W; detail::PoolWindows3d).
struct Geometry : detail::PoolWindows3d {
  std::int64_t planes = 0;  // N * C

  explicit Geometry(const PoolDesc& desc)
      : detail::PoolWindows3d(desc), planes(desc.batch * desc.channels) {}

  Window window(int dim, std::int64_t o) const {
    const auto d = static_cast<std::size_t>(dim);
    return detail::pool_span(o * stride[d] - pad_before[d], kernel[d], dilation[d], in[d],
                             pad_after[d]);
  }
  std::int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  std::int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

// Calls visit(out_offset, windows) for every output position of one plane.
template <typename Visit>
void for_each_output(const Geometry& g, Visit&& visit) {
  for (std::int64_t od = 0; od < g.out[0]; ++od) {
    const Window wd = g.window(0, od);
    for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
      const Window wh = g.window(1, oh);
      for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
        const Window ww = g.window(2, ow);
        visit((od * g.out[1] + oh) * g.out[2] + ow, std::array<Window, 3>{wd, wh, ww});
      }
    }
  }
}

// The input offset (within a plane) of the window's max: the first largest element in scan
// order, a NaN replacing any number (Note [pooling windows]).
std::int64_t argmax(const Geometry& g, const float* plane, const std::array<Window, 3>& w) {
  std::int64_t best_at = (w[0].begin * g.in[1] + w[1].begin) * g.in[2] + w[2].begin;
  float best = -std::numeric_limits<float>::infinity();
  for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step) {
    for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step) {
      for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step) {
        const std::int64_t at = (d * g.in[1] + h) * g.in[2] + x;
        const float value = plane[at];
        if (value > best || std::isnan(value)) {
          best = value;
          best_at = at;
        }
      }
    }
  }
  return best_at;
}

double divisor(PoolMode mode, const std::array<Window, 3>& w) {
  double count = 1;
  for (const Window& window : w) {
    count *=
        static_cast<double>(mode == PoolMode::avg_include_pad ? window.padded : window.count());
  }
  return count;
}

std::vector<double> pool_fwd(const Geometry& g, PoolMode mode, const std::vector<float>& src) {
  std::vector<double> dst(static_cast<std::size_t>(g.planes * g.out_plane()));
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const float* in = src.data() + p * g.in_plane();
    double* out = dst.data() + p * g.out_plane();
    for_each_output(g, [&](std::int64_t o, const std::array<Window, 3>& w) {
      if (mode == PoolMode::max) {
        out[o] = in[argmax(g, in, w)];
        return;
      }
      double sum = 0;
      for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step)
        for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step)
          for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step)
            sum += in[(d * g.in[1] + h) * g.in[2] + x];
      out[o] = sum / divisor(mode, w);
    });
  }
  return dst;
}

// The exact adjoint of pool_fwd: max sends each diff_dst element to its window's argmax, the
// averages spread it evenly (divided by the forward divisor) over the window's input elements.
std::vector<double> pool_bwd(const Geometry& g, PoolMode mode, const std::vector<float>& src,
                             const std::vector<float>& diff_dst) {
  std::vector<double> diff_src(static_cast<std::size_t>(g.planes * g.in_plane()), 0.0);
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const float* in = src.data() + p * g.in_plane();
    const float* grad = diff_dst.data() + p * g.out_plane();
    double* out = diff_src.data() + p * g.in_plane();
    for_each_output(g, [&](std::int64_t o, const std::array<Window, 3>& w) {
      if (mode == PoolMode::max) {
        out[argmax(g, in, w)] += grad[o];
        return;
      }
      const double share = grad[o] / divisor(mode, w);
      for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step)
        for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step)
          for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step)
            out[(d * g.in[1] + h) * g.in[2] + x] += share;
    });
  }
  return diff_src;
}

// Indices in logical (row-major) order, whatever the strides, read as integers (through f32 they
// would lose positions above 2^24).
std::vector<std::int64_t> read_indices(const Tensor& indices) {
  const Dims& dims = indices.dims();
  const Dims& strides = indices.strides();
  const std::size_t size = size_of(indices.dtype());
  const auto* base = static_cast<const unsigned char*>(indices.data());
  std::vector<std::int64_t> values(static_cast<std::size_t>(dims.product()));
  for (std::int64_t i = 0; i < dims.product(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (int k = dims.rank() - 1; k >= 0; --k) {
      offset += rest % dims[k] * strides[k];
      rest /= dims[k];
    }
    const unsigned char* at = base + offset * static_cast<std::int64_t>(size);
    if (indices.dtype() == DType::i32) {
      std::int32_t value;
      std::memcpy(&value, at, sizeof value);
      values[static_cast<std::size_t>(i)] = value;
    } else {
      std::memcpy(&values[static_cast<std::size_t>(i)], at, sizeof(std::int64_t));
    }
  }
  return values;
}

// Writes indices given in logical order into `indices` (any strides).
void write_indices(const std::vector<std::int64_t>& values, Tensor& indices) {
  const Dims& dims = indices.dims();
  const Dims& strides = indices.strides();
  const std::size_t size = size_of(indices.dtype());
  auto* base = static_cast<unsigned char*>(indices.data());
  for (std::int64_t i = 0; i < dims.product(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (int k = dims.rank() - 1; k >= 0; --k) {
      offset += rest % dims[k] * strides[k];
      rest /= dims[k];
    }
    unsigned char* at = base + offset * static_cast<std::int64_t>(size);
    if (indices.dtype() == DType::i32) {
      const auto value = static_cast<std::int32_t>(values[static_cast<std::size_t>(i)]);
      std::memcpy(at, &value, sizeof value);
    } else {
      std::memcpy(at, &values[static_cast<std::size_t>(i)], sizeof(std::int64_t));
    }
  }
}

// Note [reference pool indices]: dst and the argmax of every window.
std::vector<double> max_fwd_indices(const Geometry& g, const std::vector<float>& src,
                                    std::vector<std::int64_t>& indices) {
  std::vector<double> dst(static_cast<std::size_t>(g.planes * g.out_plane()));
  indices.assign(dst.size(), 0);
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const float* in = src.data() + p * g.in_plane();
    for_each_output(g, [&](std::int64_t o, const std::array<Window, 3>& w) {
      const std::int64_t at = argmax(g, in, w);
      const auto k = static_cast<std::size_t>(p * g.out_plane() + o);
      dst[k] = in[at];
      indices[k] = at;
    });
  }
  return dst;
}

// Note [reference pool indices]: diff_src from the saved indices, every index checked.
std::vector<double> max_bwd_indices(const PoolDesc& desc, const Geometry& g,
                                    const std::vector<std::int64_t>& indices,
                                    const std::vector<float>& diff_dst,
                                    const ErrorContext& context) {
  std::vector<double> diff_src(static_cast<std::size_t>(g.planes * g.in_plane()), 0.0);
  for (std::int64_t p = 0; p < g.planes; ++p) {
    double* out = diff_src.data() + p * g.in_plane();
    for (std::int64_t o = 0; o < g.out_plane(); ++o) {
      const std::int64_t element = p * g.out_plane() + o;
      const std::int64_t index = indices[static_cast<std::size_t>(element)];
      if (!detail::pool_index_in_window(desc, element, index)) {
        detail::raise(ErrorKind::InvalidArgument,
                      detail::bad_pool_index_message(desc, element, index), context);
      }
      out[index] += diff_dst[static_cast<std::size_t>(element)];
    }
  }
  return diff_src;
}

// A plan holds only the desc's geometry.
class DirectPlan final : public DirectPlanBase<PoolDesc, detail::PoolArgs> {
 public:
  DirectPlan(const PoolDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction), geometry_(desc) {}

  void execute(const detail::PoolArgs& args, detail::Workspace /*workspace*/) override {
    const DType dtype = desc_.dtype;
    if (desc_.indices && direction_ != Direction::fwd) {
      const Tensor& indices = index_tensor(args.indices_in);
      const Tensor& diff_dst =
          host_tensor(args.diff_dst, "diff_dst", desc_.dst_dims(), dtype, context_);
      Tensor& diff_src = host_tensor(args.diff_src, "diff_src", desc_.src_dims(), dtype, context_);
      store(max_bwd_indices(desc_, geometry_, read_indices(indices), diff_dst.to_f32(), context_),
            diff_src);
      return;
    }
    const Tensor& src = host_tensor(args.src, "src", desc_.src_dims(), dtype, context_);
    if (direction_ == Direction::fwd) {
      Tensor& dst = host_tensor(args.dst, "dst", desc_.dst_dims(), dtype, context_);
      if (desc_.indices) {
        Tensor& indices = index_tensor(args.indices);
        std::vector<std::int64_t> argmax;
        store(max_fwd_indices(geometry_, src.to_f32(), argmax), dst);
        write_indices(argmax, indices);
        return;
      }
      store(pool_fwd(geometry_, desc_.mode, src.to_f32()), dst);
      return;
    }
    // dst is not read: the argmax is recomputed from src, which is what PyTorch's saved indices
    // hold (dst is part of the call because cuDNN reads it).
    host_tensor(args.dst_in, "dst", desc_.dst_dims(), dtype, context_);
    const Tensor& diff_dst =
        host_tensor(args.diff_dst, "diff_dst", desc_.dst_dims(), dtype, context_);
    Tensor& diff_src = host_tensor(args.diff_src, "diff_src", desc_.src_dims(), dtype, context_);
    store(pool_bwd(geometry_, desc_.mode, src.to_f32(), diff_dst.to_f32()), diff_src);
  }

 private:
  // The indices operand: i64 or i32, dst's dims, in host memory.
  template <typename T>
  T& index_tensor(T* tensor) const {
    const DType dtype =
        tensor != nullptr && tensor->dtype() == DType::i32 ? DType::i32 : DType::i64;
    return host_tensor(tensor, "indices", desc_.dst_dims(), dtype, context_);
  }

  Geometry geometry_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::pool>> make_pool_backend(const detail::OpBackends&) {
  return DirectBackend<PoolDesc, detail::PoolArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
