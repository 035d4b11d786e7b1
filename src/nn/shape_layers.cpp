// Flatten, Dropout and Softmax: the layers that keep a shape and carry no parameters.

#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

namespace dnnx::nn {

Flatten::Flatten(const Context& context, int start_dim, int end_dim)
    : Module(context), start_(start_dim), end_(end_dim) {}

std::string Flatten::extra_repr() const {
  return detail::cat("start_dim=", start_, ", end_dim=", end_);
}

Tensor Flatten::forward(const Tensor& src) {
  const int rank = src.rank();
  const int start = start_ < 0 ? start_ + rank : start_;
  const int end = end_ < 0 ? end_ + rank : end_;
  DNNX_CHECK_ARG(start >= 0 && start < rank && end >= 0 && end < rank && start <= end,
                 "Flatten: start_dim ", start_, " and end_dim ", end_,
                 " must name dims of the input ", describe(src), " in order");
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start; ++i) dims.push_back(src.dims()[i]);
  std::int64_t merged = 1;
  for (int i = start; i <= end; ++i) merged *= src.dims()[i];
  dims.push_back(merged);
  for (int i = end + 1; i < rank; ++i) dims.push_back(src.dims()[i]);
  // PyTorch flattens in logical (C, H, W) order whatever the memory format: a channels_last
  // input is made channels_first first (Note [layout changes in nn]).
  DNNX_CHECK_ARG(src.layout().has_value(), "Flatten: input ", describe(src), " with strides ",
                 src.strides(), " must be dense channels_first (NCHW) or channels_last (NHWC)");
  const Layout layout = detail::layout_of(src);
  Tensor dst = detail::relayout(context(), src, Layout::channels_first).reshape(Dims(dims));
  src_dims_ = src.dims();
  src_layout_ = layout;
  dst_dims_ = dst.dims();
  saved_ = is_grad_enabled();
  return dst;
}

Tensor Flatten::backward(const Tensor& diff_dst) {
  DNNX_CHECK_ARG(saved_, "Flatten.backward called without a forward before it");
  check_diff(diff_dst, dst_dims_, diff_dst.dtype());
  saved_ = false;
  return detail::relayout(context(), diff_dst.reshape(src_dims_), src_layout_);
}

Dropout::Dropout(const Context& context, float p) : Module(context, OpKind::dropout), p_(p) {
  DNNX_CHECK_ARG(p >= 0.0f && p <= 1.0f, "Dropout: p ", p, " must be in [0, 1]");
}

std::string Dropout::extra_repr() const {
  return detail::cat("p=", detail::py_float(p_), ", inplace=False");
}

Tensor Dropout::forward(const Tensor& src) {
  detail::check_input("Dropout", src, 1, Dims::max_rank);
  const DropoutDesc desc = DropoutDesc::of(src, p_);
  if (!is_training()) {
    // The identity, and its backward too (Note [eval mode and gradients]).
    desc_ = desc;
    identity_ = true;
    saved_ = is_grad_enabled();
    return src;
  }
  desc.validate();
  Tensor dst = detail::empty(context(), src.dims(), src.dtype(), desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::fwd_training, key, [&](Context& c) {
    return dropout_list(c, desc, Direction::fwd_training);
  });
  record(Direction::fwd_training,
         dropout_fwd_training(run_context, desc, default_generator(), src, dst, state_), key);
  desc_ = desc;
  identity_ = false;
  saved_ = is_grad_enabled();
  return dst;
}

Tensor Dropout::backward(const Tensor& diff_dst) {
  DNNX_CHECK_ARG(saved_, "Dropout.backward called without a forward before it");
  const DropoutDesc desc = *desc_;
  check_diff(diff_dst, desc.dims, desc.dtype, desc.layout);
  if (identity_) {
    saved_ = false;
    return diff_dst;
  }
  Tensor diff_src = detail::empty(context(), desc.dims, desc.dtype, desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return dropout_list(c, desc, Direction::bwd_data);
  });
  record(Direction::bwd_data, dropout_bwd(run_context, desc, diff_dst, diff_src, state_), key);
  saved_ = false;
  return diff_src;
}

std::shared_ptr<const Choice> Dropout::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::dropout, direction, desc_, dropout_select);
}

std::optional<ProfileResult> Dropout::profile(Direction direction) {
  return detail::profile(context(), OpKind::dropout, direction, desc_, dropout_profile);
}

Softmax::Softmax(const Context& context, SoftmaxMode mode, bool log)
    : Module(context, OpKind::softmax), mode_(mode), log_(log) {}

std::string Softmax::extra_repr() const {
  return mode_ == SoftmaxMode::channel ? "dim=1" : "mode=instance";
}

Tensor Softmax::forward(const Tensor& src) {
  const Layout layout = detail::check_input(type_name(), src, 2, Dims::max_rank);
  SoftmaxDesc desc;
  desc.dims = src.dims();
  desc.layout = layout;
  desc.mode = mode_;
  desc.log = log_;
  desc.dtype = src.dtype();
  desc.validate();
  Tensor dst = detail::empty(context(), src.dims(), src.dtype(), layout);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return softmax_list(c, desc, Direction::fwd); });
  record(Direction::fwd, softmax_fwd(run_context, desc, src, dst), key);
  desc_ = desc;
  dst_ = is_grad_enabled() ? dst : Tensor();
  return dst;
}

Tensor Softmax::backward(const Tensor& diff_dst) {
  require_forward(dst_);
  const SoftmaxDesc desc = *desc_;
  check_diff(diff_dst, desc.dims, desc.dtype, desc.layout);
  Tensor diff_src = detail::empty(context(), desc.dims, desc.dtype, desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return softmax_list(c, desc, Direction::bwd_data);
  });
  record(Direction::bwd_data, softmax_bwd(run_context, desc, dst_, diff_dst, diff_src), key);
  dst_ = Tensor();
  return diff_src;
}

std::shared_ptr<const Choice> Softmax::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::softmax, direction, desc_, softmax_select);
}

std::optional<ProfileResult> Softmax::profile(Direction direction) {
  return detail::profile(context(), OpKind::softmax, direction, desc_, softmax_profile);
}

}  // namespace dnnx::nn
