#pragma once
// What the cpu backend's layer ops (pool.cpp, activation.cpp, add.cpp, batch_norm.cpp,
// conv_fused.cpp) share: naming oneDNN implementations as candidates, the error context of a
// layer op, the checks and pointer bindings of a plan's execute(), the primitives a plan runs in
// sequence, the f16/bf16 <-> f32 conversions of f32-compute candidates, and the backend class
// itself (a ListedOpBackend on this backend's Runtime).

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
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
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

/// The plain format tag of an N, C, spatial... tensor of `rank` (2 to 5) in `layout`.
dnnl::memory::format_tag activation_tag(int rank, Layout layout);

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

/// The record of formulation `name` when no oneDNN implementation runs it: id
/// "onednn:unavailable:<name>", noted `name`, unsupported for `why` where dnnx rules the
/// formulation out, else for "<oneDNN version> has no implementation of <name> for <problem> on
/// cpu isa <isa>: <oneDNN's failure>" (problem e.g. "add fwd f16 nchw").
AlgoInfo unavailable_info(std::string_view name, const std::string& why, std::string_view problem,
                          std::string_view isa, std::string_view failure);

/// The record of one of dnnx's own kernels: `id`, `name`, supported and deterministic (its
/// reductions follow a fixed order whatever the thread count).
AlgoInfo kernel_info_of(std::string id, std::string name);

/// The note, id suffix and name part of f32-compute candidates (Note [f32 compute]).
inline constexpr std::string_view f32_compute_note = "f32_compute";
inline constexpr std::string_view f32_compute_suffix = ":f32";
inline constexpr std::string_view f32_compute_name = "f32 compute";

/// Whether `info` is an f32-compute candidate (it has the note f32_compute_note).
bool is_f32_compute(const AlgoInfo& info);

/// Where order_supported_first puts a candidate: 0 supported, neither oneDNN's ref:any nor f32
/// compute; 1 supported f32 compute other than ref:any; 2 supported ref:any; 3 unsupported.
int supported_rank(const AlgoInfo& info);

/// Candidate order of most layer ops: supported implementations other than oneDNN's ref:any
/// first (those in the tensors' own data type, then the f32-compute ones), then the supported
/// ref:any ones, then every unsupported one, each group in its listed order (supported_rank);
/// priorities are then the positions. `Candidate` has an AlgoInfo `info`.
template <typename Candidate>
void order_supported_first(std::vector<Candidate>& candidates) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return supported_rank(a.info) < supported_rank(b.info);
                   });
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
}

// ---- errors and plans ---------------------------------------------------------------------------

/// The data of a tensor a plan needs; throws InvalidArgument "<role> is null" when the tensor or
/// its data is null.
void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context);

/// Checks what reaches a plan from callers below the op layer: `tensor` is present, dense in
/// `layout`, of `dims` and `dtype`, on the cpu. Throws InvalidArgument "<role> is <tensor>; this
/// plan takes a dense <dtype>[<dims> <layout>] on cpu" (or "<role> is null").
void check_dense(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                 Layout layout, const ErrorContext& context);

/// check_dense as the listed plans word it, naming the tensor's device: throws
/// InvalidArgument "<role> is <tensor> on <device>; this plan takes a dense <dtype>[<dims>
/// <layout>] on cpu" (or "<role> is null").
void check_dense_on_cpu(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
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

// ---- f32 compute --------------------------------------------------------------------------------

// Note [f32 compute]
// oneDNN 3.2 runs f16 primitives (binary, matmul, reduction, eltwise, ...) only where the CPU has
// avx512_core_fp16 and bf16 ones only where it has avx512_core (both: or avx2_vnni_2); elsewhere,
// e.g. on AVX2 CPUs, it has no implementation at all for them, not even ref:any. Which ones a CPU
// gets is whatever oneDNN answers at listing time. Such an op still runs on oneDNN as an
// f32-compute candidate:
//   1. convert each tensor the primitive reads into an f32 copy in the workspace,
//   2. run the f32 primitive on the copies,
//   3. convert each tensor it writes back into the caller's f16/bf16 tensor.
// A tensor that is read and written (an accumulated dst) is converted both ways; one that is only
// written is not converted in (its previous contents are never read). The copies keep the
// caller's dense layout, so each conversion is elementwise over the buffer: convert() (Note
// [dtype conversions] in convert.cpp; oneDNN's own f16/bf16 reorders are its reference loops on
// these CPUs, some fifty times slower than the f32 primitive). The conversions run inside the
// plan's execute() and the copies count in workspace_bytes, so timing and workspace limits weigh
// them like the primitive itself. The native primitives compute in f32 too and round once to the
// dtype, as these do, so results agree with theirs up to the order of f32 operations.
// The candidates say what they are: id "onednn:<impl>:<formulation>:f32" (f32_compute_suffix),
// note "f32_compute", "f32 compute" in the name; order_supported_first lists them after the
// native non-reference candidates, which win the heuristic wherever the CPU has them.

/// How the f32 primitive of an f32-compute candidate uses one of the caller's tensors.
enum class Access : std::uint8_t {
  read,       ///< converted in only
  write,      ///< converted out only: its previous contents are not read
  read_write  ///< converted in, then out
};

/// One caller's tensor of an f32-compute candidate.
struct ConvertedTensor {
  dnnl::memory::desc user;  ///< as the caller holds it: dense, f16 or bf16
  Access access = Access::read;
};

/// The conversions of one f32-compute candidate (Note [f32 compute]), made when the candidate is
/// listed and shared by its plans. They own the start of the workspace: the f32 copy of each
/// tensor, in the order given, buffer_alignment apart; the f32 primitive's own workspace follows
/// at bytes().
class F32Conversion {
 public:
  /// The conversions of `tensors`. Throws Internal unless each is a dense f16 or bf16 tensor.
  explicit F32Conversion(const std::vector<ConvertedTensor>& tensors);

  /// Bytes at the start of the workspace.
  std::size_t bytes() const { return bytes_; }
  /// Converts the caller's tensors the primitive reads (`data`: every tensor, in the order given
  /// at construction) into their copies in `workspace`.
  void convert_in(std::span<void* const> data, std::byte* workspace) const;
  /// Where tensor `index`'s f32 copy lies in `workspace`: the f32 primitive's argument.
  void* copy(std::size_t index, std::byte* workspace) const;
  /// Converts the copies of the tensors the primitive writes back into `data` (as convert_in);
  /// call once the primitive has finished.
  void convert_out(std::span<void* const> data, std::byte* workspace) const;

 private:
  struct Copy {
    DType dtype;
    std::int64_t count;
    Access access;
    std::size_t offset;
  };
  void check(std::span<void* const> data) const;

  std::vector<Copy> copies_;
  std::size_t bytes_ = 0;
};

/// The same dims and strides as `md` (a plain layout), data type f32.
dnnl::memory::desc as_f32(const dnnl::memory::desc& md);

/// A plan's side of its candidate's F32Conversion: the caller's pointers of the call under way,
/// kept from convert_in to convert_out (plans run one call at a time, Note [one stream] in
/// runtime.hpp). Empty (false) for native candidates.
class F32Conversions {
 public:
  F32Conversions() = default;
  explicit F32Conversions(std::shared_ptr<const F32Conversion> conversion)
      : conversion_(std::move(conversion)) {}

  explicit operator bool() const { return conversion_ != nullptr; }
  /// Bytes at the start of the workspace (0 when empty).
  std::size_t bytes() const { return conversion_ ? conversion_->bytes() : 0; }
  /// F32Conversion::convert_in, keeping `data` for convert_out.
  void convert_in(std::span<void* const> data, std::byte* workspace);
  /// F32Conversion::copy.
  void* copy(std::size_t index, std::byte* workspace) const {
    return conversion_->copy(index, workspace);
  }
  /// convert_in on the tensors `data...` point at, in that order, then each pointer replaced by
  /// its copy.
  void use_copies(std::byte* workspace, std::same_as<void*> auto&... data) {
    convert_in(std::array<void*, sizeof...(data)>{data...}, workspace);
    std::size_t index = 0;
    ((data = copy(index++, workspace)), ...);
  }
  /// Waits until what is queued on `stream` (the primitives writing the copies) has run, then
  /// converts the written copies into the tensors given to convert_in.
  void convert_out(std::byte* workspace, dnnl_stream_t stream, const ErrorContext& context);

 private:
  std::shared_ptr<const F32Conversion> conversion_;
  std::vector<void*> data_;
};

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
/// construct it as RuntimeLayerBackend(BackendKind::cpu, runtime) and give enumerate() and build().
template <typename Desc, typename Args, typename Candidate>
using LayerBackend = detail::RuntimeLayerBackend<Desc, Args, Candidate, Runtime>;

/// The LayerBackend of an op whose candidates `list(engine, desc, direction, isa)` gives and whose
/// plans are Plan(runtime, desc, direction, candidate); an op with plans of other kinds (its own
/// kernels) derives from it and overrides build(), handing the rest to this one.
template <typename Desc, typename Args, typename Candidate,
          std::vector<Candidate> (*list)(const dnnl::engine&, const Desc&, Direction,
                                         const std::string&),
          typename Plan>
class ListedLayerBackend : public LayerBackend<Desc, Args, Candidate> {
 public:
  explicit ListedLayerBackend(std::shared_ptr<Runtime> runtime)
      : LayerBackend<Desc, Args, Candidate>(BackendKind::cpu, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const Desc& desc, Direction direction) override {
    return list(this->runtime_->engine, desc, direction, this->runtime_->isa);
  }
  std::shared_ptr<detail::OpPlan<Args>> build(const Desc& desc, Direction direction,
                                              const Candidate& candidate) override {
    return std::make_shared<Plan>(this->runtime_, desc, direction, candidate);
  }
};

}  // namespace dnnx::onednn
