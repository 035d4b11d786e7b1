// Names of the public enums, both ways. Parse errors list what is accepted.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"

namespace dnnx {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "f32" || name == "float" || name == "float32") return DType::f32;
  if (name == "f16" || name == "half" || name == "float16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64") return DType::i64;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown dtype '", text, "'; accepted: f32, f16, bf16, i32, i64"));
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

std::string_view to_string(Direction direction) {
  switch (direction) {
    case Direction::fwd: return "fwd";
    case Direction::bwd_data: return "bwd_data";
    case Direction::bwd_weights: return "bwd_weights";
  }
  return "?";
}

Direction parse_direction(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "fwd" || name == "forward") return Direction::fwd;
  if (name == "bwd_data" || name == "backward_data") return Direction::bwd_data;
  if (name == "bwd_weights" || name == "backward_weights" || name == "bwd_filter")
    return Direction::bwd_weights;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown direction '", text, "'; accepted: fwd, bwd_data, bwd_weights"));
}

std::string_view to_string(OpKind op) {
  switch (op) {
    case OpKind::conv: return "conv";
    case OpKind::pool: return "pool";
    case OpKind::activation: return "act";
    case OpKind::softmax: return "softmax";
    case OpKind::cross_entropy: return "xent";
    case OpKind::batch_norm: return "bnorm";
    case OpKind::add: return "add";
  }
  return "?";
}

OpKind parse_op_kind(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "conv" || name == "convolution") return OpKind::conv;
  if (name == "pool" || name == "pooling") return OpKind::pool;
  if (name == "act" || name == "activation") return OpKind::activation;
  if (name == "softmax") return OpKind::softmax;
  if (name == "xent" || name == "cross_entropy") return OpKind::cross_entropy;
  if (name == "bnorm" || name == "batch_norm") return OpKind::batch_norm;
  if (name == "add") return OpKind::add;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown op '", text,
                            "'; accepted: conv, pool, act, softmax, xent, bnorm, add"));
}

std::string_view to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::reference: return "reference";
    case BackendKind::cpu: return "cpu";
    case BackendKind::cudnn: return "cudnn";
    case BackendKind::automatic: return "auto";
  }
  return "?";
}

BackendKind parse_backend(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "reference" || name == "ref") return BackendKind::reference;
  if (name == "cpu" || name == "onednn") return BackendKind::cpu;
  if (name == "cudnn" || name == "cuda" || name == "gpu") return BackendKind::cudnn;
  if (name == "auto" || name == "automatic") return BackendKind::automatic;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown backend '", text, "'; accepted: reference, cpu, cudnn, auto"));
}

std::string_view to_string(TypeConfig config) {
  switch (config) {
    case TypeConfig::float32: return "float";
    case TypeConfig::half: return "half";
    case TypeConfig::bfloat16: return "bfloat16";
  }
  return "?";
}

TypeConfig parse_type_config(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "float" || name == "float32" || name == "f32") return TypeConfig::float32;
  if (name == "half" || name == "float16" || name == "f16") return TypeConfig::half;
  if (name == "bfloat16" || name == "bf16") return TypeConfig::bfloat16;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown type config '", text, "'; accepted: float, half, bfloat16"));
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
