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

/// One attribute or method of torch.Tensor that read_torch reads: its interned name and, where
/// torch.Tensor's attribute is a C descriptor of the kind expected (a getset for properties, a
/// method descriptor for methods), that descriptor (Note [torch attributes read directly]).
struct TorchMember {
  PyObject* name = nullptr;
  PyObject* descriptor = nullptr;
};

/// PyTorch's objects read_torch compares with, fetched once torch is imported.
struct TorchObjects {
  PyObject* tensor_type = nullptr;
  PyObject* parameter_type = nullptr;  ///< torch.nn.Parameter, or null
  PyObject* strided = nullptr;
  std::array<std::pair<PyObject*, DType>, 5> dtypes{};
  TorchMember dtype, layout, is_cuda, is_cpu, get_device, data_ptr, size, stride, device, is_neg;
};

// Note [torch attributes read directly]
// Reading a tensor's attributes by name (PyObject_GetAttr, PyObject_CallMethod) walks
// torch.Tensor's class hierarchy and, for a method, makes a bound method object each time: about
// 0.1 us an attribute, about 1 us a tensor, a third of a small op's binding. torch.Tensor's
// attributes are C descriptors of torch._C's tensor base class, so for an object whose type is
// exactly torch.Tensor or torch.nn.Parameter (whose classes define none of these names
// themselves), the descriptor that the lookup would find is fetched once from torch.Tensor and
// called directly: tp_descr_get for a property, a vectorcall with the tensor for a method. The
// descriptors check their argument's type themselves, and PyTorch's own dispatch
// (__torch_function__) runs inside them as it does through the name. Any other type (a subclass
// that may override an attribute), or a descriptor of another kind (another PyTorch version),
// goes through the name.

/// The objects, or null while torch is not (fully) imported. Needs the GIL.
const TorchObjects* torch_objects() {
  static TorchObjects objects;
  static bool ready = false;
  if (ready) return &objects;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (torch == nullptr) return nullptr;
  const auto get = [torch](const char* name) {
    PyObject* value = PyObject_GetAttrString(torch, name);
    if (value == nullptr) PyErr_Clear();
    return value;  // a reference kept for the process's life
  };
  TorchObjects found;
  found.tensor_type = get("Tensor");
  found.strided = get("strided");
  const std::array<std::pair<const char*, DType>, 5> names{{{"float32", DType::f32},
                                                            {"float16", DType::f16},
                                                            {"bfloat16", DType::bf16},
                                                            {"int32", DType::i32},
                                                            {"int64", DType::i64}}};
  bool complete =
      found.tensor_type != nullptr && PyType_Check(found.tensor_type) && found.strided != nullptr;
  for (std::size_t i = 0; i < names.size(); ++i) {
    found.dtypes[i] = {get(names[i].first), names[i].second};
    complete = complete && found.dtypes[i].first != nullptr;
  }
  if (!complete) return nullptr;  // torch is still being imported: DLPack until it is
  PyObject* nn = get("nn");
  if (nn != nullptr) {
    found.parameter_type = PyObject_GetAttrString(nn, "Parameter");
    if (found.parameter_type == nullptr || !PyType_Check(found.parameter_type)) {
      PyErr_Clear();
      found.parameter_type = nullptr;
    }
  }
  // Note [torch attributes read directly]
  const auto member = [&found](const char* name, bool method) {
    TorchMember result;
    result.name = PyUnicode_InternFromString(name);
    PyObject* descriptor =
        result.name == nullptr ? nullptr : PyObject_GetAttr(found.tensor_type, result.name);
    if (descriptor == nullptr) {
      PyErr_Clear();
      return result;
    }
    const bool expected = method ? PyObject_TypeCheck(descriptor, &PyMethodDescr_Type)
                                 : PyObject_TypeCheck(descriptor, &PyGetSetDescr_Type);
    if (expected)
      result.descriptor = descriptor;  // a reference kept for the process's life
    else
      Py_DECREF(descriptor);
    return result;
  };
  found.dtype = member("dtype", false);
  found.layout = member("layout", false);
  found.is_cuda = member("is_cuda", false);
  found.is_cpu = member("is_cpu", false);
  found.device = member("device", false);
  found.get_device = member("get_device", true);
  found.data_ptr = member("data_ptr", true);
  found.size = member("size", true);
  found.stride = member("stride", true);
  found.is_neg = member("is_neg", true);
  if (found.dtype.name == nullptr || found.layout.name == nullptr ||
      found.is_cuda.name == nullptr || found.is_cpu.name == nullptr ||
      found.device.name == nullptr || found.get_device.name == nullptr ||
      found.data_ptr.name == nullptr || found.size.name == nullptr ||
      found.stride.name == nullptr || found.is_neg.name == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  objects = found;
  ready = true;
  return &objects;
}

/// str(object), or "?" when that fails.
std::string text_of(PyObject* object) {
  nb::object text = nb::steal(PyObject_Str(object));
  if (!text.is_valid()) {
    PyErr_Clear();
    return "?";
  }
  const char* utf8 = PyUnicode_AsUTF8(text.ptr());
  if (utf8 == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return utf8;
}

/// Reads a tuple of ints (torch.Size, a stride tuple) into `values`; false otherwise.
bool read_ints(PyObject* tuple, int rank, std::array<std::int64_t, Dims::max_rank>& values) {
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != rank) return false;
  for (int i = 0; i < rank; ++i) {
    values[static_cast<std::size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (values[static_cast<std::size_t>(i)] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

/// `object`'s attribute `member` (a new reference, or null with a Python error set): through its
/// descriptor when `direct`, else by name.
PyObject* attribute(PyObject* object, const TorchMember& member, bool direct) {
  if (direct && member.descriptor != nullptr)
    return Py_TYPE(member.descriptor)
        ->tp_descr_get(member.descriptor, object, reinterpret_cast<PyObject*>(Py_TYPE(object)));
  return PyObject_GetAttr(object, member.name);
}

/// `object`.`member`() (a new reference, or null with a Python error set).
PyObject* call(PyObject* object, const TorchMember& member, bool direct) {
  if (direct && member.descriptor != nullptr) {
    PyObject* arguments[] = {object};
    return PyObject_Vectorcall(member.descriptor, arguments, 1, nullptr);
  }
  return PyObject_CallMethodNoArgs(object, member.name);
}

bool read_torch_view(PyObject* object, const TorchObjects& torch, TorchView& view) {
  view.refusal.clear();
  // Note [torch attributes read directly]
  const PyObject* type = reinterpret_cast<const PyObject*>(Py_TYPE(object));
  const bool direct = type == torch.tensor_type || type == torch.parameter_type;
  {
    nb::object layout = nb::steal(attribute(object, torch.layout, direct));
    if (!layout.is_valid()) return false;
    if (layout.ptr() != torch.strided) {
      view.refusal = "layout " + text_of(layout.ptr()) + " is not supported; accepted: strided";
      return true;
    }
  }
  {
    nb::object dtype = nb::steal(attribute(object, torch.dtype, direct));
    if (!dtype.is_valid()) return false;
    bool known = false;
    for (const auto& [candidate, value] : torch.dtypes)
      if (dtype.ptr() == candidate) {
        view.dtype = value;
        known = true;
      }
    if (!known) {
      std::string name = text_of(dtype.ptr());
      if (name.rfind("torch.", 0) == 0) name = name.substr(6);
      view.refusal =
          "dtype " + name + " is not supported; accepted: float32, float16, bfloat16, int32, int64";
      return true;
    }
  }
  const auto flag = [object, direct](const TorchMember& name) {
    nb::object value = nb::steal(attribute(object, name, direct));
    if (!value.is_valid()) return -1;
    return PyObject_IsTrue(value.ptr());
  };
  const int cpu = flag(torch.is_cpu);
  if (cpu < 0) return false;
  if (cpu) {
    view.device = Device::cpu();
  } else {
    const int cuda = flag(torch.is_cuda);
    if (cuda < 0) return false;
    if (!cuda) {
      nb::object device = nb::steal(attribute(object, torch.device, direct));
      view.refusal = "memory on device " + (device.is_valid() ? text_of(device.ptr()) : "?") +
                     " is not supported; accepted: cpu, cuda";
      return true;
    }
    nb::object index = nb::steal(call(object, torch.get_device, direct));
    if (!index.is_valid()) return false;
    const long id = PyLong_AsLong(index.ptr());
    if (id == -1 && PyErr_Occurred()) return false;
    view.device = Device::cuda(static_cast<int>(id));
  }
  {
    // A negative-bit view's memory holds the negated values (DLPack refuses such views too).
    nb::object negated = nb::steal(call(object, torch.is_neg, direct));
    if (!negated.is_valid()) return false;
    if (negated.ptr() == Py_True) {
      view.refusal = "a view with the negative bit set (torch._neg_view); call resolve_neg() first";
      return true;
    }
  }
  nb::object size = nb::steal(call(object, torch.size, direct));
  if (!size.is_valid() || !PyTuple_Check(size.ptr())) return false;
  const Py_ssize_t rank = PyTuple_GET_SIZE(size.ptr());
  if (rank > Dims::max_rank) {
    view.refusal = "rank " + std::to_string(rank) + " is not supported; at most " +
                   std::to_string(Dims::max_rank) + " dims";
    return true;
  }
  view.rank = static_cast<int>(rank);
  nb::object stride = nb::steal(call(object, torch.stride, direct));
  if (!stride.is_valid() || !read_ints(size.ptr(), view.rank, view.dims) ||
      !read_ints(stride.ptr(), view.rank, view.strides))
    return false;
  nb::object pointer = nb::steal(call(object, torch.data_ptr, direct));
  if (!pointer.is_valid()) return false;
  view.data = PyLong_AsVoidPtr(pointer.ptr());
  return !(view.data == nullptr && PyErr_Occurred());
}

Tensor tensor_of(const TorchView& view, std::string_view name) {
  if (!view.refusal.empty())
    throw Error(ErrorKind::InvalidArgument, std::string(name) + ": " + view.refusal);
  const Dims dims(
      std::span<const std::int64_t>(view.dims.data(), static_cast<std::size_t>(view.rank)));
  const Dims given(
      std::span<const std::int64_t>(view.strides.data(), static_cast<std::size_t>(view.rank)));
  try {
    return Tensor::view(view.data, dims, view.dtype, normalised_strides(dims, given), view.device);
  } catch (const Error& error) {
    throw Error(error.kind(), std::string(name) + ": " + error.message());
  }
}

}  // namespace

bool read_torch(PyObject* object, TorchView& view) noexcept {
  try {
    const TorchObjects* torch = torch_objects();
    if (torch == nullptr ||
        !PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(torch->tensor_type)))
      return false;
    if (read_torch_view(object, *torch, view)) return true;
  } catch (...) {  // std::bad_alloc: the DLPack path reports what it finds
  }
  PyErr_Clear();
  return false;
}

Tensor to_tensor(const nb::ndarray<nb::ro>& array, std::string_view name) {
  return tensor_of(array, name);
}
Tensor to_tensor(const nb::ndarray<>& array, std::string_view name) {
  return tensor_of(array, name);
}
Tensor to_tensor(const InArray& array, std::string_view name) {
  return array.is_torch() ? tensor_of(array.torch, name) : tensor_of(array.array, name);
}
Tensor to_tensor(const OutArray& array, std::string_view name) {
  return array.is_torch() ? tensor_of(array.torch, name) : tensor_of(array.array, name);
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
  nb::object energy = nb::none();
  if (row.energy_j == row.energy_j) energy = nb::float_(row.energy_j);
  return nb::make_tuple(row.algo.id, std::string(to_string(row.status)), reason, time,
                        row.algo.workspace_bytes, row.algo.deterministic, row.algo.notes, energy);
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
      "data_ptr",
      [](InArray array) {
        return reinterpret_cast<std::uintptr_t>(to_tensor(array, "array").data());
      },
      nb::arg("array"), "The address of `array`'s first element as dnnx receives it.");
  module.def(
      "parse_dtype",
      [](std::string_view text) { return std::string(to_string(parse_dtype(text))); },
      nb::arg("text"), "The canonical dtype name ('f32', ...) of a spelling dnnx accepts.");
}

}  // namespace dnnx::python
