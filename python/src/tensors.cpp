// Arrays in: DLPack / buffer-protocol arrays as dnnx::Tensor views (no copy), and the small
// conversions every binding shares (dims, spatial arrays, directions, candidate rows).

#include "bindings.hpp"

#include <nanobind/stl/pair.h>

#include <limits>

namespace dnnx::python {
namespace {

// DLPack's device types (dlpack.h's DLDeviceType) that dnnx can address.
constexpr int dl_cpu = 1;
constexpr int dl_cuda = 2;
constexpr int dl_cuda_host = 3;  // pinned host memory: the host reads it like any other
constexpr int dl_cuda_managed = 13;

std::string dtype_text(nb::dlpack::dtype dtype) {
  const char* code = "code ";
  switch (static_cast<nb::dlpack::dtype_code>(dtype.code)) {
    case nb::dlpack::dtype_code::Int: code = "int"; break;
    case nb::dlpack::dtype_code::UInt: code = "uint"; break;
    case nb::dlpack::dtype_code::Float: code = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: code = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: code = "complex"; break;
    case nb::dlpack::dtype_code::Bool: code = "bool"; break;
  }
  std::string text = code;
  if (text == "code ") text += std::to_string(dtype.code) + " bits ";
  text += std::to_string(dtype.bits);
  if (dtype.lanes != 1) text += "x" + std::to_string(dtype.lanes);
  return text;
}

DType dtype_from(nb::dlpack::dtype dtype, std::string_view name) {
  using Code = nb::dlpack::dtype_code;
  if (dtype.lanes == 1) {
    const auto code = static_cast<Code>(dtype.code);
    if (code == Code::Float && dtype.bits == 32) return DType::f32;
    if (code == Code::Float && dtype.bits == 16) return DType::f16;
    if (code == Code::Bfloat && dtype.bits == 16) return DType::bf16;
    if (code == Code::Int && dtype.bits == 32) return DType::i32;
    if (code == Code::Int && dtype.bits == 64) return DType::i64;
  }
  throw Error(ErrorKind::InvalidArgument,
              std::string(name) + ": dtype " + dtype_text(dtype) +
                  " is not supported; accepted: float32, float16, bfloat16, int32, int64");
}

Device device_from(int type, int id, std::string_view name) {
  switch (type) {
    case dl_cpu:
    case dl_cuda_host: return Device::cpu();
    case dl_cuda:
    case dl_cuda_managed: return Device::cuda(id);
    default:
      throw Error(ErrorKind::InvalidArgument,
                  std::string(name) + ": memory on DLPack device type " + std::to_string(type) +
                      " is not supported; accepted: cpu (1), cuda (2), cuda_host (3), "
                      "cuda_managed (13)");
  }
}

// Strides of dims of size 1 are arbitrary (no element is reached through them): PyTorch gives
// such a dim of a channels_last tensor the stride its contiguous format would have. dnnx checks
// strides exactly, so they are replaced by the dense strides of the layout the other dims match.
Dims normalised_strides(const Dims& dims, const Dims& strides) {
  if (dims.rank() == 0) return strides;
  for (Layout layout : {Layout::channels_first, Layout::channels_last}) {
    Dims dense;
    try {
      dense = dense_strides(dims, layout);
    } catch (const Error&) {
      return strides;  // too large: Tensor::view names the problem
    }
    bool matches = true;
    for (int i = 0; i < dims.rank(); ++i)
      matches = matches && (dims[i] == 1 || dims[i] == 0 || strides[i] == dense[i]);
    if (matches) return dense;
  }
  return strides;
}

template <typename Array>
Tensor tensor_of(const Array& array, std::string_view name) {
  if (!array.is_valid())
    throw Error(ErrorKind::InvalidArgument, std::string(name) + ": not an array");
  const DType dtype = dtype_from(array.dtype(), name);
  const Device device = device_from(array.device_type(), array.device_id(), name);
  const auto rank = static_cast<int>(array.ndim());
  if (rank > Dims::max_rank)
    throw Error(ErrorKind::InvalidArgument, std::string(name) + ": rank " + std::to_string(rank) +
                                                " is not supported; at most " +
                                                std::to_string(Dims::max_rank) + " dims");
  std::vector<std::int64_t> shape(array.shape_ptr(), array.shape_ptr() + rank);
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank));
  if (array.stride_ptr() == nullptr) {  // DLPack: null strides mean row-major
    std::int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      strides[static_cast<std::size_t>(i)] = stride;
      stride *= std::max<std::int64_t>(shape[static_cast<std::size_t>(i)], 1);
    }
  } else {
    strides.assign(array.stride_ptr(), array.stride_ptr() + rank);
  }
  const Dims dims(std::span<const std::int64_t>(shape.data(), shape.size()));
  const Dims given(std::span<const std::int64_t>(strides.data(), strides.size()));
  try {
    return Tensor::view(const_cast<void*>(static_cast<const void*>(array.data())), dims, dtype,
                        normalised_strides(dims, given), device);
  } catch (const Error& error) {
    throw Error(error.kind(), std::string(name) + ": " + error.message());
  }
}

}  // namespace

Tensor to_tensor(const nb::ndarray<nb::ro>& array, std::string_view name) {
  return tensor_of(array, name);
}
Tensor to_tensor(const nb::ndarray<>& array, std::string_view name) {
  return tensor_of(array, name);
}

Layout layout_of(const Tensor& tensor, std::string_view name) {
  if (auto layout = tensor.layout()) return *layout;
  throw Error(ErrorKind::InvalidArgument,
              std::string(name) + ": " + describe(tensor) + " with strides " +
                  tensor.strides().to_string() +
                  " is not dense: dnnx takes channels_first (NCHW, contiguous) or channels_last "
                  "(NHWC) tensors; make it contiguous first");
}

Direction direction_of(OpKind op, std::string_view text) {
  return op_info(op).parse_direction(text);
}

std::string join_names(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

nb::tuple dims_tuple(const Dims& dims) {
  nb::list values;
  for (std::int64_t value : dims) values.append(value);
  return nb::tuple(values);
}

std::vector<std::int64_t> ints_from_python(nb::handle value, std::string_view name) {
  std::vector<std::int64_t> values;
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    values.push_back(nb::cast<std::int64_t>(value));
    return values;
  }
  const bool sequence = nb::isinstance<nb::tuple>(value) || nb::isinstance<nb::list>(value) ||
                        (nb::hasattr(value, "__len__") && nb::hasattr(value, "__getitem__") &&
                         !nb::isinstance<nb::str>(value));
  if (!sequence)
    throw Error(ErrorKind::InvalidArgument, std::string(name) +
                                                ": expected an int or a sequence of ints, got " +
                                                nb::cast<std::string>(nb::repr(value)));
  for (nb::handle item : value) {
    // Python ints, and what converts through __index__ (NumPy integers); not bools or floats.
    std::int64_t entry = 0;
    const bool integer = !nb::isinstance<nb::bool_>(item) && nb::hasattr(item, "__index__");
    if (!integer || !nb::try_cast<std::int64_t>(item.attr("__index__")(), entry))
      throw Error(ErrorKind::InvalidArgument, std::string(name) +
                                                  ": entries must be ints of 64 bits, got " +
                                                  nb::cast<std::string>(nb::repr(item)) + " in " +
                                                  nb::cast<std::string>(nb::repr(value)));
    values.push_back(entry);
  }
  return values;
}

Dims dims_from_python(nb::handle value, std::string_view name) {
  if (nb::isinstance<nb::int_>(value))
    throw Error(ErrorKind::InvalidArgument, std::string(name) +
                                                ": expected a sequence of ints (dims), got " +
                                                nb::cast<std::string>(nb::repr(value)));
  const std::vector<std::int64_t> values = ints_from_python(value, name);
  if (values.size() > static_cast<std::size_t>(Dims::max_rank))
    throw Error(ErrorKind::InvalidArgument, std::string(name) + ": " +
                                                std::to_string(values.size()) + " dims; at most " +
                                                std::to_string(Dims::max_rank));
  return Dims(std::span<const std::int64_t>(values.data(), values.size()));
}

void spatial_from_python(std::array<std::int64_t, 3>& values, nb::handle value,
                         std::string_view name) {
  const std::vector<std::int64_t> given = ints_from_python(value, name);
  if (nb::isinstance<nb::int_>(value)) {
    values.fill(given[0]);
    return;
  }
  if (given.empty() || given.size() > 3)
    throw Error(ErrorKind::InvalidArgument, std::string(name) +
                                                ": expected 1 to 3 entries (D, H, W order), got " +
                                                std::to_string(given.size()));
  for (std::size_t i = 0; i < given.size(); ++i) values[i] = given[i];
}

nb::tuple algo_row(const AlgoInfo& algo) {
  return nb::make_tuple(algo.id, algo.supported ? "supported" : "unsupported", algo.reason,
                        nb::none(), algo.workspace_bytes, algo.deterministic, algo.notes);
}

nb::tuple profile_row(const ProfileRow& row) {
  nb::object time = nb::none();
  if (row.median_ms == row.median_ms) time = nb::float_(row.median_ms);
  std::string reason = row.detail.empty() ? row.algo.reason : row.detail;
  return nb::make_tuple(row.algo.id, std::string(to_string(row.status)), reason, time,
                        row.algo.workspace_bytes, row.algo.deterministic, row.algo.notes);
}

void bind_tensors(nb::module_& module) {
  module.def(
      "layout_of",
      [](InArray array, std::string_view name) {
        return std::string(to_string(layout_of(to_tensor(array, name), name)));
      },
      nb::arg("array"), nb::arg("name") = "array",
      "'nchw' (channels_first) or 'nhwc' (channels_last): the dense layout of `array`'s strides; "
      "InvalidArgument for a non-dense array.");
  module.def(
      "describe",
      [](InArray array, std::string_view name) { return describe(to_tensor(array, name)); },
      nb::arg("array"), nb::arg("name") = "array",
      "How dnnx sees `array`: dtype, dims, layout (the view is made without a copy).");
  module.def(
      "data_ptr", [](InArray array) { return reinterpret_cast<std::uintptr_t>(array.data()); },
      nb::arg("array"), "The address of `array`'s first element as dnnx receives it.");
  module.def(
      "parse_dtype",
      [](std::string_view text) { return std::string(to_string(parse_dtype(text))); },
      nb::arg("text"), "The canonical dtype name ('f32', ...) of a spelling dnnx accepts.");
}

}  // namespace dnnx::python
