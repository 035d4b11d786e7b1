// The reference matrix multiply: one candidate, "reference:direct". Plain loops over the dense
// row-major copies of the inputs (Note [dense copies] in conv.cpp), every sum in f64 and rounded
// once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/dropout_args.hpp"
#include "core/matmul_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

using Index = std::size_t;

AlgoInfo info_of(const MatmulDesc& desc, Direction direction) {
  AlgoInfo info = direct_info("direct loops (f64 accumulation)", {"direct", "reference"});
  if (desc.activation == MatmulActivation::none) {
    if (direction == Direction::fwd_training) {
      info.supported = false;
      info.reason = "fwd_training keeps an activation's state; the desc has activation none";
    }
    return info;
  }
  // Note [matmul aux]: the training forward writes the state, the backward passes read it.
  if (direction != Direction::fwd) info.saved_state_format = detail::matmul_aux_format(desc);
  if (direction == Direction::fwd_training) info.saved_state_bytes = detail::matmul_aux_bytes(desc);
  return info;
}

// The activation and its derivative in f64.
double activate(MatmulActivation activation, double x) {
  switch (activation) {
    case MatmulActivation::relu: return std::isnan(x) ? x : (x > 0 ? x : 0.0);
    case MatmulActivation::gelu_tanh: return detail::gelu_tanh(x);
    case MatmulActivation::none: break;
  }
  return x;
}

// The state's bytes (Note [matmul aux]), checked against what the desc needs.
std::byte* aux_of(const MatmulDesc& desc, const SavedState* state, const ErrorContext& context) {
  const std::string problem = detail::mask_state_problem(
      state, detail::matmul_aux_format(desc), detail::matmul_aux_bytes(desc), Device::cpu());
  if (!problem.empty()) throw Error(ErrorKind::InvalidArgument, problem, context);
  return static_cast<std::byte*>(state->data());
}

// act'(pre) for every element of dst, read from the state.
std::vector<double> derivatives(const MatmulDesc& desc, const SavedState* state,
                                const ErrorContext& context) {
  const std::byte* aux = aux_of(desc, state, context);
  const Index count = static_cast<Index>(desc.dst_dims().product());
  std::vector<double> out(count);
  if (desc.activation == MatmulActivation::relu) {
    const auto* words = reinterpret_cast<const std::uint32_t*>(aux);
    for (Index i = 0; i < count; ++i) out[i] = (words[i / 32] >> (i % 32)) & 1u ? 1.0 : 0.0;
    return out;
  }
  const Tensor pre = Tensor::view(const_cast<std::byte*>(aux), desc.dst_dims(), desc.dtype,
                                  Layout::channels_first, Device::cpu());
  const std::vector<float> values = pre.to_f32();
  for (Index i = 0; i < count; ++i) out[i] = detail::gelu_tanh_grad(static_cast<double>(values[i]));
  return out;
}

// diff_dst * act'(pre) in f64 (diff_dst itself without an activation).
std::vector<double> through_activation(const MatmulDesc& desc, const std::vector<float>& diff_dst,
                                       const SavedState* state, const ErrorContext& context) {
  std::vector<double> out(diff_dst.begin(), diff_dst.end());
  if (desc.activation == MatmulActivation::none) return out;
  const std::vector<double> slope = derivatives(desc, state, context);
  for (Index i = 0; i < out.size(); ++i) out[i] *= slope[i];
  return out;
}

// Offsets into the dense copies of element (i, l) of op(a), (l, j) of op(b) and (i, j) of dst in
// product p, as functions (p, row, column).
struct Operands {
  const MatmulDesc& d;
  auto a() const {
    return [&d = d](std::int64_t p, std::int64_t i, std::int64_t l) {
      const std::int64_t base = (d.broadcast_a ? 0 : p) * d.m * d.k;
      return static_cast<Index>(d.transpose_a ? base + l * d.m + i : base + i * d.k + l);
    };
  }
  auto b() const {
    return [&d = d](std::int64_t p, std::int64_t l, std::int64_t j) {
      const std::int64_t base = (d.broadcast_b ? 0 : p) * d.k * d.n;
      return static_cast<Index>(d.transpose_b ? base + j * d.k + l : base + l * d.n + j);
    };
  }
  auto dst() const {
    return [&d = d](std::int64_t p, std::int64_t i, std::int64_t j) {
      return static_cast<Index>((p * d.m + i) * d.n + j);
    };
  }
};

// The offsets of the transposed operand: (p, r, c) of the result is (p, c, r) of `index`.
template <typename Offsets>
auto transposed(Offsets index) {
  return [index](std::int64_t p, std::int64_t r, std::int64_t c) { return index(p, c, r); };
}

// out = sums + beta * out's previous contents (not read when beta is 0: it may hold NaN).
void store_output(std::vector<double>& sums, double beta, Tensor& out) {
  if (beta != 0) {
    const std::vector<float> old = out.to_f32();
    for (Index i = 0; i < sums.size(); ++i) sums[i] += beta * old[i];
  }
  store(sums, out);
}

// out[o(p, r, c)] += alpha * sum over t of x[xi(p, r, t)] * y[yi(p, t, c)], for every product p,
// row r, column c, with t < inner: each direction is this product on its operands' offsets (+=:
// the products of a batch sharing a or b add into its one gradient).
template <typename X, typename Y, typename XIndex, typename YIndex, typename OutIndex>
void product(std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t inner,
             double alpha, const std::vector<X>& x, XIndex xi, const std::vector<Y>& y, YIndex yi,
             std::vector<double>& out, OutIndex o) {
  for (std::int64_t p = 0; p < batch; ++p) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        double sum = 0;
        for (std::int64_t t = 0; t < inner; ++t)
          sum += static_cast<double>(x[xi(p, r, t)]) * y[yi(p, t, c)];
        out[o(p, r, c)] += alpha * sum;
      }
    }
  }
}

class DirectPlan final : public DirectPlanBase<MatmulDesc, detail::MatmulArgs> {
 public:
  DirectPlan(const MatmulDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::MatmulArgs& args, detail::Workspace) override {
    const MatmulDesc& d = desc_;
    const Operands at{d};
    const double alpha = d.alpha;
    switch (direction_) {
      case Direction::fwd:
      case Direction::fwd_training: {  // dst(i, j) = act(sum_l a(i, l) b(l, j) + ...)
        const std::vector<float> a = read(args.a, "a", d.a_dims());
        const std::vector<float> b = read(args.b, "b", d.b_dims());
        Tensor& dst = host_tensor(args.dst, "dst", d.dst_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.dst_dims().product()), 0.0);
        product(d.batch, d.m, d.n, d.k, alpha, a, at.a(), b, at.b(), out, at.dst());
        if (d.bias) {
          // In f64 with the rest, so that the one rounding stays the last step.
          const std::vector<float> bias = read(args.bias, "bias", d.bias_dims());
          for (Index i = 0; i < out.size(); ++i) out[i] += bias[i % static_cast<Index>(d.n)];
        }
        if (d.activation == MatmulActivation::none) {
          store_output(out, d.beta, dst);
          return;
        }
        if (d.beta != 0) {
          const std::vector<float> old = dst.to_f32();
          for (Index i = 0; i < out.size(); ++i) out[i] += d.beta * old[i];
        }
        if (direction_ == Direction::fwd_training) keep(out, args.state);
        for (double& value : out) value = activate(d.activation, value);
        store(out, dst);
        return;
      }
      case Direction::bwd_data: {  // diff_a(i, l) = sum_j diff_dst(i, j) b(l, j)
        const std::vector<double> g = through_activation(
            d, read(args.diff_dst, "diff_dst", d.dst_dims()), args.state, context_);
        const std::vector<float> b = read(args.b, "b", d.b_dims());
        Tensor& diff_a = host_tensor(args.diff_a, "diff_a", d.a_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.a_dims().product()), 0.0);
        product(d.batch, d.m, d.k, d.n, alpha, g, at.dst(), b, transposed(at.b()), out, at.a());
        store_output(out, d.beta, diff_a);
        return;
      }
      case Direction::bwd_weights: {  // diff_b(l, j) = sum_i a(i, l) diff_dst(i, j)
        const std::vector<float> a = read(args.a, "a", d.a_dims());
        const std::vector<double> g = through_activation(
            d, read(args.diff_dst, "diff_dst", d.dst_dims()), args.state, context_);
        Tensor& diff_b = host_tensor(args.diff_b, "diff_b", d.b_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.b_dims().product()), 0.0);
        product(d.batch, d.k, d.n, d.m, alpha, a, transposed(at.a()), g, at.dst(), out, at.b());
        store_output(out, d.beta, diff_b);
        if (d.bias) {
          Tensor& diff_bias =
              host_tensor(args.diff_bias, "diff_bias", d.bias_dims(), d.dtype, context_);
          std::vector<double> sums(static_cast<Index>(d.n), 0.0);
          for (Index i = 0; i < g.size(); ++i) sums[i % static_cast<Index>(d.n)] += g[i];
          store_output(sums, d.beta, diff_bias);
        }
        return;
      }
    }
    DNNX_ASSERT(false, "unknown direction ", static_cast<int>(direction_));
  }

 private:
  // Note [matmul aux]: the state of pre (f64, before the activation).
  void keep(const std::vector<double>& pre, SavedState* state) const {
    std::byte* aux = aux_of(desc_, state, context_);
    if (desc_.activation == MatmulActivation::relu) {
      auto* words = reinterpret_cast<std::uint32_t*>(aux);
      std::fill(words, words + detail::matmul_aux_bytes(desc_) / 4, 0u);
      for (Index i = 0; i < pre.size(); ++i) {
        if (pre[i] > 0) words[i / 32] |= 1u << (i % 32);
      }
      return;
    }
    Tensor values =
        Tensor::view(aux, desc_.dst_dims(), desc_.dtype, Layout::channels_first, Device::cpu());
    store(pre, values);
  }

  std::vector<float> read(const Tensor* tensor, const char* role, const Dims& dims) const {
    return host_tensor(tensor, role, dims, desc_.dtype, context_).to_f32();
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::matmul>> make_matmul_backend(
    const detail::OpBackends&) {
  return DirectBackend<MatmulDesc, detail::MatmulArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
