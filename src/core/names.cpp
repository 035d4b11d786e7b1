// Names of the public enums, both ways. Parse errors list what is accepted.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <iterator>

namespace dnnx {

constexpr std::array<detail::EnumName<DType>, 5> dtype_names{{
    {DType::f32, "f32", {"float", "float32"}},
    {DType::f16, "f16", {"half", "float16"}},
    {DType::bf16, "bf16", {"bfloat16"}},
    {DType::i32, "i32", {"int32"}},
    {DType::i64, "i64", {"int64"}},
}};

std::string_view to_string(DType dtype) { return detail::enum_name(dtype_names, dtype); }

DType parse_dtype(std::string_view text) {
  return detail::parse_enum(dtype_names, text, "dtype", "f32, f16, bf16, i32, i64");
}

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 4;
}

std::string_view to_string(Layout layout) {
  return layout == Layout::channels_first ? "nchw" : "nhwc";
}

Layout parse_layout(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "nchw" || name == "ncw" || name == "ncdhw" || name == "channels_first")
    return Layout::channels_first;
  if (name == "nhwc" || name == "nwc" || name == "ndhwc" || name == "channels_last")
    return Layout::channels_last;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown layout '", text,
                            "'; accepted: nchw (channels_first), nhwc (channels_last)"));
}

std::string to_string(Device device) {
  return device.kind == Device::Kind::cpu ? std::string("cpu")
                                          : "cuda:" + std::to_string(device.index);
}

constexpr std::array<detail::EnumName<Direction>, 4> direction_names{{
    {Direction::fwd, "fwd", {"forward"}},
    {Direction::bwd_data, "bwd_data", {"backward_data"}},
    {Direction::bwd_weights, "bwd_weights", {"backward_weights", "bwd_filter"}},
    {Direction::fwd_training, "fwd_training", {"forward_training"}},
}};

std::string_view to_string(Direction direction) {
  return detail::enum_name(direction_names, direction);
}

Direction parse_direction(std::string_view text) {
  return detail::parse_enum(direction_names, text, "direction",
                            "fwd, bwd_data, bwd_weights, fwd_training");
}

namespace {

constexpr std::uint8_t backend_bits(int reference, int cpu, int cudnn) {
  return static_cast<std::uint8_t>(reference << static_cast<int>(BackendKind::reference) |
                                   cpu << static_cast<int>(BackendKind::cpu) |
                                   cudnn << static_cast<int>(BackendKind::cudnn));
}

constexpr OpInfo op_infos[] = {
#define DNNX_OP_INFO(kind, Type, name, aliases, directions, reference, cpu, cudnn, policies) \
  {OpKind::kind, name, aliases, op_directions::directions, backend_bits(reference, cpu, cudnn), \
   OpKind::policies},
    DNNX_OP_TABLE(DNNX_OP_INFO)
#undef DNNX_OP_INFO
};
static_assert(std::size(op_infos) == op_kind_count);

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::span<const OpInfo> op_table() { return op_infos; }

const OpInfo& op_info(OpKind op) {
  const auto index = static_cast<std::size_t>(op);
  DNNX_CHECK_ARG(index < std::size(op_infos), "op kind ", index, " is not in the op table (",
                 op_kind_count, " ops)");
  return op_infos[index];
}

bool OpInfo::has(Direction direction) const {
  return std::any_of(directions.begin(), directions.end(),
                     [direction](const OpDirection& d) { return d.direction == direction; });
}

std::string_view OpInfo::direction_name(Direction direction) const {
  for (const OpDirection& d : directions) {
    if (d.direction == direction) return d.name;
  }
  return to_string(direction);
}

namespace {

// "fwd, bwd_data (bwd)": canonical names, each followed by the op's own spelling where it differs.
std::string accepted_directions(const OpInfo& op) {
  std::string text;
  for (const OpDirection& d : op.directions) {
    if (!text.empty()) text += ", ";
    text += to_string(d.direction);
    if (d.name != to_string(d.direction)) text += detail::cat(" (", d.name, ")");
  }
  return text;
}

}  // namespace

void OpInfo::check(Direction direction) const {
  if (has(direction)) return;
  if (directions.size() == 1 && directions[0].direction == Direction::fwd) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(name, " has only the forward direction (fwd); got ",
                              to_string(direction)));
  }
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat(name, " has no direction ", to_string(direction),
                            "; accepted: ", accepted_directions(*this)));
}

Direction OpInfo::parse_direction(std::string_view text) const {
  const std::string lowered = detail::lower(text);
  for (const OpDirection& d : directions) {
    if (lowered == d.name) return d.direction;
  }
  Direction direction;
  try {
    direction = dnnx::parse_direction(text);
  } catch (const Error&) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("unknown direction '", text, "' for ", name,
                              "; accepted: ", accepted_directions(*this)));
  }
  check(direction);
  return direction;
}

bool OpInfo::implemented_on(BackendKind backend) const {
  return backend != BackendKind::automatic && (backends >> static_cast<int>(backend) & 1) != 0;
}

std::array<std::string, 2> OpInfo::policy_env_names(Direction direction) const {
  const std::string op = upper(name);
  const std::string dir = upper(direction_name(direction));
  return {detail::cat("DNNX_ALGO_", op, "_", dir), detail::cat("DNNX_", op, "_", dir, "_ALGO")};
}

namespace detail {

void OpBackends::missing_op(OpKind kind, BackendKind backend) {
  const OpInfo& op = op_info(kind);
  std::string implemented;
  for (BackendKind candidate : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
    if (op.implemented_on(candidate))
      implemented += cat(implemented.empty() ? "" : ", ", to_string(candidate));
  }
  raise(ErrorKind::Unsupported,
        cat(op.name, " is not implemented by the ", to_string(backend), " backend; ",
            implemented.empty() ? std::string("no backend implements it")
                                : "backends that implement it: " + implemented));
}

}  // namespace detail

std::string_view to_string(OpKind op) {
  const auto index = static_cast<std::size_t>(op);
  return index < std::size(op_infos) ? op_infos[index].name : std::string_view("?");
}

OpKind parse_op_kind(std::string_view text) {
  const std::string name = detail::lower(text);
  std::string accepted;
  for (const OpInfo& op : op_infos) {
    if (name == op.name) return op.kind;
    for (const std::string& alias : detail::split(op.aliases, ',')) {
      if (!alias.empty() && name == alias) return op.kind;
    }
    accepted += detail::cat(accepted.empty() ? "" : ", ", op.name);
  }
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown op '", text, "'; accepted: ", accepted));
}

constexpr std::array<detail::EnumName<BackendKind>, 4> backend_names{{
    {BackendKind::reference, "reference", {"ref"}},
    {BackendKind::cpu, "cpu", {"onednn"}},
    {BackendKind::cudnn, "cudnn", {"cuda", "gpu"}},
    {BackendKind::automatic, "auto", {"automatic"}},
}};

std::string_view to_string(BackendKind kind) { return detail::enum_name(backend_names, kind); }

BackendKind parse_backend(std::string_view text) {
  return detail::parse_enum(backend_names, text, "backend", "reference, cpu, cudnn, auto");
}

constexpr std::array<detail::EnumName<TypeConfig>, 3> type_config_names{{
    {TypeConfig::float32, "float", {"float32", "f32"}},
    {TypeConfig::half, "half", {"float16", "f16"}},
    {TypeConfig::bfloat16, "bfloat16", {"bf16"}},
}};

std::string_view to_string(TypeConfig config) {
  return detail::enum_name(type_config_names, config);
}

TypeConfig parse_type_config(std::string_view text) {
  return detail::parse_enum(type_config_names, text, "type config", "float, half, bfloat16");
}

DType dtype_of(TypeConfig config) {
  switch (config) {
    case TypeConfig::float32: return DType::f32;
    case TypeConfig::half: return DType::f16;
    case TypeConfig::bfloat16: return DType::bf16;
  }
  return DType::f32;
}

std::string_view to_string(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::ok: return "ok";
    case CandidateStatus::unsupported: return "unsupported";
    case CandidateStatus::over_workspace_limit: return "over_workspace_limit";
    case CandidateStatus::not_deterministic: return "not_deterministic";
    case CandidateStatus::failed: return "failed";
    case CandidateStatus::abandoned: return "abandoned";
    case CandidateStatus::not_timed: return "not_timed";
  }
  return "?";
}

}  // namespace dnnx
