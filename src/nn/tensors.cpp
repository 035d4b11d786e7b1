#include "nn/tensors.hpp"

#include <dnnx/ops/add.hpp>

#include "core/check.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace dnnx::nn::detail {

Tensor empty(const Context& context, const Dims& dims, DType dtype) {
  return Tensor::empty(dims, dtype, Layout::channels_first, context.allocator());
}

Tensor zeros(const Context& context, const Dims& dims, DType dtype) {
  Tensor tensor = empty(context, dims, dtype);
  tensor.fill(0.0f);
  return tensor;
}

namespace {

// A host copy of `src` (itself when it is on the host already).
Tensor on_host(const Tensor& src) {
  if (src.device().kind == Device::Kind::cpu) return src;
  Tensor host = Tensor::empty(src.dims(), src.dtype());
  copy(src, host);
  return host;
}

}  // namespace

Tensor converted(const Context& context, const Tensor& src, DType dtype) {
  Tensor dst = empty(context, src.dims(), dtype);
  assign(src, dst);
  return dst;
}

void assign(const Tensor& src, Tensor& dst) {
  DNNX_CHECK_ARG(src.dims() == dst.dims(), "cannot assign a tensor of dims ", src.dims(),
                 " to one of dims ", dst.dims());
  if (src.dtype() == dst.dtype()) {
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

void accumulate(Context& context, const std::vector<Parameter*>& parameters,
                const std::function<void(std::vector<Tensor*>&)>& compute) {
  std::vector<Tensor> scratch(parameters.size());
  std::vector<Tensor*> targets(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& parameter = *parameters[i];
    if (parameter.grad_live) {
      scratch[i] = empty(context, parameter.grad.dims(), parameter.grad.dtype());
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
      add_fwd(context, AddDesc::from_dims(dims, dims, 1.0f, 1.0f, parameter.grad.dtype()),
              scratch[i], parameter.grad);
    }
    parameter.grad_live = true;
  }
}

void check_input(std::string_view who, const Tensor& src, int min_rank, int max_rank) {
  DNNX_CHECK_ARG(!src.is_null() || src.numel() == 0, who, ": the input is a null tensor");
  DNNX_CHECK_ARG(src.rank() >= min_rank && src.rank() <= max_rank, who, ": input ", describe(src),
                 " has rank ", src.rank(), "; expected ",
                 min_rank == max_rank ? std::to_string(min_rank) : cat(min_rank, " to ", max_rank));
  DNNX_CHECK_ARG(is_floating(src.dtype()), who, ": input ", describe(src),
                 " must be f32, f16 or bf16");
  DNNX_CHECK_ARG(src.is_dense(Layout::channels_first), who, ": input ", describe(src),
                 " must be dense channels_first (NCHW); channels_last modules are not offered");
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
