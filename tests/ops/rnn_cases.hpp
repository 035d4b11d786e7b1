#pragma once
// The recurrent layer's case table and the helpers its tests share (rnn_test.cpp on the
// reference backend, tests/backends/cudnn_rnn_test.cpp on a GPU, bench/rnn_bench.cpp): host
// inputs drawn from the case's name, and one training step (every direction) through the public
// API on any context.

#include <dnnx/dnnx.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dnnx::test {

/// One row of the table: a name and the desc (dtype f32; tests set theirs).
struct RnnCase {
  std::string name;
  RnnDesc desc;
  std::vector<std::int32_t> lengths;  ///< with desc.variable_lengths
};

/// A case of `name` (variable lengths when `lengths` is not empty), dtype f32, no dropout.
RnnCase rnn_case(std::string name, RnnCell cell, std::int64_t seq, std::int64_t batch,
                 std::int64_t input, std::int64_t hidden, std::int64_t layers = 1,
                 bool bidirectional = false, bool batch_first = false,
                 std::vector<std::int32_t> lengths = {}, bool bias = true);

/// Cells x layers x directions x batch_first x variable lengths, odd sizes, seq length 1, batch 1.
std::vector<RnnCase> rnn_cases();

/// Cases with dropout between layers (the backend tests': the reference computes the same masks):
/// lstm 3 layers bidirectional, gru 2 layers batch_first, lstm bidirectional 2 layers with
/// variable lengths.
std::vector<RnnCase> rnn_dropout_cases();

/// The inputs of one call, on the host: src, weights (uniform in +-1/sqrt(H), PyTorch's range),
/// hx, cx (lstm), diff_dst, diff_hy, diff_cy (lstm), a previous diff_weights for accumulation,
/// lengths (variable lengths), all drawn from `seed` in desc.dtype.
struct RnnInputs {
  Tensor src, weights, hx, cx, diff_dst, diff_hy, diff_cy, diff_weights0, lengths;
};
RnnInputs rnn_inputs(const RnnDesc& desc, const std::vector<std::int32_t>& lengths,
                     std::uint64_t seed);

/// Every output of one training step and one inference forward, on the host, by name: "dst",
/// "hy", "cy" (lstm) of the training forward; "dst_inference", "hy_inference", "cy_inference"
/// of the inference forward; "diff_src", "diff_hx", "diff_cx" (lstm); "diff_weights"
/// (overwritten) and "diff_weights_acc" (accumulated onto diff_weights0). Tensors go to
/// `context`'s device and back. The choices that ran, by direction name. With weight_shift > 0,
/// weights, diff_weights and the accumulated diff_weights are views starting weight_shift
/// elements into buffers of their own (a caller's tensor at any element alignment).
struct RnnStep {
  std::map<std::string, Tensor> outputs;
  std::map<std::string, std::string> ran;
};
RnnStep run_rnn_step(Context& context, const RnnDesc& desc, const RnnInputs& inputs,
                     Generator generator = Generator(), std::int64_t weight_shift = 0);

/// The weights cache (Note [rnn weights version]): one weights tensor on `context`'s device,
/// calls on it in this order, each an inference forward ("dst_<name>") and a training forward
/// and backward w.r.t. the data ("diff_src_<name>"), forward and backward with the same
/// weights_version:
///   "first":     `first` written, version 11
///   "stale":     `second` written in place, version 11 again (a plan that converts the weights and
///                keeps them gives first's results: it was promised nothing changed)
///   "second":    version 12 (second's results)
///   "unknown":   `first` written back, version 0 (first's results: converted anew)
/// Host copies of the outputs by name.
std::map<std::string, Tensor> run_rnn_weight_versions(Context& context, const RnnDesc& desc,
                                                      const RnnInputs& inputs, const Tensor& first,
                                                      const Tensor& second);

/// The per-element scale the backend tests compare an output against the reference with:
/// max(|expected|, the RMS of `expected`), so that elements small by cancellation (gradients summed
/// over steps and sequences) are held to the error of the sums they come from.
std::vector<float> rnn_scale_of(const std::vector<float>& expected);

}  // namespace dnnx::test
