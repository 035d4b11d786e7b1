#pragma once
// What the cpu backend's layer ops (pool.cpp, activation.cpp, add.cpp, batch_norm.cpp,
// conv_fused.cpp) share: naming oneDNN implementations as candidates, the error context of a
// layer op, the checks and pointer bindings of a plan's execute(), the primitives a plan runs in
// sequence, and the backend class itself (a ListedOpBackend on this backend's Runtime).

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/onednn/check.hpp"
#include "backends/onednn/runtime.hpp"
#include "core/layer_backend.hpp"
#include "core/op_backend.hpp"
#include "core/strings.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::onednn {

// ---- candidates ---------------------------------------------------------------------------------

/// Alignment, in bytes, of every region a plan carves out of its workspace.
inline constexpr std::size_t buffer_alignment = 64;

/// `bytes` rounded up to a multiple of buffer_alignment.
std::size_t round_up(std::size_t bytes);

/// "oneDNN <major>.<minor>.<patch>" of the library loaded, for the reasons of unavailable
/// candidates.
std::string onednn_version();

/// `text` with every character outside [A-Za-z0-9_:+.-] replaced by '_': candidate ids travel
/// through command lines and cache files.
std::string sanitize(std::string_view text);

/// Whether `part` occurs in `text`.
bool contains(std::string_view text, std::string_view part);

/// The first of `isas` that the implementation name `impl` mentions (its ISA note), or empty.
std::string_view isa_of(std::string_view impl, std::initializer_list<std::string_view> isas);

/// Primitive attributes with a user scratchpad: plans give oneDNN a region of the call's workspace
/// (so that workspace_bytes is exact) instead of letting it allocate per call.
dnnl::primitive_attr user_scratchpad();

/// Which oneDNN statuses mean "no implementation" to create_or_unavailable.
enum class Unavailable : bool {
  unimplemented,            ///< dnnl_unimplemented only
  unimplemented_or_invalid  ///< also dnnl_invalid_arguments, which some primitives report for
                            ///< parameters they cannot run
};

/// The primitive descriptor `create()` makes (positioned at oneDNN's first implementation), or a
/// null one, with oneDNN's message in `failure`, when oneDNN has no implementation (`unavailable`
/// says which statuses mean that). Any other oneDNN error throws: "creating the <what>: <oneDNN's
/// message>" with `context`.
template <typename Create>
auto create_or_unavailable(Create&& create, std::string_view what, const ErrorContext& context,
                           std::string& failure,
                           Unavailable unavailable = Unavailable::unimplemented)
    -> decltype(create()) {
  try {
    return create();
  } catch (const dnnl::error& error) {
    const bool none = error.status == dnnl_unimplemented ||
                      (unavailable == Unavailable::unimplemented_or_invalid &&
                       error.status == dnnl_invalid_arguments);
    if (!none)
      raise_dnnl(error.status, detail::cat("creating the ", what, ": ", error.what()), context);
    failure = error.what();
    return {};
  }
}

/// A snapshot of `pd` at its current implementation (next_impl() changes the object in place).
dnnl::primitive_desc clone(const dnnl::primitive_desc& pd, const ErrorContext& context);

/// The record of a candidate that cannot run: `id`, `name`, unsupported for `reason`.
AlgoInfo unsupported_info(std::string id, std::string name, std::string reason);

/// Candidate order of most layer ops: supported implementations other than oneDNN's ref:any
/// first, then the supported ref:any ones, then every unsupported one, each group in its listed
/// order; priorities are then the positions. `Candidate` has an AlgoInfo `info`.
template <typename Candidate>
void order_supported_first(std::vector<Candidate>& candidates) {
  std::stable_partition(candidates.begin(), candidates.end(), [](const Candidate& c) {
    return c.info.supported && !c.info.id.starts_with("onednn:ref:");
  });
  std::stable_partition(candidates.begin(), candidates.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
}

// ---- errors and plans ---------------------------------------------------------------------------

/// The context of errors about one layer op call on the cpu backend (detail::layer_context).
inline ErrorContext layer_context(std::string_view op, Direction direction, std::string repro,
                                  std::string implementation) {
  return detail::layer_context("cpu", op, direction, std::move(repro), std::move(implementation));
}

/// The data of a tensor a plan needs; throws InvalidArgument "<role> is null" when the tensor or
/// its data is null.
void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context);

/// Checks what reaches a plan from callers below the op layer: `tensor` is present, dense in
/// `layout`, of `dims` and `dtype`, on the cpu. Throws InvalidArgument "<role> is <tensor>; this
/// plan takes a dense <dtype>[<dims> <layout>] on cpu" (or "<role> is null").
void check_dense(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                 Layout layout, const ErrorContext& context);

/// Throws InvalidArgument "workspace has <n> bytes; this candidate needs <needed>" when the
/// workspace is smaller than `needed` bytes, or null while `needed` > 0.
void check_workspace(const detail::Workspace& workspace, std::size_t needed,
                     const ErrorContext& context);

/// Points `memory` at `data` (a plan's memory objects are made once with no data and rebound per
/// call, Note [one stream] in runtime.hpp).
void bind(const dnnl::memory& memory, void* data, const ErrorContext& context);

/// One primitive of a plan, with its arguments (handles of memory objects the plan owns) and its
/// scratchpad memory (null when the primitive needs none).
struct Step {
  dnnl::primitive primitive;
  std::vector<dnnl_exec_arg_t> args;
  dnnl::memory scratchpad;
};

/// The step of `pd` with `args`, plus a scratchpad argument when `pd` needs one (bound at run
/// time, see run_step). Call under dnnl_call: oneDNN's errors throw dnnl::error here.
Step make_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args,
               const dnnl::engine& engine);

/// Runs `step` on `stream` (without waiting), its scratchpad bound at `scratchpad`.
void run_step(Step& step, dnnl_stream_t stream, void* scratchpad, const ErrorContext& context);

/// Waits until everything queued on `stream` has run.
void wait(dnnl_stream_t stream, const ErrorContext& context);

/// A layer op's plan on this backend: its record and error context (detail::LayerPlanBase) and
/// the checks and bindings of its execute().
template <typename Args>
class LayerPlan : public detail::LayerPlanBase<Args> {
 protected:
  using detail::LayerPlanBase<Args>::LayerPlanBase;
  using detail::LayerPlanBase<Args>::info_;
  using detail::LayerPlanBase<Args>::context_;

  void* data_of(const Tensor* tensor, const char* role) const {
    return onednn::data_of(tensor, role, context_);
  }
  void bind(const dnnl::memory& memory, void* data) const { onednn::bind(memory, data, context_); }
  void check_workspace(const detail::Workspace& workspace) const {
    onednn::check_workspace(workspace, info_.workspace_bytes, context_);
  }
};

// ---- the backend --------------------------------------------------------------------------------

/// A layer op's backend on one Runtime: the candidates of a (desc, direction) are listed once and
/// kept, plans are built once (ListedOpBackend); errors name backend "cpu" and the op. Subclasses
/// construct it as RuntimeLayerBackend("cpu", op, runtime) and give enumerate() and build().
template <typename Desc, typename Args, typename Candidate>
using LayerBackend = detail::RuntimeLayerBackend<Desc, Args, Candidate, Runtime>;

}  // namespace dnnx::onednn
