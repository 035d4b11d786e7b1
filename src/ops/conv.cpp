// Convolution, backend-agnostic: validate the call against the desc, resolve the choice (fast
// path -> choice cache -> selection), run it, fall back when a candidate fails at run time.

#include <dnnx/ops/conv.hpp>
#include <dnnx/version.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"
#include "ops/context_state.hpp"
#include "tune/select.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

namespace dnnx {
namespace {

using detail::ContextState;
using detail::ConvArgs;
using detail::ConvPlan;

ErrorContext error_context(const Context& context, const ConvDesc& desc, Direction direction) {
  return {"conv " + std::string(to_string(direction)), desc.repro(direction),
          std::string(to_string(context.backend())), {}, {}};
}

// Runs `f`; a dnnx::Error escaping it gains the op, repro and backend of this call.
template <typename F>
auto with_context(const Context& context, const ConvDesc& desc, Direction direction, F&& f) {
  try {
    return f();
  } catch (const Error& error) {
    throw error.with_context(error_context(context, desc, direction));
  }
}

// ---- argument validation ------------------------------------------------------------------------

void check_tensor(const Context& context, const ConvDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected) {
  DNNX_CHECK_ARG(tensor.dtype() == desc.dtype, "dtype mix: ", role, " is ",
                 to_string(tensor.dtype()), " but the desc's dtype is ", to_string(desc.dtype));
  DNNX_CHECK_ARG(tensor.rank() == expected.rank(), role, " has rank ", tensor.rank(), " (dims ",
                 tensor.dims(), ") but the desc expects rank ", expected.rank(), " (dims ",
                 expected, ")");
  DNNX_CHECK_ARG(tensor.dims() == expected, role, " dims ", tensor.dims(),
                 " do not match the desc, which expects ", expected);
  DNNX_CHECK_ARG(tensor.data() != nullptr, role, " has null data");
  DNNX_CHECK_ARG(tensor.is_dense(desc.layout), "layout mismatch: ", role, " strides ",
                 tensor.strides(), " are not dense ", to_string(desc.layout), " (expected strides ",
                 dense_strides(expected, desc.layout), ")");
  DNNX_CHECK_ARG(tensor.device() == context.device(), role, " is on ", to_string(tensor.device()),
                 " but the context runs on ", to_string(context.device()));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* a0 = static_cast<const char*>(a.data());
  const char* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.span_bytes() && b0 < a0 + a.span_bytes();
}

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  DNNX_CHECK_ARG(!overlaps(out, in), out_role, " overlaps ", in_role,
                 " in memory; convolution cannot run in place (use separate buffers)");
}

void check_args(const Context& context, const ConvDesc& desc, Direction direction,
                const ConvArgs& args) {
  desc.validate();
  switch (direction) {
    case Direction::fwd:
      check_tensor(context, desc, "src", *args.src, desc.src_dims());
      check_tensor(context, desc, "weights", *args.weights, desc.weights_dims());
      check_tensor(context, desc, "dst", *args.dst, desc.dst_dims());
      check_no_alias("dst", *args.dst, "src", *args.src);
      check_no_alias("dst", *args.dst, "weights", *args.weights);
      break;
    case Direction::bwd_data:
      check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_tensor(context, desc, "weights", *args.weights, desc.weights_dims());
      check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims());
      check_no_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
      check_no_alias("diff_src", *args.diff_src, "weights", *args.weights);
      break;
    case Direction::bwd_weights:
      check_tensor(context, desc, "src", *args.src, desc.src_dims());
      check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_tensor(context, desc, "diff_weights", *args.diff_weights, desc.weights_dims());
      check_no_alias("diff_weights", *args.diff_weights, "src", *args.src);
      check_no_alias("diff_weights", *args.diff_weights, "diff_dst", *args.diff_dst);
      break;
  }
}

void check_bias(const Context& context, const ConvDesc& desc, const char* role,
                const Tensor& bias) {
  DNNX_CHECK_ARG(bias.dtype() == desc.dtype, "dtype mix: ", role, " is ", to_string(bias.dtype()),
                 " but the desc's dtype is ", to_string(desc.dtype));
  DNNX_CHECK_ARG(bias.dims() == desc.bias_dims(), role, " dims ", bias.dims(),
                 " do not match the desc, which expects ", desc.bias_dims(),
                 " (one value per output channel)");
  DNNX_CHECK_ARG(bias.data() != nullptr, role, " has null data");
  DNNX_CHECK_ARG(bias.strides()[0] == 1 || bias.dims()[0] == 1, role, " must be contiguous, got stride ",
                 bias.strides()[0]);
  DNNX_CHECK_ARG(bias.device() == context.device(), role, " is on ", to_string(bias.device()),
                 " but the context runs on ", to_string(context.device()));
}

// ---- scratch tensors for selection without user tensors ----------------------------------------

// Note [scratch data]: timing on uninitialised memory can hit denormals or NaNs and mislead the
// search, so scratch tensors hold small random values.
struct Scratch {
  Tensor src, weights, dst;  // dst doubles as diff_dst, src as diff_src, weights as diff_weights
  ConvArgs args(Direction direction) {
    ConvArgs a;
    switch (direction) {
      case Direction::fwd:
        a.src = &src, a.weights = &weights, a.dst = &dst;
        break;
      case Direction::bwd_data:
        a.diff_dst = &dst, a.weights = &weights, a.diff_src = &src;
        break;
      case Direction::bwd_weights:
        a.src = &src, a.diff_dst = &dst, a.diff_weights = &weights;
        break;
    }
    return a;
  }
};

Scratch make_scratch(const Context& context, const ConvDesc& desc) {
  Allocator& allocator = context.allocator();
  Scratch s{Tensor::empty(desc.src_dims(), desc.dtype, desc.layout, allocator),
            Tensor::empty(desc.weights_dims(), desc.dtype, desc.layout, allocator),
            Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout, allocator)};
  const bool on_host = allocator.device().kind == Device::Kind::cpu;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (Tensor* t : {&s.src, &s.weights, &s.dst}) {
    std::vector<float> values(static_cast<std::size_t>(t->numel()));
    for (float& v : values) v = uniform(rng);
    if (on_host) {
      t->copy_from_f32(values);
    } else {
      // Device scratch is filled through a host tensor.
      Tensor host = Tensor::empty(t->dims(), t->dtype(), desc.layout);
      host.copy_from_f32(values);
      copy(host, *t);
    }
  }
  return s;
}

// Host-side allocation failures (the staging vectors) surface as OutOfMemory like device ones.
Scratch make_scratch_checked(const Context& context, const ConvDesc& desc) {
  try {
    return make_scratch(context, desc);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  detail::raise(ErrorKind::OutOfMemory,
                detail::cat("cannot allocate scratch tensors for timing (src ", desc.src_dims(),
                            ", weights ", desc.weights_dims(), ", dst ", desc.dst_dims(), ")"));
}

// ---- selection ----------------------------------------------------------------------------------

tune::Request make_request(const Context& context, const ConvDesc& desc, Direction direction,
                           std::string key) {
  return {"conv", direction, desc.key(), desc.repro(direction), std::string(to_string(context.backend())),
          std::move(key)};
}

// The facts persisted with a choice: who measured it, on what.
std::string environment_json(const detail::Backend& backend) {
  std::vector<std::pair<std::string, std::string>> facts{
      {"backend", backend.name()}, {"fingerprint", backend.fingerprint()},
      {"dnnx", std::string(version())}};
  for (auto& fact : backend.environment()) facts.push_back(std::move(fact));
  std::string text = "{";
  for (std::size_t i = 0; i < facts.size(); ++i) {
    if (i > 0) text += ",";
    text += detail::json_quote(facts[i].first) + ":" + detail::json_quote(facts[i].second);
  }
  return text + "}";
}

// Runs `plan` once on `args` and returns its time. Called with the state's mutex held.
double run_plan(ContextState& state, ConvPlan& plan, const ConvArgs& args) {
  const detail::Workspace workspace = state.workspace(plan.algo().workspace_bytes);
  return state.backend().time_ms([&] { plan.execute(args, workspace); });
}

// Selects for (desc, direction) through the choice cache. `args` are the tensors to time on.
// Called with the state's mutex held.
// The tensors selection times on, made only when a selection actually times candidates.
using ArgsSource = std::function<const ConvArgs&()>;

// Runs selection for (desc, direction) without consulting the cache and stores the result.
std::shared_ptr<const Choice> fresh_select_locked(Context& context, ContextState& state,
                                                  const ConvDesc& desc, Direction direction,
                                                  const ArgsSource& args,
                                                  const tune::Request& request) {
  detail::Backend& backend = state.backend();
  const TuneOptions& options = context.tune();
  const std::vector<AlgoInfo> candidates = backend.conv().list(desc, direction);
  if (options.policy(direction).kind == PolicyKind::exhaustive) {
    std::vector<std::string> ids;
    for (const AlgoInfo& algo : candidates) {
      if (!tune::exclusion(algo, options)) ids.push_back(algo.id);
    }
    backend.conv().prepare(desc, direction, ids);
  }
  auto run = [&](const AlgoInfo& algo) {
    return run_plan(state, *backend.conv().plan(desc, direction, algo.id), args());
  };
  auto choice = std::make_shared<Choice>(tune::select(request, candidates, options, run));
  choice->backend = backend.name();
  choice->fingerprint = backend.fingerprint();
  choice->environment = environment_json(backend);
  choice->measured_at = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  context.choice_cache()->insert(request.key, choice);
  return choice;
}

// The cache key of (desc, direction) under the context's options. The dnnx version is part of it
// because candidate ids may change between dnnx versions.
std::string conv_key(const Context& context, ContextState& state, const ConvDesc& desc,
                     Direction direction) {
  return tune::make_key("conv", desc.key(), direction, context.tune(),
                        state.backend().fingerprint() + " dnnx-" + std::string(version()));
}

struct Selected {
  std::shared_ptr<const Choice> choice;
  tune::Request request;
  bool from_cache = false;
};

// Selects for (desc, direction) through the choice cache. `args` are the tensors to time on.
// Called with the state's mutex held.
Selected select_locked(Context& context, ContextState& state, const ConvDesc& desc,
                       Direction direction, const ArgsSource& args) {
  detail::Backend& backend = state.backend();
  const TuneOptions& options = context.tune();
  ChoiceCache& cache = *context.choice_cache();
  Selected selected{nullptr, make_request(context, desc, direction,
                                          conv_key(context, state, desc, direction))};
  const tune::Request& request = selected.request;
  if (auto cached = cache.find(request.key)) {
    // Note [re-validating persisted choices]: a choice read from the cache file was made by
    // another process, maybe under other limits. Its key holds the backend's fingerprint and the
    // dnnx version, so whether the id is a candidate, supported, and how much workspace it needs
    // are as recorded; what may differ is this call's constraints, so the recorded candidate is
    // checked against them (no listing: on cuDNN that costs 20-130 ms per layer and direction).
    // A choice whose plan still cannot be built is selected again when the call runs.
    const auto why = cached->from_file ? tune::exclusion(cached->algo, options) : std::nullopt;
    if (!why) {
      if (cached->from_file) {
        auto validated = std::make_shared<Choice>(*cached);
        validated->from_file = false;
        cache.insert(request.key, validated);
        cached = validated;
      }
      if (options.verbose) std::cerr << tune::describe_decision(request, *cached, true) << '\n';
      selected.choice = std::move(cached);
      selected.from_cache = true;
      return selected;
    }
    if (options.verbose) {
      std::cerr << "dnnx: cached choice " << cached->algo.id << " for " << request.desc
                << " is not valid here (" << why->detail << "); selecting again\n";
    }
  } else if (options.verbose) {
    if (const std::size_t foreign = cache.foreign_entries(backend.name(), backend.fingerprint())) {
      std::cerr << "dnnx: tune cache holds " << foreign << " choices for " << backend.name()
                << " measured on another device kind or library version; ignored\n";
    }
  }
  selected.choice = fresh_select_locked(context, state, desc, direction, args, request);
  return selected;
}

// The plan of a selected choice. A cached choice that cannot be built here (a file entry whose
// candidate this build does not have after all) is selected again rather than failing the call.
std::shared_ptr<ConvPlan> plan_for(Context& context, ContextState& state, const ConvDesc& desc,
                                   Direction direction, const ArgsSource& args,
                                   Selected& selected) {
  try {
    return state.backend().conv().plan(desc, direction, selected.choice->algo.id);
  } catch (const Error& error) {
    const bool rejected =
        error.kind() == ErrorKind::InvalidArgument || error.kind() == ErrorKind::Unsupported;
    if (!selected.from_cache || !rejected || selected.choice->policy.kind == PolicyKind::fixed)
      throw;
    if (context.tune().verbose) {
      std::cerr << "dnnx: cached choice " << selected.choice->algo.id
                << " cannot be built here (" << error.message() << "); selecting again\n";
    }
    selected.choice =
        fresh_select_locked(context, state, desc, direction, args, selected.request);
    selected.from_cache = false;
    return state.backend().conv().plan(desc, direction, selected.choice->algo.id);
  }
}

// Note [run-time fallback]: a candidate can pass selection and still fail when it runs (the
// workspace allocation runs out of memory, the library rejects a rare configuration). The call
// then moves on to the next admissible candidate in the order the policy ranks them (timings for
// exhaustive, priority otherwise); fixed ids never fall back. The zero-workspace reference-like
// candidate every backend lists keeps this from running dry.
std::vector<AlgoInfo> fallback_order(ContextState& state, const TuneOptions& options,
                                     const ConvDesc& desc, Direction direction,
                                     const Choice& failed) {
  std::vector<AlgoInfo> order;
  if (!failed.timings.empty()) {
    for (const ProfileRow& row : failed.timings) {
      if (row.status == CandidateStatus::ok) order.push_back(row.algo);
    }
  }
  for (const AlgoInfo& algo : state.backend().conv().list(desc, direction)) {
    if (!tune::exclusion(algo, options)) order.push_back(algo);
  }
  std::vector<AlgoInfo> unique;
  for (AlgoInfo& algo : order) {
    const bool seen = algo.id == failed.algo.id ||
                      std::any_of(unique.begin(), unique.end(),
                                  [&](const AlgoInfo& a) { return a.id == algo.id; });
    if (!seen) unique.push_back(std::move(algo));
  }
  return unique;
}

std::shared_ptr<const Choice> execute_with_fallback(Context& context, ContextState& state,
                                                    const ConvDesc& desc, Direction direction,
                                                    const ConvArgs& args,
                                                    std::shared_ptr<const Choice> choice,
                                                    std::shared_ptr<ConvPlan> plan) {
  try {
    plan->execute(args, state.workspace(plan->algo().workspace_bytes));
    return choice;
  } catch (const Error& error) {
    const bool recoverable =
        error.kind() == ErrorKind::OutOfMemory || error.kind() == ErrorKind::BackendFailure;
    if (!recoverable || choice->policy.kind == PolicyKind::fixed) throw;
    std::string failures = choice->algo.id + ": " + error.message();
    for (const AlgoInfo& next : fallback_order(state, context.tune(), desc, direction, *choice)) {
      try {
        auto next_plan = state.backend().conv().plan(desc, direction, next.id);
        next_plan->execute(args, state.workspace(next_plan->algo().workspace_bytes));
        auto fallback = std::make_shared<Choice>(*choice);
        fallback->algo = next_plan->algo();
        fallback->time_ms = std::numeric_limits<double>::quiet_NaN();
        if (context.tune().verbose) {
          std::cerr << "dnnx: conv " << to_string(direction) << " " << choice->algo.id
                    << " failed at run time (" << error.message() << "); fell back to " << next.id
                    << '\n';
        }
        // Later calls go straight to the candidate that worked.
        context.choice_cache()->insert(choice->key, fallback);
        return fallback;
      } catch (const Error& next_error) {
        if (next_error.kind() != ErrorKind::OutOfMemory &&
            next_error.kind() != ErrorKind::BackendFailure)
          throw;
        failures += "; " + next.id + ": " + next_error.message();
      }
    }
    throw Error(error.kind(), "every admissible candidate failed at run time: " + failures,
                error.context());
  }
}

// The whole call: fast path, else selection, then execution.
std::shared_ptr<const Choice> run_conv(Context& context, const ConvDesc& desc, Direction direction,
                                       const ConvArgs& args) {
  return with_context(context, desc, direction, [&] {
    check_args(context, desc, direction, args);
    ContextState& state = context.state();
    std::lock_guard lock(state.mutex());
    const ChoiceCache& cache = *context.choice_cache();
    auto& calls = state.conv_calls();
    const detail::ConvKey call_key{desc, direction};
    auto it = calls.find(call_key);
    const bool fresh = it != calls.end() && it->second.cache == &cache &&
                       it->second.cache_generation == cache.generation() &&
                       it->second.options == context.tune();
    if (!fresh) {
      const ArgsSource real = [&args]() -> const ConvArgs& { return args; };
      Selected selected = select_locked(context, state, desc, direction, real);
      auto plan = plan_for(context, state, desc, direction, real, selected);
      it = calls.insert_or_assign(call_key, detail::ConvCallEntry{context.tune(), &cache,
                                                                  cache.generation(),
                                                                  selected.choice, plan})
               .first;
    }
    detail::ConvCallEntry& entry = it->second;
    auto used = execute_with_fallback(context, state, desc, direction, args, entry.choice, entry.plan);
    if (used != entry.choice) calls.erase(call_key);
    return used;
  });
}

// Runs a choice a layer holds (Reuse::once), bypassing selection.
std::shared_ptr<const Choice> run_choice(Context& context, const ConvDesc& desc,
                                         Direction direction, const ConvArgs& args,
                                         std::shared_ptr<const Choice> choice) {
  return with_context(context, desc, direction, [&] {
    check_args(context, desc, direction, args);
    ContextState& state = context.state();
    std::lock_guard lock(state.mutex());
    auto plan = state.backend().conv().plan(desc, direction, choice->algo.id);
    return execute_with_fallback(context, state, desc, direction, args, choice, plan);
  });
}

ConvArgs fwd_args(const Tensor& src, const Tensor& weights, Tensor& dst) {
  ConvArgs args;
  args.src = &src, args.weights = &weights, args.dst = &dst;
  return args;
}
ConvArgs bwd_data_args(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  ConvArgs args;
  args.diff_dst = &diff_dst, args.weights = &weights, args.diff_src = &diff_src;
  return args;
}
ConvArgs bwd_weights_args(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights) {
  ConvArgs args;
  args.src = &src, args.diff_dst = &diff_dst, args.diff_weights = &diff_weights;
  return args;
}

void bias_fwd_locked(Context& context, const ConvDesc& desc, const Tensor& bias, Tensor& dst) {
  check_bias(context, desc, "bias", bias);
  check_tensor(context, desc, "dst", dst, desc.dst_dims());
  check_no_alias("dst", dst, "bias", bias);
  ContextState& state = context.state();
  std::lock_guard lock(state.mutex());
  state.backend().conv().bias_fwd(desc, bias, dst);
}

void bias_bwd_locked(Context& context, const ConvDesc& desc, const Tensor& diff_dst,
                     Tensor& diff_bias) {
  check_bias(context, desc, "diff_bias", diff_bias);
  check_tensor(context, desc, "diff_dst", diff_dst, desc.dst_dims());
  check_no_alias("diff_bias", diff_bias, "diff_dst", diff_dst);
  ContextState& state = context.state();
  std::lock_guard lock(state.mutex());
  state.backend().conv().bias_bwd(desc, diff_dst, diff_bias);
}

}  // namespace

// A bad bias must be reported before dst is overwritten.
void check_fwd_bias(const Context& context, const ConvDesc& desc, const Tensor& bias,
                    const Tensor& dst) {
  with_context(context, desc, Direction::fwd, [&] {
    check_bias(context, desc, "bias", bias);
    check_no_alias("dst", dst, "bias", bias);
  });
}

std::shared_ptr<const Choice> conv_fwd(Context& context, const ConvDesc& desc, const Tensor& src,
                                       const Tensor& weights, Tensor& dst, const Tensor* bias) {
  if (bias != nullptr) check_fwd_bias(context, desc, *bias, dst);
  auto choice = run_conv(context, desc, Direction::fwd, fwd_args(src, weights, dst));
  if (bias != nullptr) conv_bias_fwd(context, desc, *bias, dst);
  return choice;
}

std::shared_ptr<const Choice> conv_bwd_data(Context& context, const ConvDesc& desc,
                                            const Tensor& diff_dst, const Tensor& weights,
                                            Tensor& diff_src) {
  return run_conv(context, desc, Direction::bwd_data, bwd_data_args(diff_dst, weights, diff_src));
}

std::shared_ptr<const Choice> conv_bwd_weights(Context& context, const ConvDesc& desc,
                                               const Tensor& src, const Tensor& diff_dst,
                                               Tensor& diff_weights, Tensor* diff_bias) {
  if (diff_bias != nullptr) {
    with_context(context, desc, Direction::bwd_weights, [&] {
      check_bias(context, desc, "diff_bias", *diff_bias);
      check_no_alias("diff_bias", *diff_bias, "diff_dst", diff_dst);
      check_no_alias("diff_bias", *diff_bias, "diff_weights", diff_weights);
    });
  }
  auto choice = run_conv(context, desc, Direction::bwd_weights,
                         bwd_weights_args(src, diff_dst, diff_weights));
  if (diff_bias != nullptr) conv_bias_bwd(context, desc, diff_dst, *diff_bias);
  return choice;
}

void conv_bias_fwd(Context& context, const ConvDesc& desc, const Tensor& bias, Tensor& dst) {
  with_context(context, desc, Direction::fwd, [&] {
    desc.validate();
    bias_fwd_locked(context, desc, bias, dst);
  });
}

void conv_bias_bwd(Context& context, const ConvDesc& desc, const Tensor& diff_dst,
                   Tensor& diff_bias) {
  with_context(context, desc, Direction::bwd_weights, [&] {
    desc.validate();
    bias_bwd_locked(context, desc, diff_dst, diff_bias);
  });
}

std::vector<AlgoInfo> conv_list(Context& context, const ConvDesc& desc, Direction direction) {
  return with_context(context, desc, direction, [&] {
    desc.validate();
    ContextState& state = context.state();
    std::lock_guard lock(state.mutex());
    return state.backend().conv().list(desc, direction);
  });
}

std::shared_ptr<const Choice> conv_select(Context& context, const ConvDesc& desc,
                                          Direction direction) {
  return with_context(context, desc, direction, [&] {
    desc.validate();
    ContextState& state = context.state();
    // Scratch tensors only when the answer is not cached and the policy times candidates.
    std::unique_ptr<Scratch> scratch;
    ConvArgs args;
    const ArgsSource lazy = [&]() -> const ConvArgs& {
      if (!scratch) {
        scratch = std::make_unique<Scratch>(make_scratch_checked(context, desc));
        args = scratch->args(direction);
      }
      return args;
    };
    std::lock_guard lock(state.mutex());
    return select_locked(context, state, desc, direction, lazy).choice;
  });
}

ProfileResult conv_profile(Context& context, const ConvDesc& desc, Direction direction) {
  return with_context(context, desc, direction, [&] {
    desc.validate();
    const auto start = std::chrono::steady_clock::now();
    ContextState& state = context.state();
    Scratch scratch = make_scratch_checked(context, desc);
    const ConvArgs args = scratch.args(direction);
    std::lock_guard lock(state.mutex());
    detail::Backend& backend = state.backend();
    ProfileResult result;
    result.op = "conv";
    result.direction = direction;
    result.desc = desc.key();
    result.repro = desc.repro(direction);
    result.backend = backend.name();
    auto run = [&](const AlgoInfo& algo) {
      return run_plan(state, *backend.conv().plan(desc, direction, algo.id), args);
    };
    result.rows = tune::time_candidates(backend.conv().list(desc, direction), context.tune(), run,
                                        /*apply_benchmark_limit=*/false);
    if (!result.rows.empty() && result.rows.front().status == CandidateStatus::ok)
      result.chosen = result.rows.front().algo.id;
    result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               start)
                         .count();
    return result;
  });
}

// ---- Convolution (layer state) -------------------------------------------------------------------

Convolution::Convolution(Context context) : context_(std::move(context)) {}

const std::shared_ptr<const Choice>& Convolution::choice(Direction direction) const {
  return slots_[static_cast<std::size_t>(direction)].choice;
}

std::shared_ptr<const Choice> Convolution::choose(const ConvDesc& desc, Direction direction) {
  Slot& slot = slots_[static_cast<std::size_t>(direction)];
  const AlgoPolicy& policy = context_.tune().policy(direction);
  if (policy.reuse != Reuse::once || !slot.choice) return nullptr;
  if (slot.desc == desc) return slot.choice;
  // Reuse::once on a new shape: keep the algorithm if it can still run under the constraints.
  for (const AlgoInfo& algo : conv_list(context_, desc, direction)) {
    if (algo.id != slot.choice->algo.id) continue;
    if (tune::exclusion(algo, context_.tune())) break;
    auto kept = std::make_shared<Choice>(*slot.choice);
    kept->algo = algo;
    kept->key.clear();  // no longer the cache entry of any key
    if (context_.tune().verbose) {
      std::cerr << "dnnx: conv " << to_string(direction) << " [" << to_string(context_.backend())
                << "] " << desc.key() << " keeps " << algo.id << " (reuse once, new shape)\n";
    }
    return kept;
  }
  return nullptr;
}

namespace {

template <typename Run>
std::shared_ptr<const Choice> layer_call(Context& context, const ConvDesc& desc,
                                         Direction direction,
                                         std::shared_ptr<const Choice> held, Run run_fresh,
                                         const ConvArgs& args) {
  if (held) return run_choice(context, desc, direction, args, std::move(held));
  return run_fresh();
}

}  // namespace

std::shared_ptr<const Choice> Convolution::fwd(const ConvDesc& desc, const Tensor& src,
                                               const Tensor& weights, Tensor& dst,
                                               const Tensor* bias) {
  const ConvArgs args = fwd_args(src, weights, dst);
  auto used = layer_call(context_, desc, Direction::fwd, choose(desc, Direction::fwd),
                         [&] { return run_conv(context_, desc, Direction::fwd, args); }, args);
  if (bias != nullptr) conv_bias_fwd(context_, desc, *bias, dst);
  slots_[0] = {used, desc};
  return used;
}

std::shared_ptr<const Choice> Convolution::bwd_data(const ConvDesc& desc, const Tensor& diff_dst,
                                                    const Tensor& weights, Tensor& diff_src) {
  const ConvArgs args = bwd_data_args(diff_dst, weights, diff_src);
  auto used = layer_call(context_, desc, Direction::bwd_data, choose(desc, Direction::bwd_data),
                         [&] { return run_conv(context_, desc, Direction::bwd_data, args); }, args);
  slots_[1] = {used, desc};
  return used;
}

std::shared_ptr<const Choice> Convolution::bwd_weights(const ConvDesc& desc, const Tensor& src,
                                                       const Tensor& diff_dst, Tensor& diff_weights,
                                                       Tensor* diff_bias) {
  const ConvArgs args = bwd_weights_args(src, diff_dst, diff_weights);
  auto used = layer_call(
      context_, desc, Direction::bwd_weights, choose(desc, Direction::bwd_weights),
      [&] { return run_conv(context_, desc, Direction::bwd_weights, args); }, args);
  if (diff_bias != nullptr) conv_bias_bwd(context_, desc, diff_dst, *diff_bias);
  slots_[2] = {used, desc};
  return used;
}

}  // namespace dnnx
