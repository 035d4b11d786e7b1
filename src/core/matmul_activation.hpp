#pragma once
// The candidates of a matmul with an activation that the cpu and cudnn backends build the same
// way around their plain GEMMs (Note [matmul activation candidates]).
//
// Note [matmul activation candidates]
// A desc with an activation (MatmulDesc::activation) is listed as
//   fused       the backend's own candidates for the desc itself: a GEMM whose epilogue applies
//               the activation (oneDNN's eltwise post-op, cuBLASLt's RELU / GELU epilogues) and,
//               for fwd_training, also writes the state (cuBLASLt's GELU_AUX);
//   <id>+mask   fwd_training with relu: a fused fwd candidate <id>, then the backend's activation
//               pass over dst, which writes the mask (relu(pre) > 0 exactly when pre > 0, Note
//               [matmul aux]) and leaves dst as it is (relu is idempotent);
//   <id>+act    fwd and fwd_training: the backend's candidate <id> of the desc without the
//               activation (the GEMM with alpha, beta and bias), then the activation pass over
//               dst, writing the state for fwd_training;
//   <id>+dact_bgrad
//               bwd_weights of a desc with a bias, where the backend's passes offer it: the pass
//               above, which also writes diff_bias (the column sums of diff_pre), then candidate
//               <id> of the desc without the activation and without the bias: a plain GEMM, which
//               neither reads diff_pre a second time for the sums nor needs a bias-gradient
//               epilogue;
//   <id>+dact   bwd_data and bwd_weights: the backend's pass diff_pre = diff_dst * act'(pre)
//               (act' from the state) into the workspace, then candidate <id> of the desc
//               without the activation on diff_pre in place of diff_dst.
// in that order, supported ones first. cuBLASLt's backward epilogues (DRELU, DGELU and their
// _BGRAD forms) apply the derivative to a GEMM's *output*: they fuse the activation of the layer
// *before* a matmul into that matmul's bwd_data, not this op's own activation, whose derivative
// applies to the backward GEMMs' *input*; so the backward of this op is the pass and a plain GEMM
// on every backend (docs/ops/matmul.md says what a fusion across layers would need).

#include <dnnx/ops/matmul.hpp>

#include "core/matmul_args.hpp"
#include "core/op_backend.hpp"

#include <memory>
#include <optional>
#include <string>

namespace dnnx::detail {

/// A backend's elementwise passes for a matmul's activation, on the backend's device (queued on
/// its stream where it has one). Pointers are to dense row-major data of the desc's dst dims, in
/// its dtype; `aux` is Note [matmul aux]'s state.
class MatmulActivationPasses {
 public:
  virtual ~MatmulActivationPasses() = default;
  /// dst = act(dst) in place; with a non-null `aux`, first the state of dst's values as pre.
  virtual void forward(const MatmulDesc& desc, void* dst, void* aux,
                       const ErrorContext& context) = 0;
  /// gelu_tanh only: dst = act(pre), where `pre` is the state (the GEMM wrote it, Note [gelu
  /// state first]).
  virtual void forward_from_pre(const MatmulDesc& desc, const void* pre, void* dst,
                                const ErrorContext& context) = 0;
  /// diff_pre = diff_dst * act'(pre), act' from `aux`, rounded once to the dtype.
  virtual void backward(const MatmulDesc& desc, const void* diff_dst, const void* aux,
                        void* diff_pre, const ErrorContext& context) = 0;
  /// Bytes of scratch backward_bias needs for `desc`, or nullopt where the backend has no such
  /// pass (its +dact_bgrad candidates are then not listed).
  virtual std::optional<std::size_t> backward_bias_scratch(const MatmulDesc& desc) const {
    return std::nullopt;
  }
  /// backward, and with it diff_bias = the column sums of diff_pre as stored (over every row of
  /// every product) + desc.beta * diff_bias; `scratch` holds backward_bias_scratch() bytes.
  virtual void backward_bias(const MatmulDesc& desc, const void* diff_dst, const void* aux,
                             void* diff_pre, void* diff_bias, void* scratch,
                             const ErrorContext& context);
  /// Where the passes run and the state must live.
  virtual Device device() const = 0;
  /// What the pass is, for candidate names ("dnnx activation kernel", ...).
  virtual std::string name() const = 0;
};

/// `inner` (the backend's GEMM candidates; for a desc with an activation, only its fused ones)
/// with the candidates of Note [matmul activation candidates] added through `passes`. A desc
/// without an activation goes to `inner` as it is; its fwd_training is one unsupported candidate
/// "<prefix>:no_activation".
std::unique_ptr<OpBackend<MatmulDesc, MatmulArgs>> with_activation_passes(
    BackendKind backend, std::string prefix,
    std::unique_ptr<OpBackend<MatmulDesc, MatmulArgs>> inner,
    std::shared_ptr<MatmulActivationPasses> passes);

}  // namespace dnnx::detail
