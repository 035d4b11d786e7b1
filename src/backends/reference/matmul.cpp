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

// Element (i, l) of op(a) and (l, j) of op(b) in product p, as offsets into the dense copies.
struct Operands {
  const MatmulDesc& d;
  Index a(std::int64_t p, std::int64_t i, std::int64_t l) const {
    const std::int64_t base = p * d.m * d.k;
    return static_cast<Index>(d.transpose_a ? base + l * d.m + i : base + i * d.k + l);
  }
  Index b(std::int64_t p, std::int64_t l, std::int64_t j) const {
    const std::int64_t base = (d.broadcast_b ? 0 : p) * d.k * d.n;
    return static_cast<Index>(d.transpose_b ? base + j * d.k + l : base + l * d.n + j);
  }
  Index dst(std::int64_t p, std::int64_t i, std::int64_t j) const {
    return static_cast<Index>((p * d.m + i) * d.n + j);
  }
};

// out = sums + beta * out's previous contents (not read when beta is 0: it may hold NaN).
void store_output(std::vector<double>& sums, double beta, Tensor& out) {
  if (beta != 0) {
    const std::vector<float> old = out.to_f32();
    for (Index i = 0; i < sums.size(); ++i) sums[i] += beta * old[i];
  }
  store(sums, out);
}

class DirectPlan final : public detail::LayerPlanBase<detail::MatmulArgs> {
 public:
  DirectPlan(const MatmulDesc& desc, Direction direction)
      : LayerPlanBase(info_of(desc, direction),
                      detail::op_context(BackendKind::reference, desc, direction, direct_id)),
        desc_(desc),
        direction_(direction) {}

  void execute(const detail::MatmulArgs& args, detail::Workspace) override {
    const MatmulDesc& d = desc_;
    const Operands at{d};
    const double alpha = d.alpha;
    switch (direction_) {
      case Direction::fwd: {
        const std::vector<float> a = read(args.a, "a", d.a_dims());
        const std::vector<float> b = read(args.b, "b", d.b_dims());
        std::vector<float> bias;
        if (d.bias) bias = read(args.bias, "bias", d.bias_dims());
        Tensor& dst = host_tensor(args.dst, "dst", d.dst_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.dst_dims().product()));
        for (std::int64_t p = 0; p < d.batch; ++p) {
          for (std::int64_t i = 0; i < d.m; ++i) {
            for (std::int64_t j = 0; j < d.n; ++j) {
              double sum = 0;
              for (std::int64_t l = 0; l < d.k; ++l)
                sum += static_cast<double>(a[at.a(p, i, l)]) * b[at.b(p, l, j)];
              out[at.dst(p, i, j)] = alpha * sum;
            }
          }
        }
        if (d.bias) {
          // dst = alpha * op(a) op(b) + beta * dst + bias: the bias is added after beta's term,
          // in f64, so the one rounding stays the last step.
          if (d.beta != 0) {
            const std::vector<float> old = dst.to_f32();
            for (Index i = 0; i < out.size(); ++i) out[i] += d.beta * static_cast<double>(old[i]);
          }
          for (Index i = 0; i < out.size(); ++i) out[i] += bias[i % static_cast<Index>(d.n)];
          store(out, dst);
        } else {
          store_output(out, d.beta, dst);
        }
        return;
      }
      case Direction::bwd_data: {
        const std::vector<float> g = read(args.diff_dst, "diff_dst", d.dst_dims());
        const std::vector<float> b = read(args.b, "b", d.b_dims());
        Tensor& diff_a = host_tensor(args.diff_a, "diff_a", d.a_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.a_dims().product()));
        for (std::int64_t p = 0; p < d.batch; ++p) {
          for (std::int64_t i = 0; i < d.m; ++i) {
            for (std::int64_t l = 0; l < d.k; ++l) {
              double sum = 0;
              for (std::int64_t j = 0; j < d.n; ++j)
                sum += static_cast<double>(g[at.dst(p, i, j)]) * b[at.b(p, l, j)];
              out[at.a(p, i, l)] = alpha * sum;
            }
          }
        }
        store_output(out, d.beta, diff_a);
        return;
      }
      case Direction::bwd_weights: {
        const std::vector<float> a = read(args.a, "a", d.a_dims());
        const std::vector<float> g = read(args.diff_dst, "diff_dst", d.dst_dims());
        Tensor& diff_b = host_tensor(args.diff_b, "diff_b", d.b_dims(), d.dtype, context_);
        std::vector<double> out(static_cast<Index>(d.b_dims().product()), 0.0);
        for (std::int64_t p = 0; p < d.batch; ++p) {
          for (std::int64_t l = 0; l < d.k; ++l) {
            for (std::int64_t j = 0; j < d.n; ++j) {
              double sum = 0;
              for (std::int64_t i = 0; i < d.m; ++i)
                sum += static_cast<double>(a[at.a(p, i, l)]) * g[at.dst(p, i, j)];
              out[at.b(p, l, j)] += alpha * sum;  // += : a shared b sums over the batch
            }
          }
        }
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

  MatmulDesc desc_;
  Direction direction_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::matmul>> make_matmul_backend(
    const detail::OpBackends&) {
  return DirectBackend<MatmulDesc, detail::MatmulArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
