// The reference matrix multiply: one candidate, "reference:direct". Plain loops over the dense
// row-major copies of the inputs (Note [dense copies] in conv.cpp), every sum in f64 and rounded
// once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/matmul_args.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

using Index = std::size_t;

AlgoInfo info_of(const MatmulDesc&, Direction) {
  return direct_info("direct loops (f64 accumulation)", {"direct", "reference"});
}

// Offsets into the dense copies of element (i, l) of op(a), (l, j) of op(b) and (i, j) of dst in
// product p, as functions (p, row, column).
struct Operands {
  const MatmulDesc& d;
  auto a() const {
    return [&d = d](std::int64_t p, std::int64_t i, std::int64_t l) {
      const std::int64_t base = p * d.m * d.k;
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
// the products of a batch sharing b add into one gradient).
template <typename XIndex, typename YIndex, typename OutIndex>
void product(std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t inner,
             double alpha, const std::vector<float>& x, XIndex xi, const std::vector<float>& y,
             YIndex yi, std::vector<double>& out, OutIndex o) {
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
      case Direction::fwd: {  // dst(i, j) = sum_l a(i, l) b(l, j)
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
        store_output(out, d.beta, dst);
        return;
      }
      case Direction::bwd_data: {  // diff_a(i, l) = sum_j diff_dst(i, j) b(l, j)
        const std::vector<float> g = read(args.diff_dst, "diff_dst", d.dst_dims());
        const std::vector<float> b = read(args.b, "b", d.b_dims());
        Tensor& diff_a = host_tensor(args.diff_a, "diff_a", d.a_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.a_dims().product()), 0.0);
        product(d.batch, d.m, d.k, d.n, alpha, g, at.dst(), b, transposed(at.b()), out, at.a());
        store_output(out, d.beta, diff_a);
        return;
      }
      case Direction::bwd_weights: {  // diff_b(l, j) = sum_i a(i, l) diff_dst(i, j)
        const std::vector<float> a = read(args.a, "a", d.a_dims());
        const std::vector<float> g = read(args.diff_dst, "diff_dst", d.dst_dims());
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
      case Direction::fwd_training: break;  // not a matmul direction
    }
    DNNX_ASSERT(false, "unknown direction ", static_cast<int>(direction_));
  }

 private:
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
