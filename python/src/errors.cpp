// dnnx::Error -> the Python classes of dnnx._errors (dnnx.Error and one subclass per kind, each
// also a ValueError / NotImplementedError / MemoryError / RuntimeError), with the error's fields
// as attributes. No C++ exception crosses into Python untranslated: nanobind maps the standard
// ones (std::bad_alloc -> MemoryError, any other std::exception -> RuntimeError).

#include "bindings.hpp"

namespace dnnx::python {
namespace {

// The classes, looked up once; leaked on purpose (the interpreter may be finalising when the
// module's statics are destroyed).
nb::handle error_classes[5];

nb::handle class_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return error_classes[0];
    case ErrorKind::Unsupported: return error_classes[1];
    case ErrorKind::OutOfMemory: return error_classes[2];
    case ErrorKind::BackendFailure: return error_classes[3];
    case ErrorKind::Internal: return error_classes[4];
  }
  return error_classes[4];
}

}  // namespace

void set_python_error(const Error& error) {
  nb::handle cls = class_of(error.kind());
  nb::object instance = cls(error.what());
  const ErrorContext& context = error.context();
  instance.attr("kind") = nb::str(std::string(to_string(error.kind())).c_str());
  instance.attr("message") = error.message();
  instance.attr("op") = context.op;
  instance.attr("repro") = context.repro;
  instance.attr("backend") = context.backend;
  instance.attr("implementation") = context.implementation;
  instance.attr("status") = context.status;
  instance.attr("where") = error.where();
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

void load_error_classes() {
  if (error_classes[0].is_valid()) return;
  nb::module_ errors = nb::module_::import_("dnnx._errors");
  const char* names[] = {"InvalidArgument", "Unsupported", "OutOfMemory", "BackendFailure",
                         "Internal"};
  for (int i = 0; i < 5; ++i) error_classes[i] = errors.attr(names[i]).inc_ref();
}

void bind_errors(nb::module_& module) {
  load_error_classes();
  nb::register_exception_translator([](const std::exception_ptr& pointer, void*) {
    try {
      std::rethrow_exception(pointer);
    } catch (const Error& error) {
      try {
        set_python_error(error);
      } catch (nb::python_error& failed) {
        failed.restore();  // building the exception failed: raise why instead
      }
    }
  });
}

}  // namespace dnnx::python
