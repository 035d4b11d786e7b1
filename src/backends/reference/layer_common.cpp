#include "backends/reference/layer_common.hpp"

#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <array>
#include <cstdint>
#include <cstring>

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

namespace {

// The memory offset (in elements) of logical (row-major) index `flat` of `tensor`.
std::int64_t offset_of(const Tensor& tensor, std::int64_t flat) {
  const Dims& dims = tensor.dims();
  const Dims& strides = tensor.strides();
  std::int64_t offset = 0;
  for (int d = dims.rank() - 1; d >= 0; --d) {
    offset += (flat % dims[d]) * strides[d];
    flat /= dims[d];
  }
  return offset;
}

}  // namespace

std::vector<std::int64_t> collapsed_index_map(const Dims& dims, const Dims& collapsed) {
  const int rank = dims.rank();
  std::array<std::int64_t, Dims::max_rank> strides{};  // row-major, 0 along collapsed axes
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = collapsed[i] == 1 ? 0 : stride;
    stride *= collapsed[i];
  }
  std::vector<std::int64_t> map(static_cast<std::size_t>(dims.product()));
  std::array<std::int64_t, Dims::max_rank> index{};
  std::int64_t offset = 0;
  for (std::int64_t& entry : map) {
    entry = offset;
    for (int d = rank - 1; d >= 0; --d) {  // odometer step
      const auto k = static_cast<std::size_t>(d);
      offset += strides[k];
      if (++index[k] < dims[d]) break;
      offset -= strides[k] * dims[d];
      index[k] = 0;
    }
  }
  return map;
}

std::vector<std::int64_t> read_indices(const Tensor& tensor) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(tensor.numel()));
  const auto* base = static_cast<const unsigned char*>(tensor.data());
  const std::size_t size = size_of(tensor.dtype());
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    const std::int64_t offset = offset_of(tensor, static_cast<std::int64_t>(flat));
    out[flat] = detail::load_index(base + static_cast<std::size_t>(offset) * size, tensor.dtype());
  }
  return out;
}

void write_indices(const std::vector<std::int64_t>& values, Tensor& tensor) {
  auto* base = static_cast<unsigned char*>(tensor.data());
  const std::size_t size = size_of(tensor.dtype());
  for (std::size_t flat = 0; flat < values.size(); ++flat) {
    unsigned char* p =
        base + static_cast<std::size_t>(offset_of(tensor, static_cast<std::int64_t>(flat))) * size;
    if (tensor.dtype() == DType::i32) {
      const auto narrow = static_cast<std::int32_t>(values[flat]);
      std::memcpy(p, &narrow, sizeof narrow);
    } else {
      std::memcpy(p, &values[flat], sizeof values[flat]);
    }
  }
}

}  // namespace dnnx::reference
