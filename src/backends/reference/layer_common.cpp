#include "backends/reference/layer_common.hpp"

#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

namespace dnnx::reference {

AlgoInfo direct_info(std::string name, std::vector<std::string> notes) {
  AlgoInfo info;
  info.id = direct_id;
  info.name = std::move(name);
  info.supported = true;
  info.workspace_bytes = 0;
  info.deterministic = true;
  info.notes = std::move(notes);
  detail::mark_naive(info);
  return info;
}

namespace {

// How a present but mismatched tensor is described: host_tensor and check_cpu_tensor word it
// differently (layer_common.hpp).
enum class Wording : bool { host_memory, on_cpu };

void check_host(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                const ErrorContext& context, Wording wording = Wording::host_memory) {
  if (tensor == nullptr || tensor->is_null()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is missing (null); expected a ", to_string(dtype),
                              " tensor of dims ", dims),
                  context);
  }
  if (tensor->dims() != dims || tensor->dtype() != dtype || tensor->device() != Device::cpu()) {
    detail::raise(
        ErrorKind::InvalidArgument,
        wording == Wording::host_memory
            ? detail::cat(role, " is ", describe(*tensor), "; expected ", to_string(dtype), '[',
                          dims.to_string(), "] in host memory")
            : detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                          "; expected ", to_string(dtype), '[', dims.to_string(), "] on cpu"),
        context);
  }
}

}  // namespace

const Tensor& host_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                          const ErrorContext& context) {
  check_host(tensor, role, dims, dtype, context);
  return *tensor;
}

Tensor& host_tensor(Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                    const ErrorContext& context) {
  check_host(tensor, role, dims, dtype, context);
  return *tensor;
}

void check_cpu_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                      const ErrorContext& context) {
  check_host(tensor, role, dims, dtype, context, Wording::on_cpu);
}

void store(const std::vector<double>& values, Tensor& tensor) {
  std::vector<float> narrowed(values.size());
  const bool f32 = tensor.dtype() == DType::f32;
  for (std::size_t i = 0; i < values.size(); ++i)
    narrowed[i] = f32 ? static_cast<float>(values[i]) : detail::round_to_odd(values[i]);
  tensor.copy_from_f32(narrowed);
}

}  // namespace dnnx::reference
