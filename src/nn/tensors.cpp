#include "nn/tensors.hpp"

#include <dnnx/ops/add.hpp>
#include <dnnx/ops/fill.hpp>
#include <dnnx/ops/reorder.hpp>
#include <dnnx/random.hpp>

#include "core/check.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

namespace dnnx::nn::detail {

Tensor empty(const Context& context, const Dims& dims, DType dtype, Layout layout) {
  return Tensor::empty(dims, dtype, layout, context.allocator());
}

Tensor zeros(const Context& context, const Dims& dims, DType dtype, Layout layout) {
  Tensor tensor = empty(context, dims, dtype, layout);
  tensor.fill(0.0f);
  return tensor;
}

Layout layout_of(const Tensor& tensor) { return tensor.layout().value_or(Layout::channels_first); }

Layout stored_layout(const Tensor& tensor) {
  if (tensor.strides() == dense_strides(tensor.dims(), Layout::channels_first)) {
    return Layout::channels_first;
  }
  if (tensor.strides() == dense_strides(tensor.dims(), Layout::channels_last)) {
    return Layout::channels_last;
  }
  return layout_of(tensor);
}

namespace {

// A host copy of `src` (itself when it is on the host already).
Tensor on_host(const Tensor& src) {
  if (src.device().kind == Device::Kind::cpu) return src;
  Tensor host = Tensor::empty(src.dims(), src.dtype());
  copy(src, host);
  return host;
}

// Whether the memory `a` and `b` span (first element to last) overlaps.
bool spans_overlap(const Tensor& a, const Tensor& b) {
  const auto* a_begin = static_cast<const std::byte*>(a.data());
  const auto* b_begin = static_cast<const std::byte*>(b.data());
  return a_begin < b_begin + b.span_bytes() && b_begin < a_begin + a.span_bytes();
}

// Whether the reorder op can move `src` into `dst` on `context` (Note [layout changes in nn]):
// both in its memory, dense, floating, the same dims, something to move, no shared bytes.
bool reorderable(const Context& context, const Tensor& src, const Tensor& dst) {
  return src.device() == context.device() && dst.device() == context.device() &&
         src.dims() == dst.dims() && is_floating(src.dtype()) && is_floating(dst.dtype()) &&
         src.layout().has_value() && dst.layout().has_value() && src.numel() > 0 &&
         !src.is_null() && !dst.is_null() && !spans_overlap(src, dst);
}

}  // namespace

Tensor converted(Context& context, const Tensor& src, DType dtype) {
  Tensor dst = empty(context, src.dims(), dtype, stored_layout(src));
  assign(context, src, dst);
  return dst;
}

// Note [layout changes in nn]
// dnnx's ops take every tensor of a call in the desc's one layout. The modules therefore keep the
// input's layout from layer to layer and change it in two places only: once, when to_layout()
// rewrites the convolution weights (not per step), and in Flatten when its input is channels_last
// with a spatial extent (PyTorch flattens in C, H, W order). Those changes, and the dtype
// conversions of convert and load_state_dict, run the reorder op on the module's context when
// both tensors live in its memory: on a GPU a kernel queued on the context's stream in order with
// the layers around it, with no host wait and no trip through host memory; on the cpu oneDNN's
// reorder. Tensors elsewhere (a host state dict loaded into a GPU module, strided host views)
// go through copy() and the host. ResNet's flatten of an N x C x 1 x 1 tensor, dense in both
// layouts, changes nothing and moves nothing.
Tensor relayout(Context& context, const Tensor& src, Layout layout) {
  if (src.is_dense(layout)) return src;
  Tensor dst = empty(context, src.dims(), src.dtype(), layout);
  assign(context, src, dst);
  return dst;
}

void assign(Context& context, const Tensor& src, Tensor& dst) {
  DNNX_CHECK_ARG(src.dims() == dst.dims(), "cannot assign a tensor of dims ", src.dims(),
                 " to one of dims ", dst.dims());
  if (reorderable(context, src, dst) &&
      (src.dtype() != dst.dtype() || src.device().kind != Device::Kind::cpu ||
       !dst.is_dense(layout_of(src)))) {
    reorder_fwd(context, ReorderDesc::of(src, dst), src, dst);
    return;
  }
  assign(src, dst);
}

void assign(const Tensor& src, Tensor& dst) {
  DNNX_CHECK_ARG(src.dims() == dst.dims(), "cannot assign a tensor of dims ", src.dims(),
                 " to one of dims ", dst.dims());
  if (src.dtype() == dst.dtype()) {
    const bool on_devices =
        src.device().kind != Device::Kind::cpu && dst.device().kind != Device::Kind::cpu;
    if (on_devices && !src.is_dense(layout_of(dst))) {
      // copy() between device tensors keeps the layout; without a context to run the reorder
      // op on, the layout changes on the host (Note [layout changes in nn]).
      copy(on_host(src), dst);
      return;
    }
    copy(src, dst);
    return;
  }
  DNNX_CHECK_ARG(is_floating(src.dtype()) && is_floating(dst.dtype()), "cannot convert a ",
                 to_string(src.dtype()), " tensor to ", to_string(dst.dtype()),
                 ": only f32, f16 and bf16 convert into each other");
  const std::vector<float> values = on_host(src).to_f32();
  Tensor host = Tensor::empty(src.dims(), dst.dtype());
  host.copy_from_f32(values);
  copy(host, dst);
}

// Note [zero_grad without waiting]
// Tensor::fill on a device tensor waits for the device (a tensor may be read next on another
// stream), so zero_grad through it waited once per parameter: a ResNet-50 step began with 161
// synchronisations, and the GPU idled while the host queued the forward. The fill op runs on the
// module's context instead, ordered on its stream with the backward that writes the gradients next.
void fill_zeros(Context& context, Tensor& tensor) {
  if (tensor.numel() == 0) return;
  Generator unused(0);  // a constant fill draws nothing
  fill_fwd(context, FillDesc::of(tensor, Distribution::constant), FillParams::constant(0.0f),
           unused, tensor);
}

void accumulate(Context& context, const std::vector<Parameter*>& parameters,
                const std::function<void(std::vector<Tensor*>&)>& compute) {
  std::vector<Tensor> scratch(parameters.size());
  std::vector<Tensor*> targets(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& parameter = *parameters[i];
    if (parameter.grad_live) {
      scratch[i] =
          empty(context, parameter.grad.dims(), parameter.grad.dtype(), layout_of(parameter.grad));
      targets[i] = &scratch[i];
    } else {
      targets[i] = &parameter.grad;
    }
  }
  compute(targets);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& parameter = *parameters[i];
    if (targets[i] == &scratch[i]) {
      const Dims& dims = parameter.grad.dims();
      add_fwd(context,
              AddDesc::from_dims(dims, dims, 1.0f, 1.0f, parameter.grad.dtype(),
                                 layout_of(parameter.grad)),
              scratch[i], parameter.grad);
    }
    mark_written(parameter);
  }
}

void zero_grad(Context& context, Parameter& parameter, bool set_to_none) {
  if (!set_to_none) fill_zeros(context, parameter.grad);
  parameter.grad_live = false;
  parameter.grad_none = set_to_none;
}

Layout check_input(std::string_view who, const Tensor& src, int min_rank, int max_rank,
                   Accepts accepts) {
  DNNX_CHECK_ARG(!src.is_null() || src.numel() == 0, who, ": the input is a null tensor");
  DNNX_CHECK_ARG(src.rank() >= min_rank && src.rank() <= max_rank, who, ": input ", describe(src),
                 " has rank ", src.rank(), "; expected ",
                 min_rank == max_rank ? std::to_string(min_rank) : cat(min_rank, " to ", max_rank));
  DNNX_CHECK_ARG(is_floating(src.dtype()), who, ": input ", describe(src),
                 " must be f32, f16 or bf16");
  if (accepts == Accepts::channels_first) {
    DNNX_CHECK_ARG(src.is_dense(Layout::channels_first), who, ": input ", describe(src),
                   " must be dense channels_first (row-major)");
    return Layout::channels_first;
  }
  DNNX_CHECK_ARG(src.layout().has_value(), who, ": input ", describe(src), " with strides ",
                 src.strides(), " must be dense channels_first (NCHW) or channels_last (NHWC)");
  return layout_of(src);
}

std::string tuple(const std::vector<std::int64_t>& values) {
  if (values.size() == 1) return cat("(", values[0], ",)");
  return cat("(", join(values, ", "), ")");
}

std::vector<std::int64_t> expand(std::string_view what, const std::vector<std::int64_t>& values,
                                 int count, std::int64_t minimum) {
  DNNX_CHECK_ARG(values.size() == 1 || values.size() == static_cast<std::size_t>(count), what,
                 " has ", values.size(), " entries; expected 1 or ", count);
  std::vector<std::int64_t> out(static_cast<std::size_t>(count), values[0]);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (values.size() > 1) out[i] = values[i];
    DNNX_CHECK_ARG(out[i] >= minimum, what, " entry ", out[i], " at position ", i,
                   " must be >= ", minimum);
  }
  return out;
}

std::string py_float(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.16g", value);
  std::string out = text;
  // %g switches to an exponent where Python's repr does (below 1e-4, from 1e16) and writes
  // it with two digits at least, as Python: 1e-05.
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

}  // namespace dnnx::nn::detail
