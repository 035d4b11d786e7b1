// The cpu backend's activations: oneDNN's eltwise primitive, every implementation of every
// algorithm that computes the desc's kind, as candidates; plans bind the caller's memory.
//
// Note [eltwise candidates]
// Each kind maps to oneDNN algorithms (alpha and beta are oneDNN's parameters):
//   identity      linear (1, 0)
//   relu          relu (0); backward also relu_use_dst_for_bwd
//   clipped_relu  clip_v2 (0, ceiling), clip (0, ceiling); backward also clip_v2_use_dst_for_bwd
//   tanh          tanh; backward also tanh_use_dst_for_bwd
//   sigmoid       logistic; backward also logistic_use_dst_for_bwd
//   elu           elu (alpha); backward also elu_use_dst_for_bwd
//   swish         swish (1)
// and each algorithm's implementations (next_impl, oneDNN's order) are candidates with ids
// "onednn:<impl>:<algorithm>". Forward lists only the algorithms that differ in forward (the
// use_dst ones compute the same forward as their plain twin). Backward lists the use_dst
// algorithms first: they read dst, which in-place layers keep, and need no transcendental; the
// plain ones read src. Each is unsupported when desc.saved lacks the tensor it reads; the plain
// linear (identity) reads neither. clip's backward passes the gradient at x == ceiling, where
// PyTorch's hardtanh (and dnnx) gives 0: it is listed unsupported for backward, clip_v2 is the
// exact one. elu_use_dst_for_bwd needs alpha >= 0 (Note [backward from dst]). ref:any
// implementations come after every other, as in conv (Note [candidate order]); an algorithm with no
// implementation at all is one unsupported "onednn:unavailable:<algorithm>" candidate carrying
// oneDNN's message. oneDNN's eltwise runs in place (dst = src, diff_src = diff_dst) in every
// implementation; its CPU kernels split work statically, so every candidate is deterministic
// (Note [determinism] in conv_list.cpp), which the parity test checks bitwise.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/activation_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using dnnl::algorithm;

ErrorContext context_of(const ActivationDesc& desc, Direction direction, std::string id = {}) {
  ErrorContext context;
  context.op = detail::cat("act ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "cpu";
  context.implementation = std::move(id);
  return context;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return detail::cat("oneDNN ", v->major, '.', v->minor, '.', v->patch);
}

// Ids travel through command lines and cache files: keep them to a safe alphabet.
std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == ':' || c == '+' || c == '.' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

// A snapshot of `pd` at its current implementation (next_impl() changes the object in place).
dnnl::primitive_desc clone(const dnnl::primitive_desc& pd, const ErrorContext& context) {
  dnnl_primitive_desc_t copy = nullptr;
  DNNX_DNNL_CHECK(dnnl_primitive_desc_clone(&copy, pd.get()), context,
                  "cloning a primitive descriptor");
  return dnnl::primitive_desc(copy);
}

// The caller's dense tensor: desc.dims with desc.layout's strides.
memory::desc user_md(const ActivationDesc& desc) {
  const Dims strides = dense_strides(desc.dims, desc.layout);
  return memory::desc(memory::dims(desc.dims.begin(), desc.dims.end()), data_type_of(desc.dtype),
                      memory::dims(strides.begin(), strides.end()));
}

// Which forward tensor a backward algorithm reads.
enum class Reads : std::uint8_t { src, dst, nothing };

struct Algorithm {
  algorithm kind;
  std::string_view name;
  float alpha = 0, beta = 0;
  Reads reads = Reads::src;
  std::string bwd_defect;  // why its backward must not be used, if it must not
};

Algorithm make(algorithm kind, std::string_view name, float alpha, float beta, Reads reads,
               std::string bwd_defect = {}) {
  return {kind, name, alpha, beta, reads, std::move(bwd_defect)};
}

// Note [eltwise candidates]: the algorithms of (desc, direction) in priority order.
std::vector<Algorithm> algorithms(const ActivationDesc& desc, Direction direction) {
  const bool bwd = direction != Direction::fwd;
  const auto ceiling = static_cast<float>(desc.ceiling);
  const auto alpha = static_cast<float>(desc.alpha);
  std::vector<Algorithm> list;
  switch (desc.kind) {
    case ActivationKind::identity:
      list.push_back(make(algorithm::eltwise_linear, "linear", 1.0f, 0.0f, Reads::nothing));
      break;
    case ActivationKind::relu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_relu_use_dst_for_bwd, "relu_use_dst_for_bwd", 0, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_relu, "relu", 0, 0, Reads::src));
      break;
    case ActivationKind::clipped_relu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_clip_v2_use_dst_for_bwd, "clip_v2_use_dst_for_bwd",
                            0, ceiling, Reads::dst));
      list.push_back(make(algorithm::eltwise_clip_v2, "clip_v2", 0, ceiling, Reads::src));
      list.push_back(
          make(algorithm::eltwise_clip, "clip", 0, ceiling, Reads::src,
               "oneDNN's clip passes the gradient at x == ceiling, where hardtanh's is 0 "
               "(clip_v2 is the exact one)"));
      break;
    case ActivationKind::tanh:
      if (bwd)
        list.push_back(make(algorithm::eltwise_tanh_use_dst_for_bwd, "tanh_use_dst_for_bwd", 0, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_tanh, "tanh", 0, 0, Reads::src));
      break;
    case ActivationKind::sigmoid:
      if (bwd)
        list.push_back(make(algorithm::eltwise_logistic_use_dst_for_bwd, "logistic_use_dst_for_bwd",
                            0, 0, Reads::dst));
      list.push_back(make(algorithm::eltwise_logistic, "logistic", 0, 0, Reads::src));
      break;
    case ActivationKind::elu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_elu_use_dst_for_bwd, "elu_use_dst_for_bwd", alpha, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_elu, "elu", alpha, 0, Reads::src));
      break;
    case ActivationKind::swish:
      list.push_back(make(algorithm::eltwise_swish, "swish", 1.0f, 0, Reads::src));
      break;
  }
  return list;
}

// Why dnnx rules `alg` out for (desc, direction) before asking oneDNN; empty if it does not.
std::string exclusion(const ActivationDesc& desc, Direction direction, const Algorithm& alg) {
  if (direction == Direction::fwd) return {};
  if (!alg.bwd_defect.empty()) return alg.bwd_defect;
  if (alg.reads == Reads::src && desc.saved == ActivationSaved::dst) {
    return detail::cat(alg.name, " reads src in backward, and desc.saved = dst");
  }
  if (alg.reads == Reads::dst) {
    if (desc.saved == ActivationSaved::src)
      return detail::cat(alg.name, " reads dst in backward, and desc.saved = src");
    if (desc.kind == ActivationKind::elu && desc.alpha < 0) {
      return detail::cat(
          "elu backward from dst needs alpha >= 0 (dst does not tell the branches "
          "apart otherwise), got alpha ",
          desc.alpha);
    }
  }
  return {};
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;    // the implementation (null if unsupported)
  dnnl::primitive_desc hint;  // backward: the forward pd `pd` points to (must outlive it)
  Reads reads = Reads::src;
};

struct CandidateList {
  std::vector<Candidate> candidates;
  const Candidate* find(const std::string& id) const {
    for (const Candidate& candidate : candidates)
      if (candidate.info.id == id) return &candidate;
    return nullptr;
  }
  std::string ids() const {
    std::vector<std::string> names;
    for (const Candidate& candidate : candidates) names.push_back(candidate.info.id);
    return detail::join(names, ", ");
  }
};

Candidate unsupported(std::string id, std::string name, std::string reason) {
  Candidate candidate;
  candidate.info.id = std::move(id);
  candidate.info.name = std::move(name);
  candidate.info.reason = std::move(reason);
  candidate.info.supported = false;
  return candidate;
}

void describe(AlgoInfo& info, const std::string& impl, const Algorithm& alg) {
  info.name = detail::cat(impl, " (", alg.name, ")");
  info.deterministic = true;
  if (impl.starts_with("ref")) {
    info.notes.emplace_back("reference");
    info.families = {"none"};
  }
  for (std::string_view isa : {"avx512", "avx2", "avx", "sse41"}) {
    if (impl.find(isa) != std::string::npos) {
      info.notes.emplace_back(isa);
      break;
    }
  }
  if (alg.reads == Reads::dst) info.notes.emplace_back("use_dst");
}

CandidateList list_candidates(const dnnl::engine& engine, const ActivationDesc& desc,
                              Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction);
  const memory::desc md = user_md(desc);
  const dnnl::primitive_attr attr = user_scratchpad();
  CandidateList list;
  std::set<std::string> seen;
  for (const Algorithm& alg : algorithms(desc, direction)) {
    const std::string base = detail::cat(":", alg.name);
    // Implementations dnnx rules out are still listed, so that their ids do not depend on the desc.
    const std::string why = exclusion(desc, direction, alg);
    dnnl::eltwise_forward::primitive_desc hint;
    std::string failure;
    try {
      hint = dnnl::eltwise_forward::primitive_desc(engine, dnnl::prop_kind::forward_training,
                                                   alg.kind, md, md, alg.alpha, alg.beta, attr);
    } catch (const dnnl::error& error) {
      // oneDNN reports some parameters it cannot run (e.g. elu_use_dst_for_bwd with alpha < 0)
      // as invalid arguments rather than unimplemented: both mean "no implementation" here.
      if (error.status != dnnl_unimplemented && error.status != dnnl_invalid_arguments)
        raise_dnnl(error.status,
                   detail::cat("creating the ", alg.name,
                               " forward primitive "
                               "descriptor: ",
                               error.what()),
                   context);
      failure = error.what();
    }
    dnnl::primitive_desc pd;
    if (hint && direction != Direction::fwd) {
      try {
        pd = dnnl::eltwise_backward::primitive_desc(engine, alg.kind, md, md, md, alg.alpha,
                                                    alg.beta, hint, attr);
      } catch (const dnnl::error& error) {
        if (error.status != dnnl_unimplemented && error.status != dnnl_invalid_arguments)
          raise_dnnl(error.status,
                     detail::cat("creating the ", alg.name,
                                 " backward primitive "
                                 "descriptor: ",
                                 error.what()),
                     context);
        failure = error.what();
      }
    } else if (hint) {
      pd = hint;
    }
    if (!pd) {
      Candidate candidate = unsupported(
          detail::cat("onednn:unavailable", base),
          detail::cat(alg.name, " (no oneDNN implementation)"),
          !why.empty()
              ? why
              : detail::cat(onednn_version(), " has no ", alg.name, " implementation of act ",
                            to_string(direction), " for ", to_string(desc.dtype), ' ',
                            to_string(desc.layout), " on cpu isa ", isa, ": ", failure));
      candidate.info.notes = {std::string(alg.name)};
      list.candidates.push_back(std::move(candidate));
      continue;
    }
    do {
      const std::string impl = sanitize(pd.impl_info_str());
      Candidate candidate;
      candidate.info.id = detail::cat("onednn:", impl, base);
      if (!seen.insert(candidate.info.id).second) continue;
      describe(candidate.info, impl, alg);
      candidate.reads = alg.reads;
      if (!why.empty()) {
        candidate.info.reason = why;
        list.candidates.push_back(std::move(candidate));
        continue;
      }
      candidate.pd = clone(pd, context);
      candidate.hint = direction == Direction::fwd ? dnnl::primitive_desc() : hint;
      candidate.info.supported = true;
      candidate.info.workspace_bytes = pd.scratchpad_desc().get_size();
      list.candidates.push_back(std::move(candidate));
    } while (pd.next_impl());
  }
  // Supported first; within them everything but ref:any first (Note [eltwise candidates]).
  std::stable_partition(list.candidates.begin(), list.candidates.end(), [](const Candidate& c) {
    return c.info.supported && !c.info.id.starts_with("onednn:ref:");
  });
  std::stable_partition(list.candidates.begin(), list.candidates.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.candidates.size(); ++i)
    list.candidates[i].info.priority = static_cast<int>(i);
  return list;
}

// Runs one eltwise primitive on the caller's memory. Built once; execute() only rebinds pointers
// (Note [one stream] in runtime.hpp).
class Plan final : public detail::OpPlan<detail::ActivationArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const ActivationDesc& desc, Direction direction,
       const Candidate& candidate)
      : runtime_(std::move(runtime)),
        info_(candidate.info),
        context_(context_of(desc, direction, candidate.info.id)),
        direction_(direction),
        reads_(candidate.reads),
        hint_(candidate.hint) {
    const memory::desc md = user_md(desc);
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitive", [&] {
      primitive_ = dnnl::primitive(candidate.pd.get());
      for (dnnl::memory& memory : memories_) memory = dnnl::memory(md, engine, DNNL_MEMORY_NONE);
      const memory::desc scratchpad = candidate.pd.scratchpad_desc();
      if (scratchpad.get_size() > 0)
        scratchpad_ = dnnl::memory(scratchpad, engine, DNNL_MEMORY_NONE);
    });
    if (direction_ == Direction::fwd) {
      args_ = {{DNNL_ARG_SRC, memories_[0].get()}, {DNNL_ARG_DST, memories_[1].get()}};
    } else {
      // linear's backward reads no data tensor, yet oneDNN wants one bound (Note [eltwise
      // candidates]): whichever is at hand is.
      const int data_arg = reads_ == Reads::dst ? DNNL_ARG_DST : DNNL_ARG_SRC;
      args_ = {{data_arg, memories_[0].get()},
               {DNNL_ARG_DIFF_DST, memories_[1].get()},
               {DNNL_ARG_DIFF_SRC, memories_[2].get()}};
    }
    if (scratchpad_) args_.push_back({DNNL_ARG_SCRATCHPAD, scratchpad_.get()});
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ActivationArgs& args, detail::Workspace workspace) override {
    std::array<void*, 3> pointers{};
    if (direction_ == Direction::fwd) {
      pointers = {data_of(args.src, "src"), data_of(args.dst, "dst"), nullptr};
    } else {
      const Tensor* data = nullptr;
      switch (reads_) {
        case Reads::src: data = args.src; break;
        case Reads::dst: data = args.saved_dst; break;
        case Reads::nothing:
          data = args.src != nullptr         ? args.src
                 : args.saved_dst != nullptr ? args.saved_dst
                                             : args.diff_dst;
          break;
      }
      pointers = {data_of(data, reads_ == Reads::dst ? "dst" : "src"),
                  data_of(args.diff_dst, "diff_dst"), data_of(args.diff_src, "diff_src")};
    }
    if (workspace.bytes < info_.workspace_bytes ||
        (info_.workspace_bytes > 0 && workspace.data == nullptr)) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("workspace has ", workspace.bytes, " bytes; this candidate needs ",
                                info_.workspace_bytes),
                    context_);
    }
    std::lock_guard lock(runtime_->mutex);
    const std::size_t bound = direction_ == Direction::fwd ? 2 : 3;
    for (std::size_t i = 0; i < bound; ++i) bind(memories_[i], pointers[i]);
    if (scratchpad_) bind(scratchpad_, workspace.data);
    const dnnl_stream_t stream = runtime_->stream.get();
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream, static_cast<int>(args_.size()),
                                           args_.data()),
                    context_, "executing");
    DNNX_DNNL_CHECK(dnnl_stream_wait(stream), context_, "waiting for the stream");
  }

 private:
  void* data_of(const Tensor* tensor, const char* role) const {
    if (tensor == nullptr || tensor->data() == nullptr)
      detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context_);
    return tensor->data();
  }

  void bind(const dnnl::memory& memory, void* data) const {
    DNNX_DNNL_CHECK(dnnl_memory_set_data_handle(memory.get(), data), context_,
                    "binding a data pointer");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  Reads reads_;
  // oneDNN's backward primitives keep a plain pointer to their forward hint: held, and destroyed
  // after the primitive.
  dnnl::primitive_desc hint_;
  dnnl::primitive primitive_;
  std::array<dnnl::memory, 3> memories_;  // fwd: src, dst; bwd: src or dst, diff_dst, diff_src
  dnnl::memory scratchpad_;
  std::vector<dnnl_exec_arg_t> args_;
};

struct Key {
  ActivationDesc desc;
  Direction direction;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& key) const {
    return key.desc.hash() * 3 + static_cast<std::size_t>(key.direction);
  }
};

class OneDnnActivation final : public detail::ActivationBackend {
 public:
  explicit OneDnnActivation(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  std::vector<AlgoInfo> list(const ActivationDesc& desc, Direction direction) override {
    desc.validate();
    std::lock_guard lock(mutex_);
    std::vector<AlgoInfo> infos;
    for (const Candidate& candidate : candidates_locked(desc, direction).candidates)
      infos.push_back(candidate.info);
    return infos;
  }

  std::shared_ptr<detail::OpPlan<detail::ActivationArgs>> plan(const ActivationDesc& desc,
                                                               Direction direction,
                                                               const std::string& id) override {
    desc.validate();
    return plans_.get_or_build(desc, direction, id, [&] {
      std::lock_guard lock(mutex_);
      const CandidateList& list = candidates_locked(desc, direction);
      const Candidate* candidate = list.find(id);
      if (candidate == nullptr) {
        detail::raise(ErrorKind::InvalidArgument,
                      detail::cat("algorithm id '", id, "' is not a cpu candidate for this act ",
                                  to_string(direction), "; valid ids: ", list.ids()),
                      context_of(desc, direction, id));
      }
      if (!candidate->info.supported)
        detail::raise(ErrorKind::Unsupported, candidate->info.reason,
                      context_of(desc, direction, id));
      return std::make_shared<Plan>(runtime_, desc, direction, *candidate);
    });
  }

 private:
  const CandidateList& candidates_locked(const ActivationDesc& desc, Direction direction) {
    const Key key{desc, direction};
    auto found = lists_.find(key);
    if (found == lists_.end()) {
      found = lists_.emplace(key, list_candidates(runtime_->engine, desc, direction, runtime_->isa))
                  .first;
    }
    return found->second;
  }

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards lists_
  std::unordered_map<Key, CandidateList, KeyHash> lists_;
  detail::PlanCache<ActivationDesc, detail::ActivationArgs> plans_;
};

}  // namespace

std::unique_ptr<detail::ActivationBackend> make_activation_backend(
    std::shared_ptr<Runtime> runtime) {
  return std::make_unique<OneDnnActivation>(std::move(runtime));
}

}  // namespace dnnx::onednn
