#include "backends/onednn/layer_common.hpp"

#include "backends/onednn/check.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

namespace dnnx::onednn {

std::size_t round_up(std::size_t bytes) {
  return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return detail::cat("oneDNN ", v->major, '.', v->minor, '.', v->patch);
}

std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == ':' || c == '+' || c == '.' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string_view isa_of(std::string_view impl, std::initializer_list<std::string_view> isas) {
  for (const std::string_view isa : isas) {
    if (contains(impl, isa)) return isa;
  }
  return {};
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::primitive_desc clone(const dnnl::primitive_desc& pd, const ErrorContext& context) {
  dnnl_primitive_desc_t copy = nullptr;
  DNNX_DNNL_CHECK(dnnl_primitive_desc_clone(&copy, pd.get()), context,
                  "cloning a primitive descriptor");
  return dnnl::primitive_desc(copy);
}

AlgoInfo unsupported_info(std::string id, std::string name, std::string reason) {
  AlgoInfo info;
  info.id = std::move(id);
  info.name = std::move(name);
  info.reason = std::move(reason);
  info.supported = false;
  return info;
}

void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return tensor->data();
}

void check_dense(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                 Layout layout, const ErrorContext& context) {
  data_of(tensor, role, context);
  if (tensor->dims() != dims || tensor->dtype() != dtype || !tensor->is_dense(layout) ||
      tensor->device() != Device::cpu()) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(role, " is ", describe(*tensor), "; this plan takes a dense ", to_string(dtype),
                    '[', dims.to_string(), ' ', to_string(layout), "] on cpu"),
        context);
  }
}

void check_workspace(const detail::Workspace& workspace, std::size_t needed,
                     const ErrorContext& context) {
  if (workspace.bytes < needed || (needed > 0 && workspace.data == nullptr)) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat("workspace has ", workspace.bytes, " bytes",
                    workspace.data == nullptr ? " (null)" : "", "; this candidate needs ", needed),
        context);
  }
}

void bind(const dnnl::memory& memory, void* data, const ErrorContext& context) {
  DNNX_DNNL_CHECK(dnnl_memory_set_data_handle(memory.get(), data), context,
                  "binding a data pointer");
}

Step make_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args,
               const dnnl::engine& engine) {
  Step step;
  step.primitive = dnnl::primitive(pd.get());
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (scratchpad.get_size() > 0) {
    step.scratchpad = dnnl::memory(scratchpad, engine, DNNL_MEMORY_NONE);
    args.push_back({DNNL_ARG_SCRATCHPAD, step.scratchpad.get()});
  }
  step.args = std::move(args);
  return step;
}

void run_step(Step& step, dnnl_stream_t stream, void* scratchpad, const ErrorContext& context) {
  if (step.scratchpad) bind(step.scratchpad, scratchpad, context);
  DNNX_DNNL_CHECK(dnnl_primitive_execute(step.primitive.get(), stream,
                                         static_cast<int>(step.args.size()), step.args.data()),
                  context, "executing");
}

void wait(dnnl_stream_t stream, const ErrorContext& context) {
  DNNX_DNNL_CHECK(dnnl_stream_wait(stream), context, "waiting for the stream");
}

}  // namespace dnnx::onednn
