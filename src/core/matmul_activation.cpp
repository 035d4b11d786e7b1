// Note [matmul activation candidates] (matmul_activation.hpp).

#include "core/matmul_activation.hpp"

#include "core/check.hpp"
#include "core/dropout_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::detail {
namespace {

using Inner = OpBackend<MatmulDesc, MatmulArgs>;
using Plan = OpPlan<MatmulArgs>;

constexpr std::size_t workspace_alignment = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

enum class Kind { fused, mask, act, dact, dact_bias };

constexpr std::string_view mask_suffix = "+mask";
constexpr std::string_view act_suffix = "+act";
constexpr std::string_view dact_suffix = "+dact";
constexpr std::string_view dact_bias_suffix = "+dact_bgrad";

MatmulDesc without_activation(const MatmulDesc& desc) {
  MatmulDesc base = desc;
  base.activation = MatmulActivation::none;
  return base;
}

// The desc of a +dact_bgrad candidate's GEMM: no activation, no bias (the pass sums the bias).
MatmulDesc without_activation_or_bias(const MatmulDesc& desc) {
  MatmulDesc base = without_activation(desc);
  base.bias = false;
  return base;
}

bool is_backward(Direction direction) {
  return direction == Direction::bwd_data || direction == Direction::bwd_weights;
}

// Bytes of diff_pre at the start of a +dact candidate's workspace.
std::size_t diff_pre_bytes(const MatmulDesc& desc) {
  return aligned(static_cast<std::size_t>(desc.dst_dims().product()) * size_of(desc.dtype));
}

// What a wrapped candidate runs: its kind and the inner candidate's id.
struct Parsed {
  Kind kind = Kind::fused;
  std::string inner;
};

Parsed parse(const std::string& id) {
  for (const auto& [suffix, kind] :
       {std::pair{mask_suffix, Kind::mask}, std::pair{act_suffix, Kind::act},
        std::pair{dact_suffix, Kind::dact}, std::pair{dact_bias_suffix, Kind::dact_bias}}) {
    if (id.size() > suffix.size() && id.ends_with(suffix))
      return {kind, id.substr(0, id.size() - suffix.size())};
  }
  return {Kind::fused, id};
}

// The state's buffer for `desc`, checked (a caller below the op layer may pass any state).
void* aux_of(const MatmulDesc& desc, const SavedState* state, Device device,
             const ErrorContext& context) {
  const std::string problem =
      mask_state_problem(state, matmul_aux_format(desc), matmul_aux_bytes(desc), device);
  if (!problem.empty()) raise(ErrorKind::InvalidArgument, problem, context);
  return state->data();
}

void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    raise(ErrorKind::InvalidArgument, cat(role, " is missing (null)"), context);
  return const_cast<void*>(tensor->data());
}

// Note [gelu state first]
// A +act candidate of fwd_training with gelu keeps pre, dst's values before the activation, as its
// state. Running the GEMM into dst and then a pass that reads dst and writes both the state and
// act(dst) moves three dst-sized tensors through memory after the GEMM; with beta 0 (the GEMM
// does not read dst) the GEMM writes pre into the state directly and the pass reads it and writes
// dst: two, as PyTorch's addmm then gelu. On an H200, f32 8192 x 1024 -> 4096: 1.54 ms the first
// way, against 1.456 ms for the fwd candidate (GEMM, then the pass in place) that the second way
// matches (docs/benchmarks.md, "GPU matmul"). With beta != 0 the GEMM reads the old dst, so the
// first way stays.

// A candidate of Note [matmul activation candidates] other than a fused one: an inner plan and
// the backend's pass before or after it.
class WrappedPlan final : public Plan {
 public:
  WrappedPlan(AlgoInfo info, Kind kind, const MatmulDesc& desc, Direction direction,
              std::shared_ptr<Plan> inner, std::shared_ptr<MatmulActivationPasses> passes,
              ErrorContext context, std::size_t bias_scratch = 0)
      : info_(std::move(info)),
        kind_(kind),
        bias_scratch_(bias_scratch),
        desc_(desc),
        direction_(direction),
        inner_(std::move(inner)),
        passes_(std::move(passes)),
        context_(std::move(context)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const MatmulArgs& args, Workspace workspace) override {
    check_workspace_bytes(workspace.bytes, workspace.data, info_.workspace_bytes, context_);
    MatmulArgs inner = args;
    inner.state = nullptr;
    if (kind_ == Kind::dact || kind_ == Kind::dact_bias) {
      const void* aux = aux_of(desc_, args.state, passes_->device(), context_);
      const void* diff_dst = data_of(args.diff_dst, "diff_dst", context_);
      std::size_t offset = diff_pre_bytes(desc_);
      if (kind_ == Kind::dact_bias) {
        // Note [matmul activation candidates]: diff_pre, the pass's scratch, the GEMM's workspace.
        void* scratch =
            bias_scratch_ > 0 ? static_cast<std::byte*>(workspace.data) + offset : nullptr;
        passes_->backward_bias(desc_, diff_dst, aux, workspace.data,
                               data_of(args.diff_bias, "diff_bias", context_), scratch, context_);
        offset += aligned(bias_scratch_);
        inner.diff_bias = nullptr;
      } else {
        passes_->backward(desc_, diff_dst, aux, workspace.data, context_);
      }
      const Tensor diff_pre = Tensor::view(workspace.data, desc_.dst_dims(), desc_.dtype,
                                           Layout::channels_first, passes_->device());
      inner.diff_dst = &diff_pre;
      inner_->execute(inner,
                      {static_cast<std::byte*>(workspace.data) + offset, workspace.bytes - offset});
      return;
    }
    void* aux = direction_ == Direction::fwd_training
                    ? aux_of(desc_, args.state, passes_->device(), context_)
                    : nullptr;
    if (aux != nullptr && desc_.activation == MatmulActivation::gelu_tanh && desc_.beta == 0.0f) {
      // Note [gelu state first]
      Tensor pre = Tensor::view(aux, desc_.dst_dims(), desc_.dtype, Layout::channels_first,
                                passes_->device());
      inner.dst = &pre;
      inner_->execute(inner, workspace);
      passes_->forward_from_pre(desc_, aux, data_of(args.dst, "dst", context_), context_);
      return;
    }
    inner_->execute(inner, workspace);
    passes_->forward(desc_, data_of(args.dst, "dst", context_), aux, context_);
  }

 private:
  AlgoInfo info_;
  Kind kind_;
  std::size_t bias_scratch_;  // dact_bias: the pass's scratch bytes
  MatmulDesc desc_;
  Direction direction_;
  std::shared_ptr<Plan> inner_;
  std::shared_ptr<MatmulActivationPasses> passes_;
  ErrorContext context_;
};

class ActivationBackend final : public Inner {
 public:
  ActivationBackend(BackendKind backend, std::string prefix, std::unique_ptr<Inner> inner,
                    std::shared_ptr<MatmulActivationPasses> passes)
      : backend_(backend),
        prefix_(std::move(prefix)),
        inner_(std::move(inner)),
        passes_(std::move(passes)) {}

  std::vector<AlgoInfo> list(const MatmulDesc& desc, Direction direction) override {
    if (desc.activation == MatmulActivation::none) {
      if (direction != Direction::fwd_training) return inner_->list(desc, direction);
      op_info(OpKind::matmul).check(direction);
      desc.validate();
      AlgoInfo info;
      info.id = prefix_ + ":no_activation";
      info.name = "training forward without an activation";
      info.reason = "fwd_training keeps an activation's state; the desc has activation none";
      return {std::move(info)};
    }
    std::vector<AlgoInfo> out;
    if (!is_backward(direction)) {
      for (AlgoInfo info : inner_->list(desc, direction)) {
        if (std::find(info.notes.begin(), info.notes.end(), "fused_activation") == info.notes.end())
          info.notes.emplace_back("fused_activation");
        out.push_back(std::move(info));
      }
    }
    if (direction == Direction::fwd_training && desc.activation == MatmulActivation::relu) {
      for (AlgoInfo info : inner_->list(desc, Direction::fwd))
        out.push_back(wrapped(desc, direction, std::move(info), Kind::mask));
    }
    if (direction == Direction::bwd_weights && desc.bias) {
      if (const std::optional<std::size_t> scratch = passes_->backward_bias_scratch(desc)) {
        for (AlgoInfo info : inner_->list(without_activation_or_bias(desc), direction))
          out.push_back(wrapped(desc, direction, std::move(info), Kind::dact_bias, *scratch));
      }
    }
    const Direction base_direction = is_backward(direction) ? direction : Direction::fwd;
    const Kind kind = is_backward(direction) ? Kind::dact : Kind::act;
    for (AlgoInfo info : inner_->list(without_activation(desc), base_direction))
      out.push_back(wrapped(desc, direction, std::move(info), kind));
    std::stable_partition(out.begin(), out.end(), [](const AlgoInfo& a) { return a.supported; });
    for (std::size_t i = 0; i < out.size(); ++i) out[i].priority = static_cast<int>(i);
    return out;
  }

  // Without an activation everything is the inner backend's (its plans built ahead, its probes,
  // its descriptions of one id).
  std::optional<AlgoInfo> describe_candidate(const MatmulDesc& desc, Direction direction,
                                             const std::string& id) override {
    if (desc.activation == MatmulActivation::none && direction != Direction::fwd_training)
      return inner_->describe_candidate(desc, direction, id);
    return Inner::describe_candidate(desc, direction, id);
  }
  void prepare(const MatmulDesc& desc, Direction direction, const std::vector<std::string>& ids,
               std::chrono::steady_clock::time_point search_start) override {
    if (desc.activation == MatmulActivation::none)
      inner_->prepare(desc, direction, ids, search_start);
  }
  std::shared_ptr<Plan> probe_plan(const MatmulDesc& desc, Direction direction,
                                   const std::string& id) override {
    if (desc.activation == MatmulActivation::none) return inner_->probe_plan(desc, direction, id);
    return Inner::probe_plan(desc, direction, id);
  }
  void prepare_probes(const MatmulDesc& desc, Direction direction,
                      const std::vector<std::string>& ids) override {
    if (desc.activation == MatmulActivation::none) inner_->prepare_probes(desc, direction, ids);
  }

  std::shared_ptr<Plan> plan(const MatmulDesc& desc, Direction direction,
                             const std::string& id) override {
    if (desc.activation == MatmulActivation::none && direction != Direction::fwd_training)
      return inner_->plan(desc, direction, id);
    return plans_.get_or_build(desc, direction, id, [&]() -> std::shared_ptr<Plan> {
      const ErrorContext context = op_context(backend_, desc, direction, id);
      const std::vector<AlgoInfo> listed = list(desc, direction);
      const auto found = std::find_if(listed.begin(), listed.end(),
                                      [&](const AlgoInfo& info) { return info.id == id; });
      if (found == listed.end()) {
        std::string valid;
        for (const AlgoInfo& info : listed) {
          if (info.supported) valid += (valid.empty() ? "" : ", ") + info.id;
        }
        raise(ErrorKind::InvalidArgument,
              cat("algorithm id '", id, "' is not a candidate for this matmul ",
                  to_string(direction), "; valid ids: ", valid.empty() ? "(none)" : valid),
              context);
      }
      if (!found->supported) raise(ErrorKind::Unsupported, found->reason, context);
      const Parsed parsed = parse(id);
      if (parsed.kind == Kind::fused) return inner_->plan(desc, direction, id);
      std::shared_ptr<Plan> inner;
      std::size_t bias_scratch = 0;
      if (parsed.kind == Kind::mask) {
        inner = inner_->plan(desc, Direction::fwd, parsed.inner);
      } else if (parsed.kind == Kind::dact_bias) {
        inner = inner_->plan(without_activation_or_bias(desc), direction, parsed.inner);
        bias_scratch = passes_->backward_bias_scratch(desc).value_or(0);
      } else {
        inner = inner_->plan(without_activation(desc),
                             is_backward(direction) ? direction : Direction::fwd, parsed.inner);
      }
      return std::make_shared<WrappedPlan>(*found, parsed.kind, desc, direction, std::move(inner),
                                           passes_, context, bias_scratch);
    });
  }

 private:
  // The record of an inner candidate wrapped as `kind` for (desc, direction).
  AlgoInfo wrapped(const MatmulDesc& desc, Direction direction, AlgoInfo info, Kind kind,
                   std::size_t bias_scratch = 0) const {
    const std::string act(to_string(desc.activation));
    switch (kind) {
      case Kind::mask:
        info.id += mask_suffix;
        info.name = cat(info.name, ", then the relu mask from dst (", passes_->name(), ")");
        info.notes.emplace_back("fused_activation");
        info.notes.emplace_back("mask_pass");
        break;
      case Kind::act:
        info.id += act_suffix;
        info.name = cat(info.name, ", then ", act, " (", passes_->name(), ")");
        info.notes.emplace_back("activation_pass");
        break;
      case Kind::dact:
        info.id += dact_suffix;
        info.name = cat(act, " derivative (", passes_->name(), "), then ", info.name);
        info.notes.emplace_back("activation_pass");
        info.workspace_bytes += diff_pre_bytes(desc);
        break;
      case Kind::dact_bias:
        info.id += dact_bias_suffix;
        info.name =
            cat(act, " derivative and bias gradient (", passes_->name(), "), then ", info.name);
        info.notes.emplace_back("activation_pass");
        info.notes.emplace_back("bias_gradient_pass");
        info.workspace_bytes += diff_pre_bytes(desc) + aligned(bias_scratch);
        break;
      case Kind::fused: break;
    }
    if (direction != Direction::fwd) info.saved_state_format = matmul_aux_format(desc);
    if (direction == Direction::fwd_training) info.saved_state_bytes = matmul_aux_bytes(desc);
    return info;
  }

  BackendKind backend_;
  std::string prefix_;
  std::unique_ptr<Inner> inner_;
  std::shared_ptr<MatmulActivationPasses> passes_;
  PlanCache<MatmulDesc, MatmulArgs> plans_;
};

}  // namespace

void MatmulActivationPasses::backward_bias(const MatmulDesc&, const void*, const void*, void*,
                                           void*, void*, const ErrorContext& context) {
  raise(ErrorKind::Unsupported, cat(name(), " has no pass that also sums the bias gradient"),
        context);
}

std::unique_ptr<OpBackend<MatmulDesc, MatmulArgs>> with_activation_passes(
    BackendKind backend, std::string prefix,
    std::unique_ptr<OpBackend<MatmulDesc, MatmulArgs>> inner,
    std::shared_ptr<MatmulActivationPasses> passes) {
  return std::make_unique<ActivationBackend>(backend, std::move(prefix), std::move(inner),
                                             std::move(passes));
}

}  // namespace dnnx::detail
