// The reference activations: one candidate, "reference:direct", every element in f64 and rounded
// once to the storage dtype (Note [rounding once] in conv.cpp). The oracle of the other backends.
//
// The backward pass computes the derivative from src whenever desc.saved keeps it, the exact
// answer; from dst only when dst is all there is (Note [backward from dst] in activation_desc.cpp),
// where it is as exact as the dst it is given.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/activation_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {


// Why backward cannot run with what desc.saved keeps; empty when it can.
std::string bwd_reason(const ActivationDesc& desc) {
  if (desc.bwd_computable()) return {};
  if (desc.kind == ActivationKind::elu) {
    return detail::cat("elu backward with alpha ", desc.alpha,
                       " < 0 needs src (dst does not tell the branches apart), and desc.saved = ",
                       to_string(desc.saved));
  }
  return detail::cat(to_string(desc.kind),
                     " backward needs src, and desc.saved = ", to_string(desc.saved));
}

AlgoInfo info_of(const ActivationDesc& desc, Direction direction) {
  AlgoInfo info = direct_info("direct loop (f64)", {"reference"});
  info.reason = direction == Direction::fwd ? std::string() : bwd_reason(desc);
  info.supported = info.reason.empty();
  return info;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The comparisons are written so that NaN propagates, as in PyTorch.
double forward(const ActivationDesc& desc, double x) {
  switch (desc.kind) {
    case ActivationKind::identity: return x;
    case ActivationKind::relu: return x < 0 ? 0.0 : x;
    case ActivationKind::clipped_relu: return x < 0 ? 0.0 : (x > desc.ceiling ? desc.ceiling : x);
    case ActivationKind::tanh: return std::tanh(x);
    case ActivationKind::sigmoid: return sigmoid(x);
    case ActivationKind::elu: return x > 0 ? x : desc.alpha * std::expm1(x);
    case ActivationKind::swish: return x * sigmoid(x);
  }
  return x;
}

// f'(x): PyTorch's choices at the kinks (relu' = 0 at 0, hardtanh' = 0 at 0 and at the ceiling,
// elu' = alpha at 0).
double derivative_from_src(const ActivationDesc& desc, double x) {
  switch (desc.kind) {
    case ActivationKind::identity: return 1.0;
    case ActivationKind::relu: return x > 0 ? 1.0 : 0.0;
    case ActivationKind::clipped_relu: return x > 0 && x < desc.ceiling ? 1.0 : 0.0;
    case ActivationKind::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case ActivationKind::sigmoid: {
      const double s = sigmoid(x);
      return s * (1.0 - s);
    }
    case ActivationKind::elu: return x > 0 ? 1.0 : desc.alpha * std::exp(x);
    case ActivationKind::swish: {
      const double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
  }
  return 1.0;
}

// f'(x) as a function of y = f(x) (Note [backward from dst]); only for kinds that allow it.
double derivative_from_dst(const ActivationDesc& desc, double y) {
  switch (desc.kind) {
    case ActivationKind::identity: return 1.0;
    case ActivationKind::relu: return y > 0 ? 1.0 : 0.0;
    case ActivationKind::clipped_relu: return y > 0 && y < desc.ceiling ? 1.0 : 0.0;
    case ActivationKind::tanh: return 1.0 - y * y;
    case ActivationKind::sigmoid: return y * (1.0 - y);
    case ActivationKind::elu: return y > 0 ? 1.0 : y + desc.alpha;
    case ActivationKind::swish: break;
  }
  detail::raise(ErrorKind::Internal,
                detail::cat(to_string(desc.kind), " has no derivative as a function of dst"));
}

class DirectPlan final : public DirectPlanBase<ActivationDesc, detail::ActivationArgs> {
 public:
  DirectPlan(const ActivationDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::ActivationArgs& args, detail::Workspace) override {
    if (direction_ == Direction::fwd) {
      // Every input is read before any output is written: in place is harmless.
      const std::vector<float> src = tensor(args.src, "src").to_f32();
      std::vector<double> dst(src.size());
      for (std::size_t i = 0; i < src.size(); ++i) dst[i] = forward(desc_, src[i]);
      store(dst, tensor(args.dst, "dst"));
      return;
    }
    const std::vector<float> diff_dst = tensor(args.diff_dst, "diff_dst").to_f32();
    std::vector<double> diff_src(diff_dst.size());
    if (desc_.saved != ActivationSaved::dst) {
      const std::vector<float> src = tensor(args.src, "src").to_f32();
      for (std::size_t i = 0; i < src.size(); ++i)
        diff_src[i] = diff_dst[i] * derivative_from_src(desc_, src[i]);
    } else {
      const std::vector<float> dst = tensor(args.saved_dst, "dst").to_f32();
      for (std::size_t i = 0; i < dst.size(); ++i)
        diff_src[i] = diff_dst[i] * derivative_from_dst(desc_, dst[i]);
    }
    store(diff_src, tensor(args.diff_src, "diff_src"));
  }

 private:
  // Every tensor of an activation has the desc's dims and dtype.
  template <typename T>
  T& tensor(T* t, const char* role) const {
    return host_tensor(t, role, desc_.dims, desc_.dtype, context_);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::activation>> make_activation_backend(const detail::OpBackends&) {
  return DirectBackend<ActivationDesc, detail::ActivationArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
