#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

namespace dnnx::nn {

Pool::Pool(const Context& context, int spatial_dims, PoolMode mode,
           std::vector<std::int64_t> kernel, PoolOptions options)
    : Module(context, OpKind::pool),
      spatial_dims_(spatial_dims),
      mode_(mode),
      kernel_(std::move(kernel)),
      options_(std::move(options)) {
  DNNX_CHECK_ARG(spatial_dims >= 1 && spatial_dims <= 3, "Pool: spatial_dims ", spatial_dims,
                 " must be 1, 2 or 3");
  DNNX_CHECK_ARG(mode != PoolMode::avg_exclude_pad, type_name(),
                 ": pass avg_include_pad and pick the mode with options.count_include_pad");
  if (mode_ != PoolMode::max && !options_.count_include_pad) mode_ = PoolMode::avg_exclude_pad;
  detail::expand(type_name() + " kernel_size", kernel_, spatial_dims, 1);
  if (!options_.stride.empty()) {
    detail::expand(type_name() + " stride", options_.stride, spatial_dims, 1);
  }
  detail::expand(type_name() + " padding", options_.padding, spatial_dims, 0);
  detail::expand(type_name() + " dilation", options_.dilation, spatial_dims, 1);
  if (mode_ != PoolMode::max) {
    for (auto d : options_.dilation) {
      DNNX_CHECK_ARG(d == 1, type_name(), ": dilation ", detail::tuple(options_.dilation),
                     " is for max pooling only (PyTorch's AvgPool has none)");
    }
  }
}

Pool::Pool(const Context& context, int spatial_dims, bool global)
    : Module(context, OpKind::pool),
      global_(global),
      spatial_dims_(spatial_dims),
      mode_(PoolMode::avg_include_pad),
      kernel_{1} {
  DNNX_CHECK_ARG(spatial_dims >= 1 && spatial_dims <= 3, "GlobalAvgPool: spatial_dims ",
                 spatial_dims, " must be 1, 2 or 3");
}

std::string Pool::type_name() const {
  return detail::cat(mode_ == PoolMode::max ? "MaxPool" : "AvgPool", spatial_dims_, "d");
}

namespace {

// PyTorch prints the arguments as given: an int for one value, a tuple for several.
std::string as_given(const std::vector<std::int64_t>& values) {
  return values.size() == 1 ? std::to_string(values[0]) : detail::tuple(values);
}

}  // namespace

std::string Pool::extra_repr() const {
  const std::string stride = as_given(options_.stride.empty() ? kernel_ : options_.stride);
  if (mode_ == PoolMode::max) {
    return detail::cat("kernel_size=", as_given(kernel_), ", stride=", stride,
                       ", padding=", as_given(options_.padding),
                       ", dilation=", as_given(options_.dilation),
                       ", ceil_mode=", detail::py_bool(options_.ceil_mode));
  }
  // As torch's AvgPoolNd.extra_repr: AvgPool1d holds its arguments as tuples, and ceil_mode and
  // count_include_pad are not printed.
  if (spatial_dims_ == 1) {
    return detail::cat("kernel_size=", detail::tuple({kernel_[0]}), ", stride=",
                       detail::tuple({(options_.stride.empty() ? kernel_ : options_.stride)[0]}),
                       ", padding=", detail::tuple({options_.padding[0]}));
  }
  return detail::cat("kernel_size=", as_given(kernel_), ", stride=", stride,
                     ", padding=", as_given(options_.padding));
}

PoolDesc Pool::desc_for(const Tensor& src) const {
  if (global_) {
    const std::vector<std::int64_t> window(src.dims().begin() + 2, src.dims().end());
    return PoolDesc::from_shapes(src.dims(), window, window, {0}, mode_, false, src.dtype(),
                                 detail::layout_of(src));
  }
  PoolDesc desc = PoolDesc::from_shapes(src.dims(), kernel_, options_.stride, options_.padding,
                                        options_.dilation, mode_, options_.ceil_mode, src.dtype(),
                                        detail::layout_of(src));
  // Max pooling keeps its argmax for backward: the backward then reads neither src nor dst, which
  // a later in-place layer may have overwritten. Under an nn::NoGradGuard it computes none.
  desc.indices = mode_ == PoolMode::max && is_grad_enabled();
  return desc;
}

Tensor Pool::forward(const Tensor& src) {
  detail::check_input(type_name(), src, spatial_dims_ + 2, spatial_dims_ + 2);
  const PoolDesc desc = desc_for(src);
  desc.validate();
  Tensor dst = detail::empty(context(), desc.dst_dims(), desc.dtype, desc.layout);
  Tensor indices;
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return pool_list(c, desc, Direction::fwd); });
  if (desc.indices) {
    indices = detail::empty(context(), desc.dst_dims(), DType::i64, desc.layout);
    record(Direction::fwd, pool_fwd(run_context, desc, src, dst, indices), key);
  } else {
    record(Direction::fwd, pool_fwd(run_context, desc, src, dst), key);
  }
  desc_ = desc;
  if (is_grad_enabled()) {
    src_ = desc.indices ? Tensor() : src;
    dst_ = desc.indices ? Tensor() : dst;
    indices_ = indices;
  } else {
    src_ = dst_ = indices_ = Tensor();
  }
  return dst;
}

Tensor Pool::backward(const Tensor& diff_dst) {
  require_forward(desc_ && desc_->indices ? indices_ : src_);
  const PoolDesc desc = *desc_;
  check_diff(diff_dst, desc.dst_dims(), desc.dtype, desc.layout);
  Tensor diff_src = detail::empty(context(), desc.src_dims(), desc.dtype, desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return pool_list(c, desc, Direction::bwd_data);
  });
  if (desc.indices) {
    record(Direction::bwd_data, pool_bwd(run_context, desc, diff_dst, indices_, diff_src), key);
  } else {
    record(Direction::bwd_data, pool_bwd(run_context, desc, src_, dst_, diff_dst, diff_src), key);
  }
  src_ = dst_ = indices_ = Tensor();
  return diff_src;
}

std::shared_ptr<const Choice> Pool::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::pool, direction, desc_, pool_select);
}

std::optional<ProfileResult> Pool::profile(Direction direction) {
  return detail::profile(context(), OpKind::pool, direction, desc_, pool_profile);
}

GlobalAvgPool::GlobalAvgPool(const Context& context, int spatial_dims)
    : Pool(context, spatial_dims, true) {}

std::string GlobalAvgPool::type_name() const {
  return detail::cat("AdaptiveAvgPool", spatial_dims(), "d");
}

std::string GlobalAvgPool::extra_repr() const {
  return "output_size=" + (spatial_dims() == 1 ? std::string("1")
                                               : detail::tuple(std::vector<std::int64_t>(
                                                     static_cast<std::size_t>(spatial_dims()), 1)));
}

}  // namespace dnnx::nn
