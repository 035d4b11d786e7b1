#include <dnnx/init.hpp>
#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <cmath>

namespace dnnx::nn {

Linear::Linear(const Context& context, std::int64_t in_features, std::int64_t out_features,
               bool bias)
    : Module(context, OpKind::matmul),
      in_features_(in_features),
      out_features_(out_features),
      bias_(bias) {
  DNNX_CHECK_ARG(in_features >= 1 && out_features >= 1, "Linear: in_features ", in_features,
                 " and out_features ", out_features, " must be >= 1");
  // torch.nn.Linear.reset_parameters.
  const Dims dims{out_features, in_features};
  Tensor weight = detail::empty(this->context(), dims, DType::f32);
  init::kaiming_uniform(this->context(), default_generator(), weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (bias) {
    Tensor values = detail::empty(this->context(), Dims{out_features}, DType::f32);
    const float bound = static_cast<float>(1.0 / std::sqrt(double(in_features)));
    init::uniform(this->context(), default_generator(), values, -bound, bound);
    register_parameter("bias", values);
  }
}

std::string Linear::extra_repr() const {
  return detail::cat("in_features=", in_features_, ", out_features=", out_features_,
                     ", bias=", detail::py_bool(bias_));
}

MatmulDesc Linear::desc_for(std::int64_t rows, Direction direction, bool accumulate) {
  MatmulDesc desc =
      MatmulDesc::linear(rows, in_features_, out_features_, bias_, weight().value.dtype());
  if (direction == Direction::bwd_weights && accumulate) desc.beta = 1.0f;
  return desc;
}

Tensor Linear::forward(const Tensor& src) {
  detail::check_input("Linear", src, 1, Dims::max_rank, detail::Accepts::channels_first);
  const Tensor& weights = weight().value;
  DNNX_CHECK_ARG(src.dims()[src.rank() - 1] == in_features_, "Linear: input ", describe(src),
                 " must have ", in_features_, " features in its last dim");
  DNNX_CHECK_ARG(src.dtype() == weights.dtype(), "Linear: input ", describe(src),
                 " must have the weights' dtype ", to_string(weights.dtype()));
  const std::int64_t rows = src.numel() / in_features_;
  const MatmulDesc desc = desc_for(rows, Direction::fwd, false);
  desc.validate();
  Dims dst_dims = src.dims();
  dst_dims[dst_dims.rank() - 1] = out_features_;
  Tensor dst = detail::empty(context(), dst_dims, desc.dtype);
  Tensor dst_matrix = dst.reshape(desc.dst_dims());
  const Tensor src_matrix = src.reshape(desc.a_dims());
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return matmul_list(c, desc, Direction::fwd); });
  record(Direction::fwd,
         matmul_fwd(run_context, desc, src_matrix, weights, bias_ ? bias().value : Tensor(),
                    dst_matrix),
         key);
  descs_[static_cast<std::size_t>(Direction::fwd)] = desc;
  src_ = is_grad_enabled() ? src : Tensor();
  return dst;
}

Tensor Linear::backward(const Tensor& diff_dst) {
  require_forward(src_);
  Dims dst_dims = src_.dims();
  dst_dims[dst_dims.rank() - 1] = out_features_;
  check_diff(diff_dst, dst_dims, src_.dtype());
  const std::int64_t rows = src_.numel() / in_features_;
  const Tensor diff_matrix = diff_dst.reshape(Dims{rows, out_features_});
  const Tensor src_matrix = src_.reshape(Dims{rows, in_features_});

  const MatmulDesc data_desc = desc_for(rows, Direction::bwd_data, false);
  Tensor diff_src = detail::empty(context(), src_.dims(), data_desc.dtype);
  Tensor diff_src_matrix = diff_src.reshape(data_desc.a_dims());
  const std::string data_key = data_desc.key();
  Context& data_context = call_context(Direction::bwd_data, data_key, [&](Context& c) {
    return matmul_list(c, data_desc, Direction::bwd_data);
  });
  record(Direction::bwd_data,
         matmul_bwd_data(data_context, data_desc, diff_matrix, weight().value, diff_src_matrix),
         data_key);
  descs_[static_cast<std::size_t>(Direction::bwd_data)] = data_desc;

  // The op's beta accumulates into live gradients (Note [explicit backward]).
  const MatmulDesc weights_desc = desc_for(rows, Direction::bwd_weights, weight().grad_live);
  const std::string weights_key = weights_desc.key();
  Context& weights_context = call_context(Direction::bwd_weights, weights_key, [&](Context& c) {
    return matmul_list(c, weights_desc, Direction::bwd_weights);
  });
  Tensor no_bias;
  record(Direction::bwd_weights,
         matmul_bwd_weights(weights_context, weights_desc, src_matrix, diff_matrix, weight().grad,
                            bias_ ? bias().grad : no_bias),
         weights_key);
  descs_[static_cast<std::size_t>(Direction::bwd_weights)] = weights_desc;
  detail::mark_written(weight());
  if (bias_) detail::mark_written(bias());
  src_ = Tensor();
  return diff_src;
}

std::shared_ptr<const Choice> Linear::heuristic_choice(Direction direction) {
  if (direction == Direction::fwd_training) return nullptr;
  return detail::heuristic(context(), OpKind::matmul, direction,
                           descs_[static_cast<std::size_t>(direction)], matmul_select);
}

std::optional<ProfileResult> Linear::profile(Direction direction) {
  if (direction == Direction::fwd_training) return std::nullopt;
  return detail::profile(context(), OpKind::matmul, direction,
                         descs_[static_cast<std::size_t>(direction)], matmul_profile);
}

}  // namespace dnnx::nn
