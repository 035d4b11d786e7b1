#pragma once
// The softmax case table (shared by the parity, reference, oracle and GPU tests) and the helpers
// that run a case and bound its rounding error.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "support/compare.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct SoftmaxCase {
  std::string name;  ///< unique, usable as a gtest name
  SoftmaxDesc desc;
  float magnitude = 4;  ///< each input is one of `centers` plus uniform in [-magnitude, magnitude)
  std::vector<float> centers{0.0f};  ///< drawn at random for each element

  /// The largest |input| the case can draw (before rounding to a dtype).
  float largest() const;
  /// Whether the forward output is held to Note [large-logit tolerance]: logits clustered near a
  /// center of magnitude 1e3 or more.
  bool clustered_large() const;
};

/// Every combination the table covers: shapes (batch 1, odd C, C = 1, C above the warp kernel's
/// 1024, 1-D to 3-D spatial) x mode x log x layout, in f32; the parity tests run each in every
/// dtype that represents its inputs. Includes "large" rows with logits of magnitude 1e4 and rows
/// of logits clustered near +-1e4 / +-1e5 or mixing such clusters (Note [large-logit rows]).
std::vector<SoftmaxCase> softmax_cases();

/// Whether every input of `c` is finite in `dtype` (f16 stops at 65504, so the 1e5 rows run in
/// f32 and bf16 only).
bool representable(const SoftmaxCase& c, DType dtype);

/// The reported case of Note [large-logit rows] with its exact answer: log-softmax of groups of
/// C = 4r logits base + (c mod 4) is (c mod 4) - 3 - log(r (1 + e^-1 + e^-2 + e^-3)) for any base
/// (-0.4401897 for the largest when r = 1), with base 1e4, 1e5 and -1e5, f32, over groups of 4
/// (as rows and, nchw with two positions, as columns), 12 and 1028 values.
struct LargeLogitExample {
  SoftmaxDesc desc;
  float base = 0;
  Tensor src;
  std::vector<float> expected;  ///< logical order, rounded once to f32
};
std::vector<LargeLogitExample> large_logit_examples();

/// `desc` with another dtype.
SoftmaxDesc with_dtype(SoftmaxDesc desc, DType dtype);

/// The src of a case: per element a center plus uniform noise, rounded to the dtype, dense in
/// the desc's layout, reproducible from the case name.
Tensor softmax_src(const SoftmaxCase& c, const SoftmaxDesc& desc);
/// A diff_dst for the backward pass: uniform in [-1, 1).
Tensor softmax_diff_dst(const SoftmaxCase& c, const SoftmaxDesc& desc);

/// Runs the forward (or the backward on `dst`, `diff_dst`) of `context` into a new NaN-filled
/// output; returns it with the choice that ran.
struct SoftmaxRun {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};
SoftmaxRun run_softmax(Context& context, const SoftmaxDesc& desc, Direction direction,
                       const Tensor& src_or_dst, const Tensor* diff_dst = nullptr);

/// Per-element error scales: forward: |y| (softmax) or |y| + 1 (log-softmax); backward: the
/// formula on absolute values, |y| * (|dy| + sum |dy * y|) or |dy| + exp(y) * sum |dy|. Inputs in
/// logical order; f64 loops (independent of every backend).
std::vector<float> softmax_forward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst);
std::vector<float> softmax_backward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst,
                                          const std::vector<float>& diff_dst);

/// The bound for an output of `dtype` relative to those scales (Note [softmax tolerances]).
Tolerance softmax_tolerance(DType dtype);

/// What a parity test compares an output with: per-element scales and the bound relative to them.
struct SoftmaxBound {
  std::vector<float> scale;
  Tolerance tolerance;
};
/// The f32 ulps (of max(1, |y|) for log-softmax, of |y| for softmax) by which candidate `algo`
/// may miss the exact result on logits of any magnitude (Note [large-logit tolerance]).
double large_logit_ulps(const AlgoInfo& algo);
/// The forward bound of candidate `algo` on case `c` in `desc`'s dtype, from the reference output
/// (logical order): Note [large-logit tolerance] for clustered_large() rows, Note [softmax
/// tolerances] otherwise.
SoftmaxBound softmax_forward_bound(const SoftmaxCase& c, const SoftmaxDesc& desc,
                                   const std::vector<float>& dst, const AlgoInfo& algo);
/// The backward bound (Note [softmax tolerances]) from the forward output and diff_dst.
SoftmaxBound softmax_backward_bound(const SoftmaxDesc& desc, const std::vector<float>& dst,
                                    const std::vector<float>& diff_dst);

/// "softmax fwd <id> | <repro>" for failure messages.
std::string softmax_context(const SoftmaxDesc& desc, Direction direction,
                            const std::string& candidate);

/// A context on `backend` with a private memory-only choice cache and `policy` for the
/// direction's softmax calls.
Context softmax_context_for(BackendKind backend, Direction direction, const AlgoPolicy& policy);

}  // namespace dnnx::test
