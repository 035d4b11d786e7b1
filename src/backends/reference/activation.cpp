// The reference activations: one candidate, "reference:direct", every element in f64 and rounded
// once to the storage dtype (Note [rounding once] in conv.cpp). The oracle of the other backends.
//
// The backward pass computes the derivative from src whenever desc.saved keeps it, the exact
// answer; from dst only when dst is all there is (Note [backward from dst] in activation_desc.cpp),
// where it is as exact as the dst it is given.

#include "backends/reference/layers.hpp"
#include "core/activation_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace dnnx::reference {
namespace {

constexpr const char* direct_id = "reference:direct";

ErrorContext context_of(const ActivationDesc& desc, Direction direction, std::string id = {}) {
  ErrorContext context;
  context.op = detail::cat("act ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "reference";
  context.implementation = std::move(id);
  return context;
}

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

AlgoInfo direct_info(const ActivationDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = direct_id;
  info.name = "direct loop (f64)";
  info.reason = direction == Direction::fwd ? std::string() : bwd_reason(desc);
  info.supported = info.reason.empty();
  info.deterministic = true;
  info.notes = {"reference"};
  info.families = {"none"};
  return info;
}

// f64 -> f32 rounded to odd: with the final f32 -> f16/bf16 rounding to nearest even, the f64 value
// is rounded once (Note [rounding once] in conv.cpp).
float round_to_odd(double value) {
  const auto nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || std::isnan(value)) return nearest;
  float truncated = nearest;
  if (std::abs(static_cast<double>(nearest)) > std::abs(value))
    truncated = std::nextafter(nearest, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(truncated) | 1u);
}

void store(Tensor& tensor, const std::vector<double>& values) {
  std::vector<float> narrowed(values.size());
  const bool f32 = tensor.dtype() == DType::f32;
  for (std::size_t i = 0; i < values.size(); ++i)
    narrowed[i] = f32 ? static_cast<float>(values[i]) : round_to_odd(values[i]);
  tensor.copy_from_f32(narrowed);
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

template <typename T>
T& need(T* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->is_null())
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return *tensor;
}

class DirectPlan final : public detail::OpPlan<detail::ActivationArgs> {
 public:
  DirectPlan(const ActivationDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        info_(direct_info(desc, direction)),
        context_(context_of(desc, direction, direct_id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ActivationArgs& args, detail::Workspace) override {
    if (direction_ == Direction::fwd) {
      // Every input is read before any output is written: in place is harmless.
      const std::vector<float> src = need(args.src, "src", context_).to_f32();
      std::vector<double> dst(src.size());
      for (std::size_t i = 0; i < src.size(); ++i) dst[i] = forward(desc_, src[i]);
      store(need(args.dst, "dst", context_), dst);
      return;
    }
    const std::vector<float> diff_dst = need(args.diff_dst, "diff_dst", context_).to_f32();
    std::vector<double> diff_src(diff_dst.size());
    if (desc_.saved != ActivationSaved::dst) {
      const std::vector<float> src = need(args.src, "src", context_).to_f32();
      for (std::size_t i = 0; i < src.size(); ++i)
        diff_src[i] = diff_dst[i] * derivative_from_src(desc_, src[i]);
    } else {
      const std::vector<float> dst = need(args.saved_dst, "dst", context_).to_f32();
      for (std::size_t i = 0; i < dst.size(); ++i)
        diff_src[i] = diff_dst[i] * derivative_from_dst(desc_, dst[i]);
    }
    store(need(args.diff_src, "diff_src", context_), diff_src);
  }

 private:
  ActivationDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
};

class ReferenceActivation final : public detail::ActivationBackend {
 public:
  std::vector<AlgoInfo> list(const ActivationDesc& desc, Direction direction) override {
    desc.validate();
    return {direct_info(desc, direction)};
  }

  std::shared_ptr<detail::OpPlan<detail::ActivationArgs>> plan(const ActivationDesc& desc,
                                                               Direction direction,
                                                               const std::string& id) override {
    desc.validate();
    if (id != direct_id) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("algorithm id '", id,
                                "' is not a reference candidate; valid ids: ", direct_id),
                    context_of(desc, direction, id));
    }
    const AlgoInfo info = direct_info(desc, direction);
    if (!info.supported)
      detail::raise(ErrorKind::Unsupported, info.reason, context_of(desc, direction, id));
    return plans_.get_or_build(desc, direction, id,
                               [&] { return std::make_shared<DirectPlan>(desc, direction); });
  }

 private:
  detail::PlanCache<ActivationDesc, detail::ActivationArgs> plans_;
};

}  // namespace

std::unique_ptr<detail::ActivationBackend> make_activation_backend() {
  return std::make_unique<ReferenceActivation>();
}

}  // namespace dnnx::reference
