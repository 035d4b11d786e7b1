#include "backends/onednn/layer_common.hpp"

#include "backends/onednn/check.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <utility>

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

bool is_f32_compute(const AlgoInfo& info) {
  return std::find(info.notes.begin(), info.notes.end(), f32_compute_note) != info.notes.end();
}

int supported_rank(const AlgoInfo& info) {
  if (!info.supported) return 3;
  if (info.id.starts_with("onednn:ref:")) return 2;
  return is_f32_compute(info) ? 1 : 0;
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

// ---- f32 compute (Note [f32 compute]) -----------------------------------------------------------

dnnl::memory::desc as_f32(const dnnl::memory::desc& md) {
  return dnnl::memory::desc(md.get_dims(), dnnl::memory::data_type::f32, md.get_strides());
}

std::optional<F32Conversion> f32_conversion(const dnnl::engine& engine,
                                            std::vector<ConvertedTensor> tensors,
                                            const ErrorContext& context, std::string& failure) {
  F32Conversion conversion;
  std::size_t offset = 0;
  std::size_t scratchpad = 0;
  for (const ConvertedTensor& tensor : tensors) {
    const dnnl::memory::desc copy = as_f32(tensor.user);
    const auto reorder = [&](const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
      return create_or_unavailable(
          [&] {
            return dnnl::primitive_desc_base(
                dnnl::reorder::primitive_desc(engine, from, engine, to, user_scratchpad()));
          },
          "f32 conversion reorder", context, failure);
    };
    dnnl::primitive_desc_base in, out;
    if (tensor.access != Access::write) {
      in = reorder(tensor.user, copy);
      if (!in) return std::nullopt;
      scratchpad = std::max(scratchpad, in.scratchpad_desc().get_size());
    }
    if (tensor.access != Access::read) {
      out = reorder(copy, tensor.user);
      if (!out) return std::nullopt;
      scratchpad = std::max(scratchpad, out.scratchpad_desc().get_size());
    }
    conversion.copies.push_back(copy);
    conversion.to_f32.push_back(std::move(in));
    conversion.from_f32.push_back(std::move(out));
    conversion.offsets.push_back(offset);
    offset += round_up(copy.get_size());
  }
  conversion.tensors = std::move(tensors);
  conversion.scratchpad_offset = offset;
  conversion.bytes = offset + round_up(scratchpad);
  return conversion;
}

F32Conversions::F32Conversions(std::shared_ptr<const F32Conversion> conversion,
                               const dnnl::engine& engine)
    : conversion_(std::move(conversion)) {
  const std::size_t count = conversion_->tensors.size();
  for (std::size_t i = 0; i < count; ++i) {
    users_.push_back(dnnl::memory(conversion_->tensors[i].user, engine, DNNL_MEMORY_NONE));
    copies_.push_back(dnnl::memory(conversion_->copies[i], engine, DNNL_MEMORY_NONE));
  }
  for (std::size_t i = 0; i < count; ++i) {
    const dnnl::primitive_desc_base& in = conversion_->to_f32[i];
    const dnnl::primitive_desc_base& out = conversion_->from_f32[i];
    in_.push_back(
        in ? make_step(in, {{DNNL_ARG_FROM, users_[i].get()}, {DNNL_ARG_TO, copies_[i].get()}},
                       engine)
           : Step{});
    out_.push_back(
        out ? make_step(out, {{DNNL_ARG_FROM, copies_[i].get()}, {DNNL_ARG_TO, users_[i].get()}},
                        engine)
            : Step{});
  }
}

void F32Conversions::convert_in(std::span<void* const> data, std::byte* workspace,
                                dnnl_stream_t stream, const ErrorContext& context) {
  DNNX_ASSERT(data.size() == users_.size(), "f32 conversion of ", users_.size(), " tensors given ",
              data.size(), " pointers");
  for (std::size_t i = 0; i < users_.size(); ++i) {
    bind(users_[i], data[i], context);
    bind(copies_[i], copy(i, workspace), context);
  }
  std::byte* scratchpad = workspace + conversion_->scratchpad_offset;
  for (Step& step : in_) {
    if (step.primitive) run_step(step, stream, scratchpad, context);
  }
}

void* F32Conversions::copy(std::size_t index, std::byte* workspace) const {
  return workspace + conversion_->offsets[index];
}

void F32Conversions::convert_out(std::byte* workspace, dnnl_stream_t stream,
                                 const ErrorContext& context) {
  std::byte* scratchpad = workspace + conversion_->scratchpad_offset;
  for (Step& step : out_) {
    if (step.primitive) run_step(step, stream, scratchpad, context);
  }
}

}  // namespace dnnx::onednn
