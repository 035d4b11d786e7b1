#pragma once
// Convolution helpers for tests: random operands, running one direction into a fresh output,
// and the per-element error scale that tolerances are relative to.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "support/compare.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::test {

/// The tensors a direction reads (the others stay null): fwd src + weights, bwd_data
/// diff_dst + weights, bwd_weights src + diff_dst. Dense in desc.layout, desc.dtype.
struct ConvOperands {
  Tensor src;
  Tensor weights;
  Tensor diff_dst;
};

/// Operands of `direction` uniform in [-1, 1) rounded to desc.dtype, reproducible from `seed`.
/// Every backend is handed the same tensors, so both sides see identical inputs.
ConvOperands random_conv_operands(const ConvDesc& desc, Direction direction, std::uint64_t seed);

/// Dims of what `direction` writes: dst, diff_src or diff_weights.
Dims conv_output_dims(const ConvDesc& desc, Direction direction);

/// One direction's output and the choice that produced it.
struct ConvRun {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};

/// Runs `direction` on `context` with its current TuneOptions into a new output tensor that
/// starts as all-NaN (so unwritten elements fail the finiteness check). The operands are host
/// tensors; a context on a GPU runs on copies of them there, and the output is a host tensor.
ConvRun run_conv(Context& context, const ConvDesc& desc, Direction direction,
                 const ConvOperands& operands);

/// For every output element, the sum of |products| that forms it: the same direction on the
/// reference backend in f32 with every operand replaced by its absolute value. Rounding errors
/// of a correct implementation are proportional to this, whatever the cancellation in the sum.
std::vector<float> conv_error_scale(const ConvDesc& desc, Direction direction,
                                    const ConvOperands& operands);

/// The conv error bound of an output of `dtype` relative to conv_error_scale(); see
/// Note [conv tolerances] in conv.cpp.
Tolerance conv_tolerance(DType dtype);
/// conv_tolerance() for one candidate, by its numerical notes: looser for Winograd transforms,
/// and an absolute term from the largest of the output's `scale` for FFTs (Note [conv
/// tolerances]).
Tolerance conv_tolerance(DType dtype, const AlgoInfo& algo, const std::vector<float>& scale);

/// Failure context: direction, candidate id, the desc and its `dnnx` reproduction line.
std::string conv_context(const ConvDesc& desc, Direction direction, std::string_view candidate);

/// What check_listed_candidates() found.
struct CandidateCheck {
  std::size_t listed = 0;   ///< candidates of the kind listed
  std::size_t checked = 0;  ///< of them, run and compared
  double worst = 0;         ///< the largest error seen, as a fraction of the tolerance
};

/// Runs every candidate `context` lists for (desc, direction) whose id `of_kind` accepts, by fixed
/// id, on random operands, against `reference`'s output within `tolerance` of the error scale:
/// each must be supported, run, write a finite output close to the reference's and, where it is
/// deterministic, the same bits again on a second run; failures are gtest failures naming `label`
/// and the candidate. The direction's policy is heuristic again afterwards.
CandidateCheck check_listed_candidates(Context& context, Context& reference, const ConvDesc& desc,
                                       Direction direction, const Tolerance& tolerance,
                                       const std::function<bool(const std::string&)>& of_kind,
                                       const std::string& label);

/// A host emulation of a rewritten convolution (a fold of the input, a run of another conv, an
/// unfold of its output): one per direction for each named desc.
using ConvEmulation =
    std::function<std::vector<float>(const ConvDesc&, Direction, const ConvOperands&)>;

/// Runs `emulate` in every direction of each (name, desc) on random operands against
/// `reference`'s own output: finite and within the f32 tolerance of the error scale; failures are
/// gtest failures naming `label`. Returns the number of runs compared.
std::size_t check_host_emulation(Context& reference,
                                 const std::vector<std::pair<std::string, ConvDesc>>& descs,
                                 const ConvEmulation& emulate, std::string_view label);

}  // namespace dnnx::test
