#include "support/conv.hpp"

#include "support/gpu.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <sstream>

namespace dnnx::test {

ConvOperands random_conv_operands(const ConvDesc& desc, Direction direction,
                                  std::uint64_t seed) {
  // Distinct seeds per operand: equal src and diff_dst values would hide transposition bugs.
  ConvOperands operands;
  if (direction != Direction::bwd_data) {
    operands.src = random_tensor(desc.src_dims(), desc.dtype, desc.layout, seed ^ 0x5352ull);
  }
  if (direction != Direction::bwd_weights) {
    operands.weights =
        random_tensor(desc.weights_dims(), desc.dtype, desc.layout, seed ^ 0x5745ull);
  }
  if (direction != Direction::fwd) {
    operands.diff_dst = random_tensor(desc.dst_dims(), desc.dtype, desc.layout, seed ^ 0x4444ull);
  }
  return operands;
}

Dims conv_output_dims(const ConvDesc& desc, Direction direction) {
  switch (direction) {
    case Direction::fwd:
      return desc.dst_dims();
    case Direction::bwd_data:
      return desc.src_dims();
    case Direction::bwd_weights:
      return desc.weights_dims();
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return {};
}

ConvRun run_conv(Context& context, const ConvDesc& desc, Direction direction,
                 const ConvOperands& host_operands) {
  // A context on another device than the host gets copies of the operands and of the NaN output
  // there, and the output comes back.
  const bool on_host = context.device() == Device::cpu();
  const auto there = [&](const Tensor& host) {
    return on_host || host.is_null() ? host : device_copy(host, context);
  };
  const ConvOperands operands{there(host_operands.src), there(host_operands.weights),
                              there(host_operands.diff_dst)};
  ConvRun run{there(nan_tensor(conv_output_dims(desc, direction), desc.dtype, desc.layout)),
              nullptr};
  switch (direction) {
    case Direction::fwd:
      run.choice = conv_fwd(context, desc, operands.src, operands.weights, run.output);
      break;
    case Direction::bwd_data:
      run.choice = conv_bwd_data(context, desc, operands.diff_dst, operands.weights, run.output);
      break;
    case Direction::bwd_weights:
      run.choice = conv_bwd_weights(context, desc, operands.src, operands.diff_dst, run.output);
      break;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  if (!on_host) run.output = host_copy_of(run.output);
  return run;
}

std::vector<float> conv_error_scale(const ConvDesc& desc, Direction direction,
                                    const ConvOperands& operands) {
  // f16/bf16 values are exact in f32, so the f32 desc sees the same magnitudes.
  ConvDesc wide = desc;
  wide.dtype = DType::f32;
  ConvOperands magnitudes;
  if (!operands.src.is_null()) magnitudes.src = abs_tensor(operands.src, wide.dtype, wide.layout);
  if (!operands.weights.is_null()) {
    magnitudes.weights = abs_tensor(operands.weights, wide.dtype, wide.layout);
  }
  if (!operands.diff_dst.is_null()) {
    magnitudes.diff_dst = abs_tensor(operands.diff_dst, wide.dtype, wide.layout);
  }
  Context reference(BackendKind::reference);
  return run_conv(reference, wide, direction, magnitudes).output.to_f32();
}

// Note [conv tolerances]: errors are bounded relative to scale = sum |x||w| of the element, so
// the bound holds whatever the cancellation in the sum. f32: the reference accumulates in f64 and
// rounds once (<= 2^-24 scale); an implementation accumulating K products in f32 errs by about
// sqrt(K) 2^-24 scale in practice (K 2^-24 in the worst case), and winograd's transforms add a
// few ulps. Measured on oneDNN 3.2 over the whole table (K up to 3136), the worst candidate
// used 2.4e-7 (4 ulps); 1e-5 (~170 ulps) leaves room for winograd and longer sums while still
// catching a wrong tap, which costs O(1/K) of the scale. f16/bf16 are looser because both
// sides round their output to the dtype (2^-11 resp. 2^-8 relative each): two roundings plus the
// f32 accumulation make 4 units of the dtype's rounding. f16's absolute term covers rounding in
// its subnormal range (spacing 2^-24).
// Two families of candidates err otherwise, and the bound of a candidate noted so (AlgoInfo's
// "winograd", "fft") is wider. cuDNN's f32 Winograd (its engine and legacy algorithms) transforms
// tiles by matrices whose entries are not all powers of two: measured on an H200, up to 2.7e-5
// of an element's scale on the parity table's small depthwise and padded cases, so 1e-4 there.
// An FFT's error is spread over the whole output, of the order of the rounding of its largest
// terms: an element with a small scale beside large ones (a corner of a strided bwd_data, 1e-4
// of the largest) was off by 64x its own bound, so an FFT also gets an absolute term of the
// relative bound times the output's largest scale. Both still catch a wrong tap, which costs
// O(1/K) of an element's scale.
Tolerance conv_tolerance(DType dtype, const AlgoInfo& algo, const std::vector<float>& scale) {
  Tolerance tolerance = conv_tolerance(dtype);
  if (algo.has_note("winograd")) tolerance.rel = std::max(tolerance.rel, 1e-4);
  if (algo.has_note("fft") && !scale.empty()) {
    const double largest = *std::max_element(scale.begin(), scale.end());
    tolerance.abs = std::max(tolerance.abs, tolerance.rel * largest);
  }
  return tolerance;
}

Tolerance conv_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return {1e-5, 0.0};
    case DType::f16:
      return {4 * 0x1.0p-11, 0x1.0p-24};
    case DType::bf16:
      return {4 * 0x1.0p-8, 0.0};
    case DType::i32:
    case DType::i64: break;  // no convolution takes integers
  }
  return {};
}

std::string conv_context(const ConvDesc& desc, Direction direction, std::string_view candidate) {
  std::ostringstream out;
  out << "conv " << to_string(direction) << ", candidate " << candidate << "\n  desc: " << desc
      << "\n  repro: " << desc.repro(direction);
  return out.str();
}

CandidateCheck check_listed_candidates(Context& context, Context& reference, const ConvDesc& desc,
                                       Direction direction, const Tolerance& tolerance,
                                       const std::function<bool(const std::string&)>& of_kind,
                                       const std::string& label) {
  CandidateCheck check;
  const ConvOperands operands = random_conv_operands(desc, direction, seed_from(desc.key()));
  const std::vector<float> expected = run_conv(reference, desc, direction, operands).output.to_f32();
  const std::vector<float> scale = conv_error_scale(desc, direction, operands);
  const Dims dims = conv_output_dims(desc, direction);
  for (const AlgoInfo& info : conv_list(context, desc, direction)) {
    if (!of_kind(info.id)) continue;
    ++check.listed;
    const std::string where = label + conv_context(desc, direction, info.id);
    if (!info.supported) {
      ADD_FAILURE() << info.reason << "\n" << where;
      continue;
    }
    context.tune().policy(direction) = AlgoPolicy::fixed(info.id);
    try {
      const ConvRun first = run_conv(context, desc, direction, operands);
      EXPECT_EQ(first.choice->algo.id, info.id) << where;
      const std::vector<float> actual = first.output.to_f32();
      EXPECT_TRUE(all_finite(actual, dims, "output", where));
      double ratio = 0;
      EXPECT_TRUE(close_within_scale(actual, expected, scale, dims, tolerance, "output", where,
                                     &ratio));
      check.worst = std::max(check.worst, ratio);
      if (info.deterministic) {
        EXPECT_TRUE(bitwise_equal(first.output,
                                  run_conv(context, desc, direction, operands).output,
                                  "second run", where));
      }
    } catch (const Error& error) {
      ADD_FAILURE() << "listed as supported but failed: " << error.what() << "\n" << where;
      continue;
    }
    ++check.checked;
  }
  context.tune().policy(direction) = AlgoPolicy::heuristic();
  return check;
}

std::size_t check_host_emulation(Context& reference,
                                 const std::vector<std::pair<std::string, ConvDesc>>& descs,
                                 const ConvEmulation& emulate, std::string_view label) {
  std::size_t checked = 0;
  for (const auto& [name, desc] : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::string where = name + ": " + conv_context(desc, direction, label);
      const ConvOperands operands = random_conv_operands(desc, direction, seed_from(desc.key()));
      const std::vector<float> expected =
          run_conv(reference, desc, direction, operands).output.to_f32();
      const Dims dims = conv_output_dims(desc, direction);
      const std::vector<float> actual = emulate(desc, direction, operands);
      EXPECT_TRUE(all_finite(actual, dims, "output", where));
      EXPECT_TRUE(close_within_scale(actual, expected, conv_error_scale(desc, direction, operands),
                                     dims, conv_tolerance(DType::f32), "output", where));
      ++checked;
    }
  }
  return checked;
}

}  // namespace dnnx::test
