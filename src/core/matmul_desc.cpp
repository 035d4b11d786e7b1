// MatmulDesc: shapes, validation, printing. Every message names the field and its value.

#include <dnnx/ops/matmul.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::shortest;

// `rows` x `cols`, with a leading `batch` dim when batch > 1.
Dims matrix_dims(std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  return batch > 1 ? Dims{batch, rows, cols} : Dims{rows, cols};
}

bool in_range(std::int64_t value) { return value >= 1 && value <= detail::max_dim_size; }

// Note [shapes of an unvalidated desc] (core/check.hpp): the dims accessors run validate() on a
// desc whose sizes are out of range.
void check_sizes(const MatmulDesc& desc) {
  if (!in_range(desc.batch) || !in_range(desc.m) || !in_range(desc.n) || !in_range(desc.k))
    desc.validate();
}

constexpr std::array<detail::EnumName<MatmulActivation>, 3> activation_names{{
    {MatmulActivation::none, "none", {"identity"}},
    {MatmulActivation::relu, "relu"},
    {MatmulActivation::gelu_tanh, "gelu_tanh", {"gelu"}},
}};

}  // namespace

std::string_view to_string(MatmulActivation activation) {
  return detail::enum_name(activation_names, activation);
}

MatmulActivation parse_matmul_activation(std::string_view text) {
  return detail::parse_enum(activation_names, text, "matmul activation",
                            "none, relu, gelu_tanh (gelu)");
}

MatmulDesc MatmulDesc::linear(std::int64_t rows, std::int64_t in, std::int64_t out, bool bias,
                              DType dtype) {
  MatmulDesc desc;
  desc.m = rows;
  desc.k = in;
  desc.n = out;
  desc.transpose_b = true;
  desc.bias = bias;
  desc.dtype = dtype;
  desc.validate();
  return desc;
}

void MatmulDesc::validate() const {
  auto size = [](const char* field, std::int64_t value) {
    DNNX_CHECK_ARG(in_range(value), field, " must be in [1, 2^31], got ", value);
  };
  size("batch", batch);
  size("m", m);
  size("n", n);
  size("k", k);
  // Note [size limits]: each product of two sizes fits; a tensor's count must too.
  detail::checked_count(matrix_dims(broadcast_a ? 1 : batch, m, k), "a dims");
  detail::checked_count(matrix_dims(broadcast_b ? 1 : batch, k, n), "b dims");
  detail::checked_count(matrix_dims(batch, m, n), "dst dims");
  DNNX_CHECK_ARG(!broadcast_b || batch > 1, "broadcast_b shares b between the products of a "
                 "batch, but batch is 1 (leave broadcast_b false)");
  DNNX_CHECK_ARG(!broadcast_a || batch > 1,
                 "broadcast_a shares a between the products of a "
                 "batch, but batch is 1 (leave broadcast_a false)");
  DNNX_CHECK_ARG(!(broadcast_a && broadcast_b),
                 "broadcast_a and broadcast_b together would make every product of the batch the "
                 "same one (use batch 1, or share only one of a and b)");
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(std::isfinite(alpha), "alpha must be finite, got ", shortest(alpha));
  DNNX_CHECK_ARG(std::isfinite(beta), "beta must be finite, got ", shortest(beta));
  DNNX_CHECK_ARG(activation == MatmulActivation::none || activation == MatmulActivation::relu ||
                     activation == MatmulActivation::gelu_tanh,
                 "activation must be none, relu or gelu_tanh, got value ",
                 static_cast<int>(activation));
}

Dims MatmulDesc::a_dims() const {
  check_sizes(*this);
  const std::int64_t a_batch = broadcast_a ? 1 : batch;
  return transpose_a ? matrix_dims(a_batch, k, m) : matrix_dims(a_batch, m, k);
}

Dims MatmulDesc::b_dims() const {
  check_sizes(*this);
  const std::int64_t b_batch = broadcast_b ? 1 : batch;
  return transpose_b ? matrix_dims(b_batch, n, k) : matrix_dims(b_batch, k, n);
}

Dims MatmulDesc::dst_dims() const {
  check_sizes(*this);
  return matrix_dims(batch, m, n);
}

Dims MatmulDesc::bias_dims() const {
  check_sizes(*this);
  return Dims{n};
}

double MatmulDesc::flops() const {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
         static_cast<double>(k);
}

std::string MatmulDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile matmul --batch " << batch << " --m " << m << " --n " << n << " --k " << k
      << (transpose_a ? " --transpose-a" : "") << (transpose_b ? " --transpose-b" : "")
      << (broadcast_a ? " --broadcast-a" : "") << (broadcast_b ? " --broadcast-b" : "")
      << (bias ? " --bias" : "") << " --alpha " << shortest(alpha) << " --beta " << shortest(beta)
      << " --dtype " << to_string(dtype);
  if (activation != MatmulActivation::none) out << " --activation " << to_string(activation);
  out << " --direction " << to_string(direction);
  return out.str();
}

std::string MatmulDesc::key() const {
  std::ostringstream out;
  out << "matmul batch=" << batch << " m=" << m << " n=" << n << " k=" << k << " a"
      << (transpose_a ? "T" : "N") << " b" << (transpose_b ? "T" : "N")
      << (broadcast_a ? " shared_a" : "") << (broadcast_b ? " shared_b" : "")
      << (bias ? " +bias" : "") << " alpha=" << shortest(alpha) << " beta=" << shortest(beta) << ' '
      << to_string(dtype);
  // Left out for none, so that the keys of descs without activation stay what they were.
  if (activation != MatmulActivation::none) out << " act=" << to_string(activation);
  return out.str();
}

std::size_t MatmulDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { detail::hash_mix(h, v); };
  mix(static_cast<std::uint64_t>(batch));
  mix(static_cast<std::uint64_t>(m));
  mix(static_cast<std::uint64_t>(n));
  mix(static_cast<std::uint64_t>(k));
  mix((transpose_a ? 1u : 0u) | (transpose_b ? 2u : 0u) | (broadcast_b ? 4u : 0u) |
      (bias ? 8u : 0u) | (broadcast_a ? 16u : 0u));
  mix(detail::hash_bits(alpha));
  mix(detail::hash_bits(beta));
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(activation));
  return h;
}

std::ostream& operator<<(std::ostream& out, const MatmulDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
