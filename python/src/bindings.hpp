#pragma once
// Shared pieces of the dnnx._dnnx module: arrays in (DLPack / buffer protocol) as dnnx::Tensor
// views, descs as Python classes with keyword fields, and the list / select / profile functions
// every op gets. One file per op under ops/ binds its desc and calls (docs/python.md, "Adding an
// op's bindings").

#include <dnnx/dnnx.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace dnnx::python {

namespace nb = nanobind;

/// The ops with bindings, one line each; ops/<op>.cpp defines bind_<op>(module).
#define DNNX_PYTHON_OPS(X) \
  X(conv)                  \
  X(conv_fused)            \
  X(pool)                  \
  X(activation)            \
  X(softmax)               \
  X(cross_entropy)         \
  X(batch_norm)            \
  X(add)                   \
  X(matmul)                \
  X(fill)                  \
  X(dropout)               \
  X(rnn)                   \
  X(optim)

#define DNNX_PYTHON_DECLARE_OP(op) void bind_##op(nb::module_& module);
DNNX_PYTHON_OPS(DNNX_PYTHON_DECLARE_OP)
#undef DNNX_PYTHON_DECLARE_OP

void bind_errors(nb::module_& module);
void bind_tensors(nb::module_& module);
void bind_selection_types(nb::module_& module);
void bind_context(nb::module_& module);

/// What a PyTorch tensor argument is read as without DLPack (Note [torch tensors in]).
struct TorchView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  int rank = 0;
  std::array<std::int64_t, Dims::max_rank> dims{}, strides{};
  /// Why dnnx cannot take the tensor ("dtype torch.float64", ...); empty when it can.
  std::string refusal;
};

/// Reads `object` when it is a torch.Tensor (or a subclass: nn.Parameter) and PyTorch is imported;
/// false for anything else (and for a tensor whose attributes cannot be read), which then goes
/// through nanobind's DLPack import. Needs the GIL; throws nothing.
bool read_torch(PyObject* object, TorchView& view) noexcept;

/// An array argument as the bindings receive it: anything with __dlpack__ or the buffer protocol
/// (read-only ones too when ReadOnly), never copied (no dtype or order is requested, so nanobind
/// passes the caller's memory), and PyTorch tensors through their own attributes.
///
/// Note [torch tensors in]
/// A torch tensor's __dlpack__ is Python code that builds a capsule: about 5 us a tensor, most of
/// a small op's host time. torch.Tensor's C attributes (dtype, layout, is_cuda, data_ptr(), size(),
/// stride()) give the same view, the same memory, in well under a microsecond, and a tensor that
/// requires grad needs no detached view (its __dlpack__ refuses it). The view is checked like any
/// other (to_tensor); a tensor dnnx cannot take (float64, sparse, on another device) is refused by
/// name as the DLPack path would refuse it.
template <bool ReadOnly>
struct Array {
  std::conditional_t<ReadOnly, nb::ndarray<nb::ro>, nb::ndarray<>> array;
  nb::object torch_tensor;  ///< the tensor when read through TorchView (kept alive)
  TorchView torch;
  bool is_torch() const { return torch_tensor.is_valid(); }
};

/// An array argument an op reads.
using InArray = Array<true>;
/// An array argument an op writes.
using OutArray = Array<false>;

/// A view of `array` (argument `name` of the call): dtype, dims and strides as the array has them,
/// on its device. Strides of size-1 dims are normalised to the dense layout the other strides
/// match, so that e.g. PyTorch's channels_last tensors with one channel are dense. Throws
/// InvalidArgument naming `name` for a dtype, rank or device dnnx does not handle.
Tensor to_tensor(const nb::ndarray<nb::ro>& array, std::string_view name);
Tensor to_tensor(const nb::ndarray<>& array, std::string_view name);
Tensor to_tensor(const InArray& array, std::string_view name);
Tensor to_tensor(const OutArray& array, std::string_view name);

/// `strides` with those of size-1 dims replaced by the dense strides of the layout the other dims
/// match: no element is reached through them, PyTorch gives such a dim of a channels_last tensor
/// the stride its contiguous format would have, and dnnx checks strides exactly. Unchanged when
/// no layout matches (Tensor::view then names the problem).
Dims normalised_strides(const Dims& dims, const Dims& strides);

/// Sets the Python error of `error`: its dnnx._errors class (dnnx.InvalidArgument, ...) with the
/// error's fields as attributes. Needs the GIL and load_error_classes().
void set_python_error(const Error& error);
/// Looks up the classes of dnnx._errors once (bind_errors does; another module calls it first).
void load_error_classes();

/// The dense layout of a view, or InvalidArgument naming `name`, its dims and strides.
Layout layout_of(const Tensor& tensor, std::string_view name);

/// Parses an op's direction name ("fwd", "bwd", "bwd_data", ...) for `op`.
Direction direction_of(OpKind op, std::string_view text);

/// A candidate as the row the Python API returns: (id, status, reason, time_ms, workspace,
/// deterministic, notes). Listing rows have status "supported" / "unsupported" and no time.
nb::tuple algo_row(const AlgoInfo& algo);
nb::tuple profile_row(const ProfileRow& row);

/// Dims as a tuple of ints.
nb::tuple dims_tuple(const Dims& dims);
/// Reads a sequence of Python ints as Dims (InvalidArgument naming `name` otherwise).
Dims dims_from_python(nb::handle value, std::string_view name);
/// Writes an int or a sequence of 1 to 3 ints into the first entries of `values`.
void spatial_from_python(std::array<std::int64_t, 3>& values, nb::handle value,
                         std::string_view name);
/// Reads an int or a sequence of ints as a vector (the from_shapes arguments).
std::vector<std::int64_t> ints_from_python(nb::handle value, std::string_view name);

/// "a, b, c".
std::string join_names(const std::vector<std::string>& names);

/// A choice as Python sees it (the shared, immutable record).
struct PyChoice {
  std::shared_ptr<const Choice> choice;
};

/// algos(ctx, desc, direction), select(ctx, desc, direction) and profile(ctx, desc, direction) for
/// one desc type: nanobind picks the overload by the desc's class.
template <typename Desc>
void bind_selection(nb::module_& module, OpKind op,
                    std::vector<AlgoInfo> (*list)(Context&, const Desc&, Direction),
                    std::shared_ptr<const Choice> (*select)(Context&, const Desc&, Direction),
                    ProfileResult (*profile)(Context&, const Desc&, Direction)) {
  module.def(
      "algos",
      [op, list](Context& context, const Desc& desc, std::string_view direction) {
        const Direction parsed = direction_of(op, direction);
        std::vector<AlgoInfo> algos;
        {
          nb::gil_scoped_release released;
          algos = list(context, desc, parsed);
        }
        nb::list rows;
        for (const AlgoInfo& algo : algos) rows.append(algo_row(algo));
        return rows;
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("direction"));
  module.def(
      "select",
      [op, select](Context& context, const Desc& desc, std::string_view direction) {
        const Direction parsed = direction_of(op, direction);
        nb::gil_scoped_release released;
        return PyChoice{select(context, desc, parsed)};
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("direction"));
  module.def(
      "profile",
      [op, profile](Context& context, const Desc& desc, std::string_view direction) {
        const Direction parsed = direction_of(op, direction);
        nb::gil_scoped_release released;
        return profile(context, desc, parsed);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("direction"));
}

/// Binds the desc struct of `op` as a Python class: a keyword constructor (every field, by name),
/// fields as attributes, repr = operator<<, ==, hash, key(), repro(direction), validate(),
/// fields(). Enum fields read and write their CLI spelling ("f32", "nhwc", "max", ...); spatial
/// arrays read as 3-tuples and take an int (every entry) or 1 to 3 entries (the first ones); Dims
/// fields read as tuples and take sequences of ints.
template <typename Desc>
class DescClass {
 public:
  DescClass(nb::module_& module, const char* name, OpKind op, const char* doc)
      : class_(module, name, doc), fields_(std::make_shared<std::vector<std::string>>()) {
    auto fields = fields_;
    class_.def(
        "__init__",
        [fields](nb::handle self, nb::kwargs kwargs) {
          if (nb::inst_ready(self)) nb::inst_destruct(self);  // __init__ called again
          new (nb::inst_ptr<Desc>(self)) Desc{};
          nb::inst_mark_ready(self);
          for (auto [key, value] : kwargs) {
            const std::string field = nb::cast<std::string>(key);
            if (std::find(fields->begin(), fields->end(), field) == fields->end())
              throw Error(ErrorKind::InvalidArgument,
                          std::string(nb::type_name(self.type()).c_str()) + " has no field '" +
                              field + "'; fields: " + join_names(*fields));
            nb::setattr(self, key, value);
          }
        },
        "Every field by keyword; the rest keep their defaults.");
    class_.def("__repr__", [](const Desc& desc) {
      std::ostringstream out;
      out << desc;
      return out.str();
    });
    class_.def("__eq__", [](const Desc& a, const Desc& b) { return a == b; });
    class_.def("__hash__", [](const Desc& desc) { return desc.hash(); });
    class_.def("__copy__", [](const Desc& desc) { return desc; });
    class_.def("__deepcopy__", [](const Desc& desc, nb::handle) { return desc; });
    class_.def(
        "copy", [](const Desc& desc) { return desc; }, "A copy of the desc.");
    class_.def("key", &Desc::key, "Canonical one-line text of every field (the cache-key part).");
    class_.def(
        "repro",
        [op](const Desc& desc, std::string_view direction) {
          return desc.repro(direction_of(op, direction));
        },
        nb::arg("direction") = "fwd", "The `dnnx` CLI line that reproduces the case.");
    class_.def("validate", &Desc::validate,
               "Raises InvalidArgument naming the first bad field and its value.");
    class_.def_static(
        "fields", [fields] { return *fields; }, "The field names, in order.");
  }

  nb::class_<Desc>& cls() { return class_; }

  /// A plain field (integer, bool, floating point, or a nested desc).
  template <typename T>
  DescClass& field(const char* name, T Desc::*member, const char* doc) {
    fields_->emplace_back(name);
    class_.def_rw(name, member, doc);
    return *this;
  }

  /// An enum field spelled as text: `parse` reads it, dnnx::to_string writes it.
  template <typename E>
  DescClass& enum_field(const char* name, E Desc::*member, E (*parse)(std::string_view),
                        const char* doc) {
    fields_->emplace_back(name);
    class_.def_prop_rw(
        name, [member](const Desc& desc) { return std::string(to_string(desc.*member)); },
        [member, parse](Desc& desc, std::string_view text) { desc.*member = parse(text); }, doc);
    return *this;
  }

  /// A D, H, W array (the first spatial_dims entries are meaningful).
  DescClass& spatial(const char* name, std::array<std::int64_t, 3> Desc::*member, const char* doc) {
    fields_->emplace_back(name);
    std::string field_name = name;
    class_.def_prop_rw(
        name,
        [member](const Desc& desc) {
          const auto& values = desc.*member;
          return nb::make_tuple(values[0], values[1], values[2]);
        },
        [member, field_name](Desc& desc, nb::handle value) {
          spatial_from_python(desc.*member, value, field_name);
        },
        doc);
    return *this;
  }

  /// A Dims field.
  DescClass& dims(const char* name, Dims Desc::*member, const char* doc) {
    fields_->emplace_back(name);
    std::string field_name = name;
    class_.def_prop_rw(
        name, [member](const Desc& desc) { return dims_tuple(desc.*member); },
        [member, field_name](Desc& desc, nb::handle value) {
          desc.*member = dims_from_python(value, field_name);
        },
        doc);
    return *this;
  }

  /// A list of Dims (the multi-tensor ops' shapes), read as a list of tuples.
  DescClass& dims_list(const char* name, std::vector<Dims> Desc::*member, const char* doc) {
    fields_->emplace_back(name);
    std::string field_name = name;
    class_.def_prop_rw(
        name,
        [member](const Desc& desc) {
          nb::list shapes;
          for (const Dims& dims : desc.*member) shapes.append(dims_tuple(dims));
          return shapes;
        },
        [member, field_name](Desc& desc, nb::handle value) {
          std::vector<Dims> shapes;
          for (nb::handle entry : value) shapes.push_back(dims_from_python(entry, field_name));
          desc.*member = std::move(shapes);
        },
        doc);
    return *this;
  }

  /// A method returning Dims (src_dims, dst_dims, ...), as a tuple.
  DescClass& shape(const char* name, Dims (Desc::*method)() const, const char* doc) {
    class_.def(
        name, [method](const Desc& desc) { return dims_tuple((desc.*method)()); }, doc);
    return *this;
  }

 private:
  nb::class_<Desc> class_;
  std::shared_ptr<std::vector<std::string>> fields_;
};

/// `tensor` when `array` is given, else the null pointer: optional arguments of the C++ API.
template <typename Array>
struct Optional {
  explicit Optional(const std::optional<Array>& array, std::string_view name) {
    if (array) {
      tensor = to_tensor(*array, name);
      present = true;
    }
  }
  Tensor* get() { return present ? &tensor : nullptr; }
  /// The tensor, or an empty Tensor() (the API's "not given" for some arguments).
  const Tensor& or_empty() const { return tensor; }
  Tensor tensor;
  bool present = false;
};

}  // namespace dnnx::python

namespace nanobind::detail {

/// Array<ReadOnly>: read_torch for PyTorch tensors, nanobind's ndarray import otherwise.
template <bool ReadOnly>
struct type_caster<dnnx::python::Array<ReadOnly>> {
  using Inner = std::conditional_t<ReadOnly, ndarray<ro>, ndarray<>>;
  NB_TYPE_CASTER(dnnx::python::Array<ReadOnly>, const_name("ndarray"))

  bool from_python(handle src, uint8_t flags, cleanup_list* cleanup) noexcept {
    if (dnnx::python::read_torch(src.ptr(), value.torch)) {
      value.torch_tensor = borrow(src);
      return true;
    }
    make_caster<Inner> inner;
    if (!inner.from_python(src, flags, cleanup)) return false;
    value.array = std::move(inner.value);
    return true;
  }

  static handle from_cpp(const Value&, rv_policy, cleanup_list*) noexcept { return handle(); }
};

}  // namespace nanobind::detail
