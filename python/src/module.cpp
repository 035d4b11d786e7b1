// The extension module dnnx._dnnx. The Python package dnnx (python/dnnx) wraps it: arrays out in
// the caller's framework, the default context, rows as named tuples.

#include "bindings.hpp"

NB_MODULE(_dnnx, module) {
  using namespace dnnx::python;
  module.doc() = "dnnx's C++ API (include/dnnx) for the dnnx package";
  // Objects a program still holds at exit (a model in a global, the descs its converted layers
  // recorded for report()) are freed by the interpreter's shutdown in no fixed order, after this
  // module's own; nanobind's report of them at exit would name every desc as a leak.
  nanobind::set_leak_warnings(false);
  bind_errors(module);
  bind_tensors(module);
  bind_selection_types(module);
  bind_context(module);
#define DNNX_PYTHON_BIND_OP(op) bind_##op(module);
  DNNX_PYTHON_OPS(DNNX_PYTHON_BIND_OP)
#undef DNNX_PYTHON_BIND_OP
  module.attr("version") = std::string(dnnx::version());
}
