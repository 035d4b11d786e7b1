#include "backends/onednn/layer_common.hpp"

#include "backends/onednn/check.hpp"
#include "backends/onednn/convert.hpp"
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

dnnl::memory::format_tag activation_tag(int rank, Layout layout) {
  using Tag = dnnl::memory::format_tag;
  constexpr Tag first[] = {Tag::ab, Tag::abc, Tag::abcd, Tag::abcde};
  constexpr Tag last[] = {Tag::ab, Tag::acb, Tag::acdb, Tag::acdeb};
  const auto r = static_cast<std::size_t>(rank - 2);
  return layout == Layout::channels_last ? last[r] : first[r];
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

bool is_f32_compute(const AlgoInfo& info) { return info.has_note(f32_compute_note); }

int supported_rank(const AlgoInfo& info) {
  if (!info.supported) return 3;
  if (info.naive) return 2;
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

AlgoInfo unavailable_info(std::string_view name, const std::string& why, std::string_view problem,
                          std::string_view isa, std::string_view failure) {
  AlgoInfo info = unsupported_info(
      detail::cat("onednn:unavailable:", name), detail::cat(name, " (no oneDNN implementation)"),
      !why.empty() ? why
                   : detail::cat(onednn_version(), " has no implementation of ", name, " for ",
                                 problem, " on cpu isa ", isa, ": ", failure));
  info.notes = {std::string(name)};
  return info;
}

AlgoInfo kernel_info_of(std::string id, std::string name) {
  AlgoInfo info;
  info.id = std::move(id);
  info.name = std::move(name);
  info.supported = true;
  info.deterministic = true;
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

void check_dense_on_cpu(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                        Layout layout, const ErrorContext& context) {
  data_of(tensor, role, context);
  if (tensor->dims() != dims || tensor->dtype() != dtype || !tensor->is_dense(layout) ||
      tensor->device() != Device::cpu()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                              "; this plan takes a dense ", to_string(dtype), '[', dims.to_string(),
                              ' ', to_string(layout), "] on cpu"),
                  context);
  }
}

void check_workspace(const detail::Workspace& workspace, std::size_t needed,
                     const ErrorContext& context) {
  detail::check_workspace_bytes(workspace.bytes, workspace.data, needed, context);
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

F32Conversion::F32Conversion(const std::vector<ConvertedTensor>& tensors) {
  for (const ConvertedTensor& tensor : tensors) {
    const dnnl::memory::data_type type = tensor.user.get_data_type();
    DNNX_ASSERT(type == dnnl::memory::data_type::f16 || type == dnnl::memory::data_type::bf16,
                "f32 compute converts f16 or bf16 tensors, got oneDNN data type ",
                static_cast<int>(type));
    std::int64_t count = 1;
    for (const dnnl::memory::dim dim : tensor.user.get_dims()) count *= dim;
    // Note [f32 compute]: elementwise over the buffer, so the tensor must fill it.
    DNNX_ASSERT(tensor.user.get_size() == static_cast<std::size_t>(count) * 2,
                "f32 compute converts dense tensors; this one has ", count, " values in ",
                tensor.user.get_size(), " bytes");
    copies_.push_back({type == dnnl::memory::data_type::f16 ? DType::f16 : DType::bf16, count,
                       tensor.access, bytes_});
    bytes_ += round_up(static_cast<std::size_t>(count) * sizeof(float));
  }
}

void F32Conversion::check(std::span<void* const> data) const {
  DNNX_ASSERT(data.size() == copies_.size(), "f32 conversion of ", copies_.size(),
              " tensors given ", data.size(), " pointers");
}

void F32Conversion::convert_in(std::span<void* const> data, std::byte* workspace) const {
  check(data);
  for (std::size_t i = 0; i < copies_.size(); ++i) {
    const Copy& t = copies_[i];
    if (t.access != Access::write)
      convert(data[i], t.dtype, workspace + t.offset, DType::f32, t.count);
  }
}

void* F32Conversion::copy(std::size_t index, std::byte* workspace) const {
  return workspace + copies_.at(index).offset;
}

void F32Conversion::convert_out(std::span<void* const> data, std::byte* workspace) const {
  check(data);
  for (std::size_t i = 0; i < copies_.size(); ++i) {
    const Copy& t = copies_[i];
    if (t.access != Access::read)
      convert(workspace + t.offset, DType::f32, data[i], t.dtype, t.count);
  }
}

void F32Conversions::convert_in(std::span<void* const> data, std::byte* workspace) {
  data_.assign(data.begin(), data.end());
  conversion_->convert_in(data_, workspace);
}

void F32Conversions::convert_out(std::byte* workspace, dnnl_stream_t stream,
                                 const ErrorContext& context) {
  wait(stream, context);
  conversion_->convert_out(data_, workspace);
}

}  // namespace dnnx::onednn
