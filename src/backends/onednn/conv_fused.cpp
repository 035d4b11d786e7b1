// The cpu backend's fused convolution.
//
// Note [oneDNN fused candidates]
// A fused candidate is one oneDNN convolution implementation (next_impl of the forward primitive
// descriptor) created with the epilogue as attributes: the bias as the convolution's own bias
// argument, the residual as a sum post-op with scale residual_scale (dst := conv + bias +
// residual_scale * dst), then an eltwise relu post-op. The sum post-op accumulates onto what dst
// holds, so the residual is first copied into dst (into the reorder buffer of dst when the
// implementation runs dst in a blocked layout); when the residual is dst itself nothing is copied,
// which makes in-place calls the cheap case. oneDNN 3.2's jit and gemm implementations accept a
// sum post-op only with scale 1 (with 0.5 only ref:any remains), so the post-op's scale is always
// 1 and a residual_scale other than 1 is applied on the way in: an eltwise_linear from the
// residual into dst (in place when the residual is dst), or on the reorder buffer after the
// residual's copy. The scaled residual is then rounded to the dtype once more before the sum, a
// relative error of one unit of the dtype on that term (nothing for f32 beyond f32 rounding, and
// nothing at all for powers of two). As for plain convolution each implementation is
// asked for under the memory-format strategies of Note [format strategies] (conv_list.cpp), and
// its id names the layouts it chose: "onednn:<impl>:<algorithm>:<layouts>:fused". oneDNN's
// ref:any keeps only its plain variant and stays last (Note [one reference candidate]).
//   f16/bf16 descs also list f32-compute fused candidates, as plain convolution does (Note [f32
// compute convolution], conv_list.cpp; id "onednn:<impl>:<algorithm>:<layouts>:fused:f32"): the
// f32 implementation with the same post-ops, src and weights converted into f32 buffers, the bias
// into an f32 copy, the residual converted by its copy into dst's f32 buffer (so its scaling is
// done in f32, without the extra rounding above), and dst converted back once at the end.
//
// Note [unfused candidates]
// "unfused:<conv id>" runs the backend's heuristic convolution (the first supported candidate of
// conv_list) and then the epilogue as one more pass over dst: the fallback when no fused
// implementation exists, and the yardstick the fused ones are timed against. With a residual the
// convolution writes into the workspace, not dst, so that a residual which is dst itself is still
// intact when the epilogue reads it; workspace_bytes counts that buffer.
//
// An f16/bf16 desc that oneDNN has no native convolution for runs its unfused candidate on the
// first f32-compute convolution candidate; the epilogue then reads the convolution's output after
// its rounding to the dtype (one more rounding, within Note [conv_fused tolerances]).
//
// Order (Note [candidate order], conv_list.cpp): native fused implementations other than ref
// (oneDNN's order, strategies as for plain conv), the f32-compute fused ones, the unfused
// candidate, the fused ref:any (in f32 only where no native one runs), then
// "onednn:unavailable:<algorithm>:fused" records for the algorithms oneDNN has no native fused
// implementation of.

#include "backends/onednn/check.hpp"
#include "backends/onednn/conv_bias.hpp"
#include "backends/onednn/conv_list.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/conv_fused_args.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {


ErrorContext context_of(const ConvFusedDesc& desc, std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, Direction::fwd, std::move(implementation));
}

// The epilogue as oneDNN attributes (Note [oneDNN fused candidates]).
dnnl::primitive_attr fused_attr(const ConvFusedDesc& desc) {
  dnnl::primitive_attr attr = user_scratchpad();
  dnnl::post_ops ops;
  // Scale 1: Note [oneDNN fused candidates].
  if (desc.residual) ops.append_sum(1.0f);
  if (desc.activation == FusedActivation::relu)
    ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  return attr;
}

// The bias as the caller holds it (`type` = its dtype) or as an f32-compute convolution reads it
// (f32); null without a bias.
memory::desc fused_bias_md(const ConvFusedDesc& desc, DType type) {
  if (!desc.bias) return {};
  return memory::desc({desc.conv.out_channels}, data_type_of(type), memory::format_tag::x);
}

// Roles of the convolution's tensors in the arrays below, and the indices of the other tensors
// of a call (Conversion::tensor).
constexpr std::size_t role_src = 0, role_weights = 1, role_dst = 2;
constexpr std::size_t tensor_bias = 3, tensor_residual = 4;
constexpr const char* role_names[3] = {"src", "weights", "dst"};

// One candidate: its public record and what a plan needs to build it.
struct Candidate {
  AlgoInfo info;
  CandidateOrigin origin;  // fused: what in_priority_order needs; unfused: none
  // Fused: the implementation, per role its descriptor and the reorder between it and the
  // caller's layout (null: none; src and weights user -> inner, dst inner -> user), the
  // residual's copy (user dst -> the dst the convolution accumulates onto, a reorder) and scaling
  // (an eltwise_linear: from the residual into dst, or in place on dst's reorder buffer),
  // workspace offsets. f32 compute: the reorders and the residual's copy run from and to the f32
  // copies in the caller's layout (the residual is scaled while converted: no scaling step).
  dnnl::primitive_desc conv;
  std::array<memory::desc, 3> inner;
  std::array<dnnl::primitive_desc_base, 3> reorders;
  dnnl::primitive_desc_base residual_copy;
  dnnl::primitive_desc_base residual_scaling;
  std::array<std::size_t, 3> buffer_offsets{};
  // f32 compute (Note [f32 compute convolution], conv_list.cpp): where the f32 copy of the bias
  // lies, and the f32 copies in the caller's layout of the reordered roles (and the residual).
  std::size_t bias_offset = 0;
  std::size_t f32_copy_offset = 0;
  // Unfused: the convolution candidate it runs and where the convolution's output goes.
  std::string conv_id;
  std::size_t conv_workspace = 0;
  std::size_t staging_offset = 0;  // of the convolution's output when desc.residual
};

// The current implementation of `pd` as a fused candidate (unsupported, with the reason, when a
// reorder it needs has no implementation). `g` is the caller's geometry; `inner_g` the one the
// implementation was asked for (g, or its f32 twin for an f32-compute candidate).
Candidate fused_candidate(const dnnl::engine& engine, const dnnl::primitive_desc& pd,
                          dnnl::algorithm algorithm, const ConvFusedDesc& desc,
                          const ConvGeometry& g, const ConvGeometry& inner_g, bool f32_compute,
                          const ErrorContext& context) {
  Candidate candidate;
  candidate.conv = clone(pd, context);
  const std::string impl = sanitize(pd.impl_info_str());
  candidate.inner = {pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
  const std::array<const memory::desc*, 3> user = {&g.src, &g.weights, &g.dst};
  const std::string layouts = chosen_layouts(
      inner_g, candidate.inner[role_src], candidate.inner[role_weights], candidate.inner[role_dst]);
  const dnnl::algorithm resolved =
      algorithm == dnnl::algorithm::convolution_auto ? pd.get_algorithm() : algorithm;

  candidate.origin = {detail::cat(impl, ':', algorithm_name(resolved)), layouts, f32_compute};
  AlgoInfo& info = candidate.info;
  info.id = detail::cat("onednn:", impl, ':', algorithm_name(resolved), ':', layouts, ":fused",
                        f32_compute ? f32_compute_suffix : "");
  info.name = detail::cat(impl, " (", algorithm_name(resolved), ", ", layouts,
                          f32_compute ? detail::cat(", ", f32_compute_name) : "",
                          ", epilogue as post-ops)");
  // oneDNN's CPU convolutions are bitwise reproducible for a fixed thread count, which is part of
  // the fingerprint (Note [determinism], conv_list.cpp); post-ops run in the same threads.
  info.deterministic = true;
  info.notes = {"fused"};
  describe(info, impl, resolved, layouts, f32_compute);

  std::size_t scratch = pd.scratchpad_desc().get_size();
  bool reordered = false;
  const dnnl::primitive_attr attr = user_scratchpad();
  const auto reorder = [&](const memory::desc& from, const memory::desc& to,
                           const char* what) -> dnnl::primitive_desc_base {
    std::string failure;
    dnnl::primitive_desc_base reorder_pd = create_or_unavailable(
        [&] {
          return dnnl::primitive_desc_base(
              dnnl::reorder::primitive_desc(engine, from, engine, to, attr));
        },
        detail::cat(what, " reorder"), context, failure);
    if (!reorder_pd) {
      info.supported = false;
      info.reason =
          detail::cat("oneDNN cannot reorder ", what, " between the caller's layout and the one ",
                      impl, " uses: ", failure);
      return {};
    }
    scratch = std::max(scratch, reorder_pd.scratchpad_desc().get_size());
    return reorder_pd;
  };
  // f32 compute: the reorders run between the f32 copies in the caller's layout and inner.
  const std::array<const memory::desc*, 3> user_f32 = {&inner_g.src, &inner_g.weights,
                                                       &inner_g.dst};
  const auto& from_user = f32_compute ? user_f32 : user;
  std::size_t staging_bytes = 0;
  for (std::size_t r = 0; r < 3; ++r) {
    if (same_layout(candidate.inner[r], *from_user[r])) continue;
    candidate.reorders[r] = r == role_dst
                                ? reorder(candidate.inner[r], *from_user[r], role_names[r])
                                : reorder(*from_user[r], candidate.inner[r], role_names[r]);
    if (!candidate.reorders[r]) return candidate;
    reordered = true;
    if (f32_compute) staging_bytes = std::max(staging_bytes, from_user[r]->get_size());
  }
  if (desc.residual && f32_compute) {
    // Converted (and scaled) into the f32 copy of dst in the caller's layout, which is dst's
    // buffer or, when dst is reordered, reordered into it.
    if (candidate.reorders[role_dst]) {
      candidate.residual_copy = reorder(inner_g.dst, candidate.inner[role_dst], "residual");
      if (!candidate.residual_copy) return candidate;
    }
  } else if (desc.residual) {
    const bool dst_reordered = static_cast<bool>(candidate.reorders[role_dst]);
    const bool scaled = desc.residual_scale != 1.0f;
    // Into the reorder buffer of dst, or into dst itself (a plain copy between equal layouts);
    // a scaled residual reaches a plain dst through the scaling alone.
    if (dst_reordered || !scaled) {
      candidate.residual_copy =
          reorder(g.dst, dst_reordered ? candidate.inner[role_dst] : g.dst, "residual");
      if (!candidate.residual_copy) return candidate;
    }
    if (scaled) {
      const memory::desc& md = dst_reordered ? candidate.inner[role_dst] : g.dst;
      std::string failure;
      const dnnl::primitive_desc_base scaling = create_or_unavailable(
          [&] {
            return dnnl::primitive_desc_base(dnnl::eltwise_forward::primitive_desc(
                engine, dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, md, md,
                desc.residual_scale, 0.0f, attr));
          },
          "residual scaling", context, failure);
      if (!scaling) {
        info.supported = false;
        info.reason = detail::cat("oneDNN cannot scale the residual in the layout ", impl,
                                  " uses: ", failure);
        return candidate;
      }
      scratch = std::max(scratch, scaling.scratchpad_desc().get_size());
      candidate.residual_scaling = scaling;
      info.notes.emplace_back("scaled_residual");
    }
  }
  if (desc.residual && desc.residual_scale != 1.0f && f32_compute)
    info.notes.emplace_back("scaled_residual");
  // Without buffers the workspace is exactly the scratchpads'.
  std::size_t offset = reordered || f32_compute ? round_up(scratch) : scratch;
  for (std::size_t r = 0; r < 3; ++r) {
    if (!candidate.reorders[r] && !f32_compute) continue;
    candidate.buffer_offsets[r] = offset;
    offset += round_up(candidate.inner[r].get_size());
  }
  if (f32_compute && desc.bias) {
    candidate.bias_offset = offset;
    offset += round_up(fused_bias_md(desc, DType::f32).get_size());
  }
  if (staging_bytes > 0) {
    candidate.f32_copy_offset = offset;
    offset += round_up(staging_bytes);
  }
  info.workspace_bytes = offset;
  info.supported = true;
  return candidate;
}

Candidate unfused_candidate(const ConvFusedDesc& desc, detail::ConvBackend& conv) {
  Candidate candidate;
  AlgoInfo& info = candidate.info;
  const std::vector<AlgoInfo> convs = conv.list(desc.conv, Direction::fwd);
  const auto heuristic =
      std::find_if(convs.begin(), convs.end(), [](const AlgoInfo& algo) { return algo.supported; });
  if (heuristic == convs.end()) {
    info.id = "unfused:none";
    info.name = "convolution, then the epilogue (no convolution candidate)";
    info.notes = {"unfused"};
    info.reason = "the cpu convolution has no supported candidate for this desc";
    return candidate;
  }
  candidate.conv_id = heuristic->id;
  candidate.conv_workspace = heuristic->workspace_bytes;
  info.id = "unfused:" + heuristic->id;
  info.name = detail::cat(heuristic->name, ", then the epilogue in one pass");
  info.notes = {"unfused"};
  info.notes.insert(info.notes.end(), heuristic->notes.begin(), heuristic->notes.end());
  info.families = heuristic->families;
  info.deterministic = heuristic->deterministic;
  info.supported = true;
  info.workspace_bytes = heuristic->workspace_bytes;
  if (desc.residual) {
    candidate.staging_offset = round_up(heuristic->workspace_bytes);
    info.workspace_bytes =
        candidate.staging_offset +
        static_cast<std::size_t>(desc.dst_dims().product()) * size_of(desc.conv.dtype);
  }
  return candidate;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const ConvFusedDesc& desc,
                                       const std::string& isa, detail::ConvBackend& conv) {
  const ErrorContext context = context_of(desc, "");
  const ConvGeometry g = conv_geometry(desc.conv);
  // Note [f32 compute convolution] (conv_list.cpp): the same convolution on f32 tensors.
  ConvDesc f32_conv = desc.conv;
  f32_conv.dtype = DType::f32;
  const ConvGeometry f32_g = conv_geometry(f32_conv);
  const dnnl::primitive_attr attr = fused_attr(desc);
  std::vector<Candidate> found_candidates;
  std::vector<Candidate> missing;
  std::set<std::string> seen;
  constexpr dnnl::algorithm algorithms[] = {dnnl::algorithm::convolution_direct,
                                            dnnl::algorithm::convolution_winograd,
                                            dnnl::algorithm::convolution_auto};
  for (const dnnl::algorithm algorithm : algorithms) {
    bool found = false;
    bool f32_found = false;
    std::string failure;  // the native strategies' (the f32 ones' is not reported)
    std::string f32_failure;
    for (const FormatStrategy strategy : format_strategies(desc.conv)) {
      const ConvGeometry& inner = strategy.f32_compute ? f32_g : g;
      const StrategyMds mds = strategy_mds(inner, strategy.layouts);
      const memory::desc bias =
          fused_bias_md(desc, strategy.f32_compute ? DType::f32 : desc.conv.dtype);
      dnnl::convolution_forward::primitive_desc pd = create_or_unavailable(
          [&] {
            return dnnl::convolution_forward::primitive_desc(
                engine, dnnl::prop_kind::forward_inference, algorithm, mds.src, mds.weights, bias,
                mds.dst, g.strides, g.dilates, g.padding_l, g.padding_r, attr);
          },
          "fused primitive descriptor", context, strategy.f32_compute ? f32_failure : failure);
      if (!pd) continue;
      (strategy.f32_compute ? f32_found : found) = true;
      do {
        Candidate candidate =
            fused_candidate(engine, pd, algorithm, desc, g, inner, strategy.f32_compute, context);
        if (seen.insert(candidate.info.id).second) found_candidates.push_back(std::move(candidate));
      } while (pd.next_impl());
    }
    if (found || algorithm == dnnl::algorithm::convolution_auto) continue;
    Candidate unavailable;
    AlgoInfo& info = unavailable.info;
    info.id = detail::cat("onednn:unavailable:", algorithm_name(algorithm), ":fused");
    info.name = detail::cat(algorithm_name(algorithm), " with post-ops (no oneDNN implementation)");
    info.notes = {"fused", std::string(algorithm_name(algorithm))};
    if (algorithm == dnnl::algorithm::convolution_winograd) info.families = {"winograd"};
    info.reason = detail::cat(
        onednn_version(), " has no ", algorithm_name(algorithm),
        " implementation of conv fwd with this epilogue (", desc.bias ? "bias, " : "",
        desc.residual ? "sum, " : "", to_string(desc.activation), ") for ",
        to_string(desc.conv.dtype), ' ', to_string(desc.conv.layout), " on cpu isa ", isa, ": ",
        failure, f32_found ? " (its f32-compute candidates run it on f32 copies)" : "");
    missing.push_back(std::move(unavailable));
  }
  // Note [candidate order] (conv_list.cpp), with the unfused candidate just before ref:any.
  std::vector<Candidate> unfused;
  unfused.push_back(unfused_candidate(desc, conv));
  std::vector<Candidate> list = in_priority_order(std::move(found_candidates), std::move(unfused));
  for (Candidate& candidate : missing) list.push_back(std::move(candidate));
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

// The plans check what reaches them from callers below the op layer.
void check_common(const ConvFusedDesc& desc, const detail::ConvFusedArgs& args,
                  const ErrorContext& context) {
  const ConvDesc& conv = desc.conv;
  check_dense(args.src, "src", conv.src_dims(), conv.dtype, conv.layout, context);
  check_dense(args.weights, "weights", conv.weights_dims(), conv.dtype, conv.layout, context);
  check_dense(args.dst, "dst", conv.dst_dims(), conv.dtype, conv.layout, context);
  if (desc.bias) {
    check_dense(args.bias, "bias", conv.bias_dims(), conv.dtype, Layout::channels_first, context);
  }
  if (desc.residual) {
    check_dense(args.residual, "residual", conv.dst_dims(), conv.dtype, conv.layout, context);
  }
}

// ---- the fused plan -----------------------------------------------------------------------------

// Runs one fused candidate: reorders of src and weights (and, computing in f32, the conversion
// of the bias) into the workspace, the residual's copy
// into the dst the convolution accumulates onto (skipped in place, when it is already there),
// the convolution with its post-ops, the reorder of dst back. Every primitive and memory object is
// made here, once; execute() only rebinds data pointers (Note [one stream], runtime.hpp).
class FusedPlan final : public LayerPlan<detail::ConvFusedArgs> {
 public:
  FusedPlan(std::shared_ptr<Runtime> runtime, const ConvFusedDesc& desc, const Candidate& candidate)
      : LayerPlan(candidate.info, context_of(desc, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        offsets_(candidate.buffer_offsets) {
    const ConvGeometry g = conv_geometry(desc.conv);
    ConvDesc f32_conv = desc.conv;
    f32_conv.dtype = DType::f32;
    const ConvGeometry f32_g = conv_geometry(f32_conv);
    const bool f32_compute = candidate.origin.f32_compute;
    const dnnl::engine& engine = runtime_->engine;
    const std::array<const memory::desc*, 3> user = {&g.src, &g.weights, &g.dst};
    const std::array<const memory::desc*, 3> user_f32 = {&f32_g.src, &f32_g.weights, &f32_g.dst};
    const std::array<Dims, 3> dims = {desc.src_dims(), desc.weights_dims(), desc.dst_dims()};
    // f32 compute: a conversion between the call's tensor `tensor` and the f32 copy of role r in
    // the caller's layout (the staging region, or the role's buffer).
    const auto conversion = [&](std::size_t tensor, std::size_t r, bool into_f32,
                                float scale = 1.0f) {
      return Conversion{tensor,
                        candidate.reorders[r] ? candidate.f32_copy_offset : offsets_[r],
                        dims[r].product(),
                        desc.conv.dtype,
                        into_f32,
                        scale};
    };
    dnnl_call(context_, "building the primitives", [&] {
      for (std::size_t r = 0; r < 3; ++r) {
        if (f32_compute) {
          // The caller's tensor is only converted (by the host), never read by a primitive.
          buffers_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
          if (candidate.reorders[r]) {
            user_[r] = dnnl::memory(*user_f32[r], engine, DNNL_MEMORY_NONE);
            user_offsets_[r] = candidate.f32_copy_offset;
          }
        } else if (candidate.reorders[r]) {
          user_[r] = dnnl::memory(*user[r], engine, DNNL_MEMORY_NONE);
          buffers_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
        } else {
          // Same bytes as the caller's layout (same_layout), described as the conv expects.
          user_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
        }
      }
      for (const std::size_t r : {role_src, role_weights}) {
        if (f32_compute) steps_.emplace_back(conversion(r, r, true));
        if (!candidate.reorders[r]) continue;
        steps_.emplace_back(make_step(candidate.reorders[r], {{DNNL_ARG_FROM, user_[r].get()},
                                                              {DNNL_ARG_TO, buffers_[r].get()}}));
      }
      const dnnl::memory& conv_dst = buffers_[role_dst] ? buffers_[role_dst] : user_[role_dst];
      if (desc_.bias) {
        bias_ = dnnl::memory(fused_bias_md(desc_, f32_compute ? DType::f32 : desc_.conv.dtype),
                             engine, DNNL_MEMORY_NONE);
        if (f32_compute) {
          bias_offset_ = candidate.bias_offset;
          steps_.emplace_back(Conversion{tensor_bias, candidate.bias_offset,
                                         desc_.conv.out_channels, desc_.conv.dtype, true});
        }
      }
      if (desc_.residual && f32_compute) {
        // Converted and scaled into the f32 copy of dst, then reordered into dst's buffer.
        steps_.emplace_back(conversion(tensor_residual, role_dst, true, desc_.residual_scale));
        if (candidate.residual_copy) {
          steps_.emplace_back(
              make_step(candidate.residual_copy,
                        {{DNNL_ARG_FROM, user_[role_dst].get()}, {DNNL_ARG_TO, conv_dst.get()}}));
        }
      } else if (desc_.residual) {
        residual_ = dnnl::memory(g.dst, engine, DNNL_MEMORY_NONE);
        // The residual's steps were created for the caller's dst descriptor; a plain dst is
        // described to them as such (the convolution's own descriptor of the same bytes may
        // differ in the strides of size-1 dims).
        if (!candidate.reorders[role_dst])
          dst_plain_ = dnnl::memory(g.dst, engine, DNNL_MEMORY_NONE);
        const dnnl::memory& target = candidate.reorders[role_dst] ? conv_dst : dst_plain_;
        if (candidate.residual_copy) {
          // In place the residual already is dst; a copy is needed only into a reorder buffer.
          const bool skip_in_place = !candidate.reorders[role_dst];
          residual_steps_.emplace_back(
              make_step(candidate.residual_copy,
                        {{DNNL_ARG_FROM, residual_.get()}, {DNNL_ARG_TO, target.get()}}),
              skip_in_place);
        }
        if (candidate.residual_scaling) {
          // From the residual into a plain dst (in place when they are one), or in place on the
          // buffer the copy above filled.
          const dnnl::memory& from = candidate.reorders[role_dst] ? conv_dst : residual_;
          residual_steps_.emplace_back(
              make_step(candidate.residual_scaling,
                        {{DNNL_ARG_SRC, from.get()}, {DNNL_ARG_DST, target.get()}}),
              false);
        }
      }
      std::vector<dnnl_exec_arg_t> conv_args = {
          {DNNL_ARG_SRC, (buffers_[role_src] ? buffers_[role_src] : user_[role_src]).get()},
          {DNNL_ARG_WEIGHTS,
           (buffers_[role_weights] ? buffers_[role_weights] : user_[role_weights]).get()},
          {DNNL_ARG_DST, conv_dst.get()}};
      if (bias_) conv_args.push_back({DNNL_ARG_BIAS, bias_.get()});
      conv_step_ = make_step(candidate.conv, std::move(conv_args));
      if (candidate.reorders[role_dst]) {
        dst_steps_.emplace_back(make_step(
            candidate.reorders[role_dst],
            {{DNNL_ARG_FROM, buffers_[role_dst].get()}, {DNNL_ARG_TO, user_[role_dst].get()}}));
      }
      if (f32_compute) dst_steps_.emplace_back(conversion(role_dst, role_dst, false));
    });
  }

  void execute(const detail::ConvFusedArgs& args, detail::Workspace workspace) override {
    check_common(desc_, args, context_);
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    // Indexed by role_* and tensor_*.
    const std::array<void*, 5> data = {args.src->data(), args.weights->data(), args.dst->data(),
                                       desc_.bias ? args.bias->data() : nullptr,
                                       desc_.residual ? args.residual->data() : nullptr};

    std::lock_guard lock(runtime_->mutex);  // Note [one stream]
    for (std::size_t r = 0; r < 3; ++r) {
      if (user_[r]) bind(user_[r], user_offsets_[r] ? base + *user_offsets_[r] : data[r]);
      if (buffers_[r]) bind(buffers_[r], base + offsets_[r]);
    }
    if (bias_) bind(bias_, bias_offset_ ? base + *bias_offset_ : data[tensor_bias]);
    const dnnl_stream_t stream = runtime_->stream.get();
    run_plan_steps(steps_, stream, base, data, context_);
    if (residual_) {
      bind(residual_, data[tensor_residual]);
      if (dst_plain_) bind(dst_plain_, data[role_dst]);
      const bool in_place = detail::residual_in_place(args);
      for (auto& [step, skip_in_place] : residual_steps_) {
        if (!(skip_in_place && in_place)) run_step(step, stream, base, context_);
      }
    }
    run_step(conv_step_, stream, base, context_);
    run_plan_steps(dst_steps_, stream, base, data, context_);
    wait(stream, context_);
  }

 private:
  Step make_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args) {
    return onednn::make_step(pd, std::move(args), runtime_->engine);
  }

  std::shared_ptr<Runtime> runtime_;
  ConvFusedDesc desc_;
  std::array<std::size_t, 3> offsets_;
  // The caller's src, weights, dst as the primitives read them (null: not read by a primitive),
  // or for an f32-compute candidate the f32 copy in the workspace a reorder reads or writes.
  std::array<dnnl::memory, 3> user_;
  std::array<std::optional<std::size_t>, 3> user_offsets_;  // where such a copy lies
  std::array<dnnl::memory, 3> buffers_;  // the convolution's tensors in the workspace (null: none)
  dnnl::memory bias_;                    // the caller's bias, or its f32 copy in the workspace
  std::optional<std::size_t> bias_offset_;  // where that copy lies (f32 compute)
  dnnl::memory residual_;                   // the caller's residual, in dst's layout
  dnnl::memory dst_plain_;  // the caller's dst as the residual's steps see it (dst not reordered)
  // Before the convolution: input reorders, and for f32 compute the conversions of the inputs,
  // the bias and the residual.
  std::vector<PlanStep> steps_;
  // Copy and scaling of the residual into the dst the convolution accumulates onto; a step with
  // `true` is skipped when the residual is dst itself.
  std::vector<std::pair<Step, bool>> residual_steps_;
  Step conv_step_;
  std::vector<PlanStep> dst_steps_;  // dst's reorder back, its conversion (f32 compute)
};

// ---- the unfused plan ---------------------------------------------------------------------------

class UnfusedPlan final : public LayerPlan<detail::ConvFusedArgs> {
 public:
  UnfusedPlan(const ConvFusedDesc& desc, const Candidate& candidate,
              std::shared_ptr<detail::ConvPlan> conv)
      : LayerPlan(candidate.info, context_of(desc, candidate.info.id)),
        desc_(desc),
        conv_(std::move(conv)),
        staging_offset_(candidate.staging_offset) {
    // Exact for this plan: the staging buffer goes after the convolution plan's own workspace.
    info_.workspace_bytes = conv_->algo().workspace_bytes;
    if (desc.residual) {
      staging_offset_ = round_up(conv_->algo().workspace_bytes);
      info_.workspace_bytes =
          staging_offset_ +
          static_cast<std::size_t>(desc.dst_dims().product()) * size_of(desc.conv.dtype);
    }
  }

  void execute(const detail::ConvFusedArgs& args, detail::Workspace workspace) override {
    check_common(desc_, args, context_);
    check_workspace(workspace);
    // Note [unfused candidates]: with a residual the convolution's output is staged in the
    // workspace, after the convolution's own workspace; the view is made again only when the
    // workspace moves.
    Tensor* conv_out = args.dst;
    if (desc_.residual) {
      void* staging = static_cast<std::byte*>(workspace.data) + staging_offset_;
      if (staged_.data() != staging) {
        staged_ = Tensor::view(staging, desc_.dst_dims(), desc_.conv.dtype, desc_.conv.layout);
      }
      conv_out = &staged_;
    }
    detail::ConvArgs conv_args;
    conv_args.src = args.src, conv_args.weights = args.weights, conv_args.dst = conv_out;
    conv_->execute(conv_args, {workspace.data, desc_.residual ? staging_offset_ : workspace.bytes});
    const bool nothing_to_do =
        !desc_.bias && !desc_.residual && desc_.activation == FusedActivation::identity;
    if (nothing_to_do) return;
    run_epilogue(desc_, conv_out->data(), desc_.bias ? args.bias->data() : nullptr,
                 desc_.conv.dtype, desc_.residual ? args.residual->data() : nullptr,
                 args.dst->data());
  }

 private:
  ConvFusedDesc desc_;
  std::shared_ptr<detail::ConvPlan> conv_;
  std::size_t staging_offset_;
  Tensor staged_;  // the convolution's output in the workspace (desc.residual)
};

// ---- the backend --------------------------------------------------------------------------------

class OneDnnConvFused final : public LayerBackend<ConvFusedDesc, detail::ConvFusedArgs, Candidate> {
 public:
  OneDnnConvFused(std::shared_ptr<Runtime> runtime, detail::ConvBackend& conv)
      : RuntimeLayerBackend(BackendKind::cpu, std::move(runtime)),
        conv_(conv) {}

 protected:
  std::vector<Candidate> enumerate(const ConvFusedDesc& desc, Direction) override {
    return list_candidates(runtime_->engine, desc, runtime_->isa, conv_);
  }
  std::shared_ptr<detail::ConvFusedPlan> build(const ConvFusedDesc& desc, Direction,
                                               const Candidate& candidate) override {
    if (!candidate.conv_id.empty()) {
      return std::make_shared<UnfusedPlan>(
          desc, candidate, conv_.plan(desc.conv, Direction::fwd, candidate.conv_id));
    }
    return std::make_shared<FusedPlan>(runtime_, desc, candidate);
  }

 private:
  detail::ConvBackend& conv_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv_fused>> make_conv_fused_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends& built) {
  return std::make_unique<OneDnnConvFused>(std::move(runtime), built.get<OpKind::conv>(BackendKind::cpu));
}

}  // namespace dnnx::onednn
