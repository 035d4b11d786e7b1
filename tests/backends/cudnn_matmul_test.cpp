// The cudnn backend's matrix multiply on a GPU (label "gpu"): every listed supported candidate
// (cuBLASLt configurations with and without fused epilogues, cublas:gemm_ex) of every direction
// against the reference backend, on odd shapes, a linear layer with bias, and a batch in every
// transpose and broadcast combination, in f32, f16 and bf16, with beta 0 (on a NaN-filled output,
// which must not be read) and beta 1; bitwise determinism where claimed; unsupported candidates
// only for the reasons of Note [expected unsupported cudnn matmul]; the listing the same from a
// second backend instance; the heuristic pick, a fixed id, an unknown id and an unsupported one;
// an exhaustive search. With relu and gelu epilogues (Note [matmul activation candidates]): every
// candidate of fwd, fwd_training (dst, and the state: relu's mask bits against dst, gelu's pre
// against the reference's, which checks cuBLASLt's GELU aux layout) and both backward passes,
// the backward compared with the reference run on the GPU's own state. Every test skips with
// the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/matmul.hpp>

#include "core/matmul_args.hpp"
#include "ops/context_state.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::test {
namespace {

constexpr Layout rows_layout = Layout::channels_first;  // row-major at every rank

Context context_with(BackendKind backend, Direction direction, AlgoPolicy policy) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune().policy(OpKind::matmul, direction) = std::move(policy);
  return context;
}

Tensor to_device(const Tensor& host, Context& context) {
  Tensor device = Tensor::empty(host.dims(), host.dtype(), rows_layout, context.allocator());
  copy(host, device);
  return device;
}

Tensor to_host(const Tensor& device) {
  Tensor host = Tensor::empty(device.dims(), device.dtype(), rows_layout);
  copy(device, host);
  return host;
}

// ---- cases -------------------------------------------------------------------------------------

struct Case {
  std::string name;
  MatmulDesc desc;
  bool both_betas = true;  // also beta = 1 (the large case runs beta = 0 only)
};

MatmulDesc desc_of(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool ta,
                   bool tb, bool broadcast, bool bias) {
  MatmulDesc d;
  d.batch = batch, d.m = m, d.n = n, d.k = k;
  d.transpose_a = ta, d.transpose_b = tb, d.broadcast_b = broadcast, d.bias = bias;
  return d;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"1x1x1", desc_of(1, 1, 1, 1, false, false, false, false)});
  out.push_back({"1x1x1_bias", desc_of(1, 1, 1, 1, false, false, false, true)});
  out.push_back({"7x13x5", desc_of(1, 7, 13, 5, false, false, false, false)});
  MatmulDesc scaled = desc_of(1, 7, 13, 5, true, true, false, true);
  scaled.alpha = 0.5f;
  out.push_back({"7x13x5_tt_bias_alpha", scaled});
  out.push_back({"linear_64x1000x2048_bias", MatmulDesc::linear(64, 2048, 1000, true), false});
  // A small product over a long k, which cuBLASLt splits: its split-K variants run too (Note
  // [split-K variants] in matmul.cpp).
  out.push_back(
      {"split_k_64x192x8192", desc_of(1, 64, 192, 8192, true, false, false, false), false});
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const bool broadcast : {false, true}) {
        std::string name = "batch_3x17x9x33";
        name += ta ? "_ta" : "";
        name += tb ? "_tb" : "";
        name += broadcast ? "_shared_b" : "";
        name += "_bias";
        out.push_back({name, desc_of(3, 17, 9, 33, ta, tb, broadcast, true)});
      }
      // a shared by the batch: its gradient is one GEMM per product into the one diff_a.
      MatmulDesc shared_a = desc_of(3, 17, 9, 33, ta, tb, false, true);
      shared_a.broadcast_a = true;
      out.push_back({std::string("batch_3x17x9x33") + (ta ? "_ta" : "") + (tb ? "_tb" : "") +
                         "_shared_a_bias",
                     shared_a});
    }
  }
  return out;
}

// ---- running a direction -----------------------------------------------------------------------

// Host tensors of one call: the inputs, and the outputs' previous contents.
struct Operands {
  Tensor a, b, bias, diff_dst;  // inputs (bias: fwd only)
  Tensor out, out_bias;         // dst / diff_a / diff_b, and diff_bias (bwd_weights with bias)
};

Dims out_dims(const MatmulDesc& d, Direction direction) {
  switch (direction) {
    case Direction::bwd_data: return d.a_dims();
    case Direction::bwd_weights: return d.b_dims();
    default: return d.dst_dims();
  }
}

bool has_out_bias(const MatmulDesc& d, Direction direction) {
  return d.bias && direction == Direction::bwd_weights;
}

Operands operands_of(const std::string& name, const MatmulDesc& d, Direction direction) {
  const std::uint64_t seed = seed_from(name + " " + std::string(to_string(d.dtype)) + " " +
                                       std::string(to_string(direction)));
  Operands o;
  o.a = random_tensor(d.a_dims(), d.dtype, rows_layout, seed + 1);
  o.b = random_tensor(d.b_dims(), d.dtype, rows_layout, seed + 2);
  if (d.bias) o.bias = random_tensor(d.bias_dims(), d.dtype, rows_layout, seed + 3);
  o.diff_dst = random_tensor(d.dst_dims(), d.dtype, rows_layout, seed + 4);
  // beta = 0: the output must not be read, NaN says if it was.
  o.out = d.beta == 0.0f ? nan_tensor(out_dims(d, direction), d.dtype, rows_layout)
                         : random_tensor(out_dims(d, direction), d.dtype, rows_layout, seed + 5);
  if (has_out_bias(d, direction))
    o.out_bias = d.beta == 0.0f ? nan_tensor(d.bias_dims(), d.dtype, rows_layout)
                                : random_tensor(d.bias_dims(), d.dtype, rows_layout, seed + 6);
  return o;
}

// |x| of every operand (the reference run on these gives each output's error scale).
Operands abs_of(const Operands& o, const MatmulDesc& d) {
  Operands out;
  auto abs = [&](const Tensor& t) {
    return t.is_null() ? Tensor() : abs_tensor(t, d.dtype, rows_layout);
  };
  out.a = abs(o.a), out.b = abs(o.b), out.bias = abs(o.bias), out.diff_dst = abs(o.diff_dst);
  out.out = abs(o.out), out.out_bias = abs(o.out_bias);
  return out;
}

struct Result {
  std::shared_ptr<const Choice> choice;
  Tensor out, out_bias;  // on the host
};

Result run(Context& context, const MatmulDesc& d, Direction direction, const Operands& h) {
  Result result;
  Tensor out = to_device(h.out, context);
  Tensor out_bias = h.out_bias.is_null() ? Tensor() : to_device(h.out_bias, context);
  switch (direction) {
    case Direction::fwd: {
      const Tensor a = to_device(h.a, context);
      const Tensor b = to_device(h.b, context);
      const Tensor bias = d.bias ? to_device(h.bias, context) : Tensor();
      result.choice = matmul_fwd(context, d, a, b, bias, out);
      break;
    }
    case Direction::bwd_data: {
      const Tensor g = to_device(h.diff_dst, context);
      const Tensor b = to_device(h.b, context);
      result.choice = matmul_bwd_data(context, d, g, b, out);
      break;
    }
    default: {
      const Tensor a = to_device(h.a, context);
      const Tensor g = to_device(h.diff_dst, context);
      result.choice = matmul_bwd_weights(context, d, a, g, out, out_bias);
      break;
    }
  }
  result.out = to_host(out);
  if (!out_bias.is_null()) result.out_bias = to_host(out_bias);
  return result;
}

// One run of `plan` on device copies of `h` (a workspace of its own), its output on the host.
Tensor run_plan(Context& context, detail::OpPlan<detail::MatmulArgs>& plan, const MatmulDesc& d,
                Direction direction, const Operands& h) {
  const Tensor a = to_device(h.a, context);
  const Tensor b = to_device(h.b, context);
  const Tensor bias = d.bias ? to_device(h.bias, context) : Tensor();
  const Tensor diff_dst = to_device(h.diff_dst, context);
  Tensor out = to_device(h.out, context);
  Tensor out_bias = h.out_bias.is_null() ? Tensor() : to_device(h.out_bias, context);
  detail::MatmulArgs args;
  switch (direction) {
    case Direction::fwd:
      args.a = &a, args.b = &b, args.dst = &out;
      if (d.bias) args.bias = &bias;
      break;
    case Direction::bwd_data: args.diff_dst = &diff_dst, args.b = &b, args.diff_a = &out; break;
    default:
      args.a = &a, args.diff_dst = &diff_dst, args.diff_b = &out;
      if (!out_bias.is_null()) args.diff_bias = &out_bias;
      break;
  }
  const std::size_t bytes = plan.algo().workspace_bytes;
  const Tensor workspace = Tensor::empty(Dims{static_cast<std::int64_t>(bytes / 4) + 1}, DType::f32,
                                         rows_layout, context.allocator());
  plan.execute(args, {const_cast<void*>(workspace.data()), bytes});
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return to_host(out);
}

// ---- tolerances --------------------------------------------------------------------------------

// Note [matmul tolerance]
// Each element is compared within rel * scale + abs, scale being the same computation on |x|
// (|alpha| sum |a||b| + |beta| |old| + |bias|, or for diff_bias sum |diff_dst| + |beta| |old|).
// rel is three roundings to the storage type (the reference's one, and the GPU's GEMM result and
// its separate bias add) plus (terms + 2) f32 additions at 2^-23 each: twice f32's unit roundoff,
// since tensor cores' adders may truncate rather than round. TF32 (only with DNNX_ALLOW_TF32, on
// the candidates noted "tf32") rounds each input to 11 significant bits, 2^-10 relative per
// product: loosened by that.
Tolerance tolerance_for(DType dtype, std::int64_t terms, bool tf32) {
  double unit = std::ldexp(1.0, -24);
  if (dtype == DType::f16) unit = std::ldexp(1.0, -11);
  if (dtype == DType::bf16) unit = std::ldexp(1.0, -8);
  Tolerance t;
  t.rel = 3 * unit + static_cast<double>(terms + 2) * std::ldexp(1.0, -23);
  if (tf32) t.rel += std::ldexp(1.0, -10);
  t.abs = dtype == DType::f16 ? std::ldexp(1.0, -24) : 1e-30;  // f16's subnormal step
  return t;
}

// The length of each output element's sum.
std::int64_t terms_of(const MatmulDesc& d, Direction direction) {
  switch (direction) {
    case Direction::bwd_data: return d.broadcast_a ? d.batch * d.n : d.n;
    case Direction::bwd_weights: return d.broadcast_b ? d.batch * d.m : d.m;
    default: return d.k;
  }
}

// Note [expected unsupported cudnn matmul]: what a listed candidate may be refused for. cuBLASLt
// decides which configurations and epilogues exist for a problem on a GPU, so the test asks the
// listing rather than naming them: each refusal must be one of src/backends/cudnn/matmul.cpp's.
bool expected_unsupported(const AlgoInfo& algo) {
  for (const char* reason :
       {"cublasLtMatmulAlgoCheck rejects", "cublasLtMatmulAlgoGetHeuristic offers no",
        "the fused bias gradient", "accumulates in f16", "bytes of workspace",
        "adds its split-K partial sums", "the GELU aux epilogue's leading dimension",
        "activation epilogues are offered for beta 0"})
    if (algo.reason.find(reason) != std::string::npos) return true;
  return false;
}

// Totals printed at the end: what the GPU ran.
std::atomic<long> runs_compared{0};
std::atomic<long> runs_bitwise{0};
std::atomic<long> unsupported_listed{0};
// Runs per note, for the kinds of candidate worth counting.
constexpr const char* counted_notes[] = {"heuristic",
                                         "enumerated",
                                         "cublas",
                                         "fused_bias",
                                         "bias_kernel",
                                         "fused_bias_gradient",
                                         "bias_gradient_kernel",
                                         "split_k",
                                         "split_k_variant",
                                         "tensor_cores",
                                         "tf32"};
std::map<std::string, long> runs_by_note;

class Totals : public ::testing::Environment {
 public:
  void TearDown() override {
    std::cout << "[ matmul   ] " << runs_compared << " candidate runs compared with the reference, "
              << runs_bitwise << " determinism reruns bitwise equal checks, " << unsupported_listed
              << " unsupported listings\n[ matmul   ] runs by note:";
    for (const auto& [note, runs] : runs_by_note) std::cout << ' ' << note << '=' << runs;
    std::cout << '\n';
  }
};
[[maybe_unused]] const auto* const totals = ::testing::AddGlobalTestEnvironment(new Totals);

// ---- parity ------------------------------------------------------------------------------------

struct Param {
  Case c;
  DType dtype;
  float beta;
  Direction direction;
};

void PrintTo(const Param& p, std::ostream* out) {
  *out << p.c.name << " " << to_string(p.dtype) << " beta " << p.beta << " "
       << to_string(p.direction);
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const Case& c : cases()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const float beta : {0.0f, 1.0f}) {
        if (beta != 0.0f && !c.both_betas) continue;
        for (const Direction direction :
             {Direction::fwd, Direction::bwd_data, Direction::bwd_weights})
          out.push_back({c, dtype, beta, direction});
      }
    }
  }
  return out;
}

class CudnnMatmulParity : public ::testing::TestWithParam<Param> {};

TEST_P(CudnnMatmulParity, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  const Param& param = GetParam();
  MatmulDesc desc = param.c.desc;
  desc.dtype = param.dtype;
  desc.beta = param.beta;
  const Direction direction = param.direction;
  const Operands host = operands_of(param.c.name, desc, direction);

  Context reference = context_with(BackendKind::reference, direction, AlgoPolicy::heuristic());
  const Result expected = run(reference, desc, direction, host);
  MatmulDesc abs_desc = desc;
  abs_desc.alpha = std::fabs(desc.alpha);
  abs_desc.beta = std::fabs(desc.beta);
  const Result scale = run(reference, abs_desc, direction, abs_of(host, desc));

  Context lister(BackendKind::cudnn);
  lister.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<AlgoInfo> algos = matmul_list(lister, desc, direction);
  ASSERT_FALSE(algos.empty()) << desc.repro(direction);
  int ran = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string where = desc.repro(direction) + " [" + algo.id + "]";
    if (!algo.supported) {
      ++unsupported_listed;
      EXPECT_TRUE(expected_unsupported(algo)) << algo.reason << "\n  " << where;
      continue;
    }
    Context context = context_with(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
    const Result first = run(context, desc, direction, host);
    ASSERT_EQ(first.choice->algo.id, algo.id) << where;
    const bool tf32 = algo.has_note("tf32");
    ASSERT_TRUE(all_finite(first.out, "output", where));
    EXPECT_TRUE(close_within_scale(
        first.out.to_f32(), expected.out.to_f32(), scale.out.to_f32(), first.out.dims(),
        tolerance_for(desc.dtype, terms_of(desc, direction), tf32), "output", where));
    if (has_out_bias(desc, direction)) {
      ASSERT_TRUE(all_finite(first.out_bias, "diff_bias", where));
      EXPECT_TRUE(close_within_scale(first.out_bias.to_f32(), expected.out_bias.to_f32(),
                                     scale.out_bias.to_f32(), first.out_bias.dims(),
                                     tolerance_for(desc.dtype, desc.batch * desc.m, false),
                                     "diff_bias", where));
    }
    ++runs_compared;
    for (const char* note : counted_notes)
      if (algo.has_note(note)) ++runs_by_note[note];
    if (algo.deterministic) {
      const Result second = run(context, desc, direction, host);
      EXPECT_TRUE(bitwise_equal(first.out, second.out, "output of two runs", where));
      if (has_out_bias(desc, direction)) {
        EXPECT_TRUE(bitwise_equal(first.out_bias, second.out_bias, "diff_bias of two runs", where));
      }
      ++runs_bitwise;
    }
    ++ran;
  }
  // cublas:gemm_ex runs every desc, and cuBLASLt's heuristic offers at least one configuration.
  EXPECT_GE(ran, 2) << desc.repro(direction);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudnnMatmulParity, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const Param& p = info.param;
                           std::string name = p.c.name + "_" + std::string(to_string(p.dtype)) +
                                              (p.beta == 0.0f ? "_beta0_" : "_beta1_") +
                                              std::string(to_string(p.direction));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// ---- activation epilogues ----------------------------------------------------------------------

struct ActParam {
  std::string name;
  MatmulDesc desc;
  Direction direction;
};

void PrintTo(const ActParam& p, std::ostream* out) {
  *out << p.name << " " << to_string(p.desc.dtype) << " " << to_string(p.direction);
}

std::vector<ActParam> act_params() {
  std::vector<std::pair<std::string, MatmulDesc>> descs;
  MatmulDesc relu = MatmulDesc::linear(48, 72, 40, true);  // n a multiple of 8
  relu.activation = MatmulActivation::relu;
  descs.emplace_back("linear_48x40x72_relu", relu);
  MatmulDesc gelu = MatmulDesc::linear(33, 29, 13, true);  // n not: no fused GELU aux
  gelu.activation = MatmulActivation::gelu_tanh;
  descs.emplace_back("linear_33x13x29_gelu", gelu);
  MatmulDesc batched = desc_of(3, 17, 16, 9, true, false, false, false);
  batched.activation = MatmulActivation::gelu_tanh;
  batched.beta = 1;  // dst's old contents before the activation; the gradients accumulate
  descs.emplace_back("batch_3x17x16x9_ta_gelu_beta1", batched);
  MatmulDesc plain = desc_of(1, 7, 13, 5, false, false, false, false);
  plain.activation = MatmulActivation::relu;
  plain.alpha = 0.5f;
  descs.emplace_back("7x13x5_relu_alpha", plain);
  // Rows enough for the pass that also sums the bias gradient to split them into chunks (Note
  // [activation derivative with the bias gradient]), in 16-byte groups and not.
  MatmulDesc tall = MatmulDesc::linear(300, 24, 40, true);
  tall.activation = MatmulActivation::gelu_tanh;
  tall.beta = 1;
  descs.emplace_back("linear_300x40x24_gelu_beta1", tall);
  MatmulDesc odd = MatmulDesc::linear(257, 5, 13, true);
  odd.activation = MatmulActivation::relu;
  descs.emplace_back("linear_257x13x5_relu", odd);
  std::vector<ActParam> out;
  for (const auto& [name, desc] : descs) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const OpDirection& direction : op_info(OpKind::matmul).directions) {
        MatmulDesc d = desc;
        d.dtype = dtype;
        out.push_back({name, d, direction.direction});
      }
    }
  }
  return out;
}

// The state's bytes, copied to the host.
std::vector<unsigned char> state_bytes(const SavedState& state) {
  std::vector<unsigned char> bytes(state.bytes());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(bytes.data(), state.data(), bytes.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return bytes;
}

// One call of `direction`; the backward reads `state`, the training forward fills it.
Result run_act(Context& context, const MatmulDesc& d, Direction direction, const Operands& h,
               SavedState& state) {
  const bool device = context.device() != Device::cpu();
  const auto put = [&](const Tensor& t) { return device ? to_device(t, context) : t; };
  const auto get = [&](const Tensor& t) { return device ? to_host(t) : t; };
  Result result;
  // The outputs are always copies: with beta != 0 the call reads and overwrites them, and the
  // operands are shared by every run of the test.
  Tensor out = to_device(h.out, context);
  Tensor out_bias = h.out_bias.is_null() ? Tensor() : to_device(h.out_bias, context);
  switch (direction) {
    case Direction::fwd:
    case Direction::fwd_training: {
      const Tensor a = put(h.a), b = put(h.b);
      const Tensor bias = d.bias ? put(h.bias) : Tensor();
      result.choice = direction == Direction::fwd
                          ? matmul_fwd(context, d, a, b, bias, out)
                          : matmul_fwd_training(context, d, a, b, bias, out, state);
      break;
    }
    case Direction::bwd_data:
      result.choice = matmul_bwd_data(context, d, put(h.diff_dst), put(h.b), out, state);
      break;
    default:
      result.choice =
          matmul_bwd_weights(context, d, put(h.a), put(h.diff_dst), out, out_bias, state);
  }
  result.out = get(out);
  if (!out_bias.is_null()) result.out_bias = get(out_bias);
  return result;
}

class CudnnMatmulActivation : public ::testing::TestWithParam<ActParam> {};

TEST_P(CudnnMatmulActivation, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  const MatmulDesc desc = GetParam().desc;
  const Direction direction = GetParam().direction;
  const Operands host = operands_of(GetParam().name, desc, direction);
  const bool training = direction == Direction::fwd_training;
  const bool backward = direction == Direction::bwd_data || direction == Direction::bwd_weights;

  // The state a backward reads: the GPU's heuristic training forward's, and the reference's
  // (filled on the host, then given the GPU's bytes) for the expected result.
  Context gpu_forward(BackendKind::cudnn);
  Context reference(BackendKind::reference);
  SavedState device_state, host_state;
  if (backward) {
    Operands fwd = operands_of(GetParam().name, desc, Direction::fwd_training);
    run_act(gpu_forward, desc, Direction::fwd_training, fwd, device_state);
    run_act(reference, desc, Direction::fwd_training, fwd, host_state);
    const std::vector<unsigned char> bytes = state_bytes(device_state);
    ASSERT_EQ(bytes.size(), host_state.bytes());
    std::copy(bytes.begin(), bytes.end(), static_cast<unsigned char*>(host_state.data()));
  }
  SavedState expected_state;
  const Result expected =
      run_act(reference, desc, direction, host, backward ? host_state : expected_state);
  MatmulDesc abs_desc = desc;
  abs_desc.alpha = std::fabs(desc.alpha);
  abs_desc.beta = std::fabs(desc.beta);
  abs_desc.activation = MatmulActivation::none;
  const Direction scale_direction = training ? Direction::fwd : direction;
  const Result scale = run(reference, abs_desc, scale_direction, abs_of(host, desc));

  Context lister(BackendKind::cudnn);
  const std::vector<AlgoInfo> algos = matmul_list(lister, desc, direction);
  ASSERT_FALSE(algos.empty()) << desc.repro(direction);
  int ran = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string where = desc.repro(direction) + " [" + algo.id + "]";
    if (!algo.supported) {
      ++unsupported_listed;
      EXPECT_TRUE(expected_unsupported(algo)) << algo.reason << "\n  " << where;
      continue;
    }
    Context context = context_with(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
    SavedState state;
    const Result got = run_act(context, desc, direction, host, backward ? device_state : state);
    ASSERT_EQ(got.choice->algo.id, algo.id) << where;
    // Note [matmul tolerance], times 3 for the activation (its slope at most 1.13, and pre or
    // diff_dst * act'(pre) rounded to the dtype on the unfused paths).
    Tolerance tolerance =
        tolerance_for(desc.dtype, terms_of(desc, direction), algo.has_note("tf32"));
    tolerance.rel *= 3;
    ASSERT_TRUE(all_finite(got.out, "output", where));
    EXPECT_TRUE(close_within_scale(got.out.to_f32(), expected.out.to_f32(), scale.out.to_f32(),
                                   got.out.dims(), tolerance, "output", where));
    if (has_out_bias(desc, direction)) {
      Tolerance bias_tolerance = tolerance_for(desc.dtype, desc.batch * desc.m, false);
      bias_tolerance.rel *= 3;
      EXPECT_TRUE(close_within_scale(got.out_bias.to_f32(), expected.out_bias.to_f32(),
                                     scale.out_bias.to_f32(), got.out_bias.dims(), bias_tolerance,
                                     "diff_bias", where));
    }
    if (training) {
      ASSERT_EQ(state.bytes(), algo.saved_state_bytes) << where;
      const std::vector<unsigned char> bytes = state_bytes(state);
      const std::vector<float> dst = got.out.to_f32();
      if (desc.activation == MatmulActivation::relu) {
        // Note [matmul aux]: bit i of the mask is dst[i] > 0.
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool bit = ((bytes[i / 8] >> (i % 8)) & 1) != 0;
          ASSERT_EQ(bit, dst[i] > 0) << "mask bit " << i << " of dst " << dst[i] << "\n  " << where;
        }
      } else {
        Tensor pre = Tensor::empty(desc.dst_dims(), desc.dtype, rows_layout);
        std::copy(bytes.begin(), bytes.end(), static_cast<unsigned char*>(pre.data()));
        const Tensor want =
            Tensor::view(expected_state.data(), desc.dst_dims(), desc.dtype, rows_layout);
        Tolerance pre_tolerance = tolerance_for(desc.dtype, desc.k, algo.has_note("tf32"));
        EXPECT_TRUE(close_within_scale(pre.to_f32(), want.to_f32(), scale.out.to_f32(), pre.dims(),
                                       pre_tolerance, "the GELU state (pre)", where));
      }
    }
    ++runs_compared;
    if (algo.deterministic) {
      SavedState again;
      const Result second =
          run_act(context, desc, direction, host, backward ? device_state : again);
      EXPECT_TRUE(bitwise_equal(got.out, second.out, "output of two runs", where));
      ++runs_bitwise;
    }
    ++ran;
  }
  // The +act / +dact candidates run every desc (cublas:gemm_ex under them).
  EXPECT_GE(ran, 1) << desc.repro(direction);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudnnMatmulActivation, ::testing::ValuesIn(act_params()),
                         [](const ::testing::TestParamInfo<ActParam>& info) {
                           const ActParam& p = info.param;
                           std::string name = p.name + "_" + std::string(to_string(p.desc.dtype)) +
                                              "_" + std::string(to_string(p.direction));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The fused cuBLASLt epilogues are listed where cuBLASLt offers them: the relu forward on a
// linear layer in f16 (CUBLASLT_EPILOGUE_RELU_BIAS), and the GELU aux for n % 8 == 0.
TEST(CudnnMatmul, ActivationEpiloguesAreListed) {
  DNNX_REQUIRE_GPU();
  Context context(BackendKind::cudnn);
  MatmulDesc d = MatmulDesc::linear(64, 256, 128, true, DType::f16);
  d.activation = MatmulActivation::relu;
  const auto ids = [&](Direction direction) {
    std::string all;
    for (const AlgoInfo& algo : matmul_list(context, d, direction))
      if (algo.supported) all += algo.id + " ";
    return all;
  };
  EXPECT_NE(ids(Direction::fwd).find(":relu_bias "), std::string::npos) << ids(Direction::fwd);
  EXPECT_NE(ids(Direction::fwd_training).find(":relu_bias+mask"), std::string::npos)
      << ids(Direction::fwd_training);
  d.activation = MatmulActivation::gelu_tanh;
  EXPECT_NE(ids(Direction::fwd_training).find(":gelu_aux_bias "), std::string::npos)
      << ids(Direction::fwd_training);
  EXPECT_NE(ids(Direction::bwd_weights).find("+dact"), std::string::npos);
}

// ---- listing and selection ---------------------------------------------------------------------

TEST(CudnnMatmul, ListingNamesEveryKindOfCandidate) {
  DNNX_REQUIRE_GPU();
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  const MatmulDesc linear = MatmulDesc::linear(64, 2048, 1000, true, DType::f16);
  const auto fwd = matmul_list(context, linear, Direction::fwd);
  ASSERT_FALSE(fwd.empty());
  EXPECT_EQ(fwd.front().id.rfind("cublaslt:a", 0), 0u) << fwd.front().id;
  EXPECT_TRUE(fwd.front().supported) << fwd.front().reason;
  bool gemm_ex = false;
  for (const AlgoInfo& algo : fwd) {
    for (const char ch : algo.id) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) ||
                  std::string("_:+.-").find(ch) != std::string::npos)
          << algo.id;
    }
    if (algo.id == "cublas:gemm_ex") {
      gemm_ex = true;
      EXPECT_TRUE(algo.supported);
      EXPECT_TRUE(algo.deterministic);
      EXPECT_TRUE(algo.has_note("bias_kernel"));
    } else if (algo.supported) {
      // The fused bias epilogue, or the bias kernel when cuBLASLt has none for the problem.
      EXPECT_TRUE(algo.has_note("fused_bias") || algo.has_note("bias_kernel")) << algo.id;
    }
  }
  EXPECT_TRUE(gemm_ex);
  int heuristic = 0, enumerated = 0, refused = 0;
  for (const AlgoInfo& algo : fwd) {
    if (!algo.supported) {
      ++refused;
    } else {
      heuristic += algo.has_note("heuristic") ? 1 : 0;
      enumerated += algo.has_note("enumerated") ? 1 : 0;
    }
  }
  std::cout << "[ matmul   ] f16 linear 64x2048->1000 fwd: " << fwd.size() << " candidates ("
            << heuristic << " from the heuristic, " << enumerated << " enumerated, " << refused
            << " unsupported), first " << fwd.front().id << " (" << fwd.front().name << ")\n";
  for (const AlgoInfo& algo : fwd) {
    if (!algo.supported) {
      std::cout << "[ matmul   ]   e.g. unsupported " << algo.id << ": " << algo.reason << '\n';
      break;
    }
  }

  // Without bias and in f32, some GEMM needs no workspace (Note [matmul workspace]).
  MatmulDesc plain = desc_of(1, 7, 13, 5, false, false, false, false);
  const auto algos = matmul_list(context, plain, Direction::fwd);
  EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& algo) {
    return algo.supported && algo.workspace_bytes == 0;
  }));
}

// The same ids, in the same order, from a second backend instance (a context on another stream
// builds its own): the listing does not depend on the instance, as persisted choices need.
TEST(CudnnMatmul, ListingIsStableAcrossBackendInstances) {
  DNNX_REQUIRE_GPU();
  Context first(BackendKind::cudnn);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // The stream is never destroyed: the backend instance on it lives until the process ends.
  Context second = first.with_stream(stream);
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    MatmulDesc desc = desc_of(3, 17, 9, 33, true, false, true, true);
    desc.dtype = dtype;
    for (const Direction direction :
         {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const auto a = matmul_list(first, desc, direction);
      const auto b = matmul_list(second, desc, direction);
      ASSERT_EQ(a.size(), b.size()) << desc.repro(direction);
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].id, b[i].id) << desc.repro(direction);
        EXPECT_EQ(a[i].supported, b[i].supported) << a[i].id;
        EXPECT_EQ(a[i].workspace_bytes, b[i].workspace_bytes) << a[i].id;
        EXPECT_EQ(a[i].deterministic, b[i].deterministic) << a[i].id;
      }
      // And twice from one instance.
      const auto again = matmul_list(first, desc, direction);
      ASSERT_EQ(again.size(), a.size());
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(again[i].id, a[i].id);
    }
  }
}

// Note [split-K variants]: a product of small output and long k lists variants of the heuristic's
// split-K configurations, each naming a heuristic seed listed before it and differing from it in
// the split count alone, after every other cuBLASLt candidate; DNNX_CUDNN_KNOB_SEARCH=off lists
// the rest unchanged and no variant. (The parity case split_k_64x192x8192 runs them.)
TEST(CudnnMatmul, SplitKVariantsChangeTheCountOfAHeuristicSeed) {
  DNNX_REQUIRE_GPU();
  // A context of its own stream has a backend of its own, which reads the settings when it is made
  // (the streams live as long as the process, as Context::with_stream requires).
  const auto context_on_own_stream = [](const char* knob_search) {
    const test::ScopedEnv knobs("DNNX_CUDNN_KNOB_SEARCH", knob_search);
    cudaStream_t stream = nullptr;
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    Context context = Context(BackendKind::cudnn).with_stream(stream);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    return context;
  };
  // The weight gradient of MobileNetV2's b5.project as a product: 64 x 192 over 25,088 rows.
  for (const DType dtype : {DType::f16, DType::f32}) {
    MatmulDesc desc = desc_of(1, 64, 192, 25088, true, false, false, false);
    desc.dtype = dtype;
    SCOPED_TRACE(desc.repro(Direction::fwd));
    Context top = context_on_own_stream(nullptr);
    Context off = context_on_own_stream("off");
    const auto listed = matmul_list(top, desc, Direction::fwd);
    const auto plain = matmul_list(off, desc, Direction::fwd);
    // The k field of an id, and the id with it blanked.
    const auto split_of = [](const std::string& id) {
      const auto at = id.find(":k");
      return std::stoi(id.substr(at + 2, id.find(':', at + 1) - at - 2));
    };
    const auto family_of = [](const std::string& id) {
      const auto at = id.find(":k");
      return id.substr(0, at) + id.substr(id.find(':', at + 1));
    };
    std::size_t variants = 0, last_other = 0, first_variant = listed.size();
    for (std::size_t i = 0; i < listed.size(); ++i) {
      const AlgoInfo& algo = listed[i];
      if (!algo.has_note("split_k_variant")) {
        if (algo.id.rfind("cublaslt:", 0) == 0 && algo.supported) last_other = i;
        EXPECT_TRUE(algo.variant_of.empty()) << algo.id;
        continue;
      }
      SCOPED_TRACE(algo.id);
      ++variants;
      first_variant = std::min(first_variant, i);
      EXPECT_TRUE(algo.supported) << algo.reason;
      const auto seed = std::find_if(listed.begin(), listed.begin() + static_cast<long>(i),
                                     [&](const AlgoInfo& a) { return a.id == algo.variant_of; });
      ASSERT_NE(seed, listed.begin() + static_cast<long>(i)) << "seed " << algo.variant_of;
      EXPECT_TRUE(seed->has_note("heuristic") && seed->has_note("split_k")) << seed->id;
      EXPECT_EQ(family_of(algo.id), family_of(seed->id));
      const int k = split_of(algo.id), seed_k = split_of(seed->id);
      EXPECT_NE(k, seed_k);
      EXPECT_TRUE(2 * k >= seed_k && k <= 2 * seed_k) << k << " around " << seed_k;
    }
    EXPECT_GT(variants, 0u) << "no split-K variant for a 64 x 192 product over 25,088 rows";
    EXPECT_LT(last_other, first_variant);
    // Without the knob search: the same list less the variants, in the same order.
    std::vector<std::string> without;
    for (const AlgoInfo& algo : listed)
      if (!algo.has_note("split_k_variant")) without.push_back(algo.id);
    std::vector<std::string> off_ids;
    for (const AlgoInfo& algo : plain) off_ids.push_back(algo.id);
    EXPECT_EQ(off_ids, without);
    std::cout << "[ matmul   ] " << to_string(dtype) << " 64x192 over 25088: " << variants
              << " split-K variants of " << listed.size() << " candidates\n";
  }
}

// Note [matmul descriptions]: every id a listing gives, described by a backend instance that
// never listed the desc, is the listing's candidate (support, workspace, determinism; an id
// with bias goes through the listing), and the plan built from the description computes what
// the listing's plan computes, bit for bit where both are deterministic.
TEST(CudnnMatmul, AListedIdIsDescribedAloneAsTheListingHasIt) {
  DNNX_REQUIRE_GPU();
  long described = 0;
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const bool bias : {false, true}) {
      MatmulDesc desc = desc_of(3, 17, 9, 33, false, true, true, bias);
      desc.dtype = dtype;
      for (const Direction direction :
           {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
        SCOPED_TRACE(desc.repro(direction));
        Context lister(BackendKind::cudnn);
        auto& listing = detail::state_of(lister).backend().op<OpKind::matmul>();
        cudaStream_t stream = nullptr;  // never destroyed: the backend on it lives on
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        Context describer = lister.with_stream(stream);
        auto& backend = detail::state_of(describer).backend().op<OpKind::matmul>();
        ASSERT_NE(&listing, &backend);
        const Operands h = operands_of("describe", desc, direction);
        for (const AlgoInfo& info : listing.list(desc, direction)) {
          SCOPED_TRACE(info.id);
          const std::optional<AlgoInfo> alone =
              backend.describe_candidate(desc, direction, info.id);
          ASSERT_TRUE(alone.has_value());
          EXPECT_EQ(alone->supported, info.supported) << alone->reason;
          if (!info.supported) continue;
          ++described;
          EXPECT_EQ(alone->id, info.id);
          EXPECT_EQ(alone->workspace_bytes, info.workspace_bytes);
          EXPECT_EQ(alone->deterministic, info.deterministic);
          const Tensor listed_out =
              run_plan(lister, *listing.plan(desc, direction, info.id), desc, direction, h);
          const Tensor alone_out =
              run_plan(describer, *backend.plan(desc, direction, info.id), desc, direction, h);
          if (info.deterministic) {
            EXPECT_TRUE(bitwise_equal(listed_out, alone_out, "output", info.id));
          }
        }
        for (const char* id : {"cublaslt:a1:t2", "cublaslt:a99999:t0:s0:k1:r0:w0:c0:i0:x0",
                               "cublaslt:ax:t0:s0:k1:r0:w0:c0:i0:x0", "no_such"}) {
          std::optional<AlgoInfo> alone;
          ASSERT_NO_THROW(alone = backend.describe_candidate(desc, direction, id)) << id;
          EXPECT_TRUE(!alone || !alone->supported) << id << " described supported";
        }
      }
    }
  }
  std::cout << "[ cudnn    ] described " << described << " supported matmul ids alone\n";
}

TEST(CudnnMatmul, HeuristicPicksTheFirstSupportedCandidate) {
  DNNX_REQUIRE_GPU();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    Context context = context_with(BackendKind::cudnn, direction, AlgoPolicy::heuristic());
    const MatmulDesc desc = MatmulDesc::linear(64, 2048, 1000, true, DType::bf16);
    const auto algos = matmul_list(context, desc, direction);
    const auto first = std::find_if(algos.begin(), algos.end(),
                                    [](const AlgoInfo& algo) { return algo.supported; });
    ASSERT_NE(first, algos.end());
    EXPECT_EQ(matmul_select(context, desc, direction)->algo.id, first->id);
  }
}

TEST(CudnnMatmul, FixedIdRunsThatCandidate) {
  DNNX_REQUIRE_GPU();
  const MatmulDesc desc = desc_of(1, 7, 13, 5, false, true, false, true);
  for (const char* id : {"cublas:gemm_ex"}) {
    Context context = context_with(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(id));
    EXPECT_EQ(matmul_select(context, desc, Direction::fwd)->algo.id, id);
  }
  // The last supported cuBLASLt configuration, never the heuristic's pick.
  Context lister(BackendKind::cudnn);
  const auto algos = matmul_list(lister, desc, Direction::fwd);
  std::string last;
  for (const AlgoInfo& algo : algos)
    if (algo.supported && algo.id.rfind("cublaslt:", 0) == 0) last = algo.id;
  ASSERT_FALSE(last.empty());
  Context context = context_with(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(last));
  EXPECT_EQ(matmul_select(context, desc, Direction::fwd)->algo.id, last);
}

TEST(CudnnMatmul, UnknownAndUnsupportedIdsAreErrors) {
  DNNX_REQUIRE_GPU();
  MatmulDesc desc = MatmulDesc::linear(64, 2048, 1000, true, DType::f16);
  {
    Context context =
        context_with(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed("cublaslt:a99999"));
    try {
      matmul_select(context, desc, Direction::fwd);
      ADD_FAILURE() << "an unknown id was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
      EXPECT_NE(std::string(error.what()).find("cublaslt:a99999"), std::string::npos)
          << error.what();
    }
  }
  // beta 1 with bias: the fused bias gradient is listed, refused (Note [matmul bias]).
  desc.beta = 1.0f;
  Context lister(BackendKind::cudnn);
  const auto algos = matmul_list(lister, desc, Direction::bwd_weights);
  const auto refused = std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& algo) {
    return !algo.supported && algo.reason.find("overwrites diff_bias") != std::string::npos;
  });
  ASSERT_NE(refused, algos.end());
  Context context =
      context_with(BackendKind::cudnn, Direction::bwd_weights, AlgoPolicy::fixed(refused->id));
  try {
    matmul_select(context, desc, Direction::bwd_weights);
    ADD_FAILURE() << "an unsupported id was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    EXPECT_NE(std::string(error.what()).find("overwrites diff_bias"), std::string::npos)
        << error.what();
  }
}

TEST(CudnnMatmul, ExhaustiveTimesTheCandidates) {
  DNNX_REQUIRE_GPU();
  const MatmulDesc desc = MatmulDesc::linear(64, 2048, 1000, true, DType::f16);
  Context context = context_with(BackendKind::cudnn, Direction::fwd, AlgoPolicy::exhaustive());
  const auto choice = matmul_select(context, desc, Direction::fwd);
  EXPECT_GT(choice->candidates_timed, 1);
  EXPECT_TRUE(std::isfinite(choice->time_ms));
  std::cout << "[ matmul   ] exhaustive f16 linear fwd: " << choice->algo.id << " "
            << choice->time_ms << " ms, " << choice->candidates_timed << " timed\n";
}

// Note [graph replay]: a plan called again on the same tensors and workspace replays the graph
// captured from its launches (the GEMMs, the f32 accumulator's store, dnnx's bias kernels). Every
// supported candidate runs five times on one set of device tensors, the output poisoned before
// each call (beta 0) so that a replay that writes nothing fails, and `a` or diff_dst given new
// values before the fourth call so that a replay of stale inputs fails too.
TEST(CudnnMatmul, GraphReplayRecomputesEveryCall) {
  DNNX_REQUIRE_GPU();
  struct ReplayCase {
    std::string name;
    MatmulDesc desc;
    Direction direction;
  };
  MatmulDesc shared_a = desc_of(3, 17, 9, 33, false, false, false, true);
  shared_a.broadcast_a = true;  // bwd_data: one GEMM per product summed into the one diff_a
  shared_a.dtype = DType::f16;  // ... through the f32 accumulator
  const std::vector<ReplayCase> replay_cases{
      {"linear_64x1000x2048_bias", MatmulDesc::linear(64, 2048, 1000, true, DType::f16),
       Direction::bwd_weights},
      {"linear_64x1000x2048_bias", MatmulDesc::linear(64, 2048, 1000, true, DType::f32),
       Direction::fwd},
      {"batch_3x17x9x33_shared_a_bias", shared_a, Direction::bwd_data},
  };
  for (const ReplayCase& c : replay_cases) {
    const MatmulDesc& desc = c.desc;
    const Direction direction = c.direction;
    const Operands host = operands_of(c.name, desc, direction);
    const Operands other = operands_of(c.name + " changed", desc, direction);
    Operands changed = host;  // new a and diff_dst, the rest as before
    changed.a = other.a, changed.diff_dst = other.diff_dst;
    Context reference = context_with(BackendKind::reference, direction, AlgoPolicy::heuristic());
    MatmulDesc abs_desc = desc;
    abs_desc.alpha = std::fabs(desc.alpha);
    const Result expected[] = {run(reference, desc, direction, host),
                               run(reference, desc, direction, changed)};
    const Result scale[] = {run(reference, abs_desc, direction, abs_of(host, desc)),
                            run(reference, abs_desc, direction, abs_of(changed, desc))};
    const Tolerance tolerance = tolerance_for(desc.dtype, terms_of(desc, direction), false);

    Context lister(BackendKind::cudnn);
    lister.set_choice_cache(std::make_shared<ChoiceCache>());
    int ran = 0;
    for (const AlgoInfo& algo : matmul_list(lister, desc, direction)) {
      if (!algo.supported || algo.has_note("tf32")) continue;
      Context context = context_with(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
      Tensor a = to_device(host.a, context);
      const Tensor b = to_device(host.b, context);
      const Tensor bias = desc.bias ? to_device(host.bias, context) : Tensor();
      Tensor diff_dst = to_device(host.diff_dst, context);
      Tensor out = to_device(host.out, context);
      Tensor out_bias = host.out_bias.is_null() ? Tensor() : to_device(host.out_bias, context);
      for (int call = 0; call < 5; ++call) {
        const int inputs = call < 3 ? 0 : 1;
        if (call == 3) {
          copy(changed.a, a);
          copy(changed.diff_dst, diff_dst);
        }
        copy(host.out, out);
        if (!out_bias.is_null()) copy(host.out_bias, out_bias);
        std::shared_ptr<const Choice> choice;
        switch (direction) {
          case Direction::fwd: choice = matmul_fwd(context, desc, a, b, bias, out); break;
          case Direction::bwd_data:
            choice = matmul_bwd_data(context, desc, diff_dst, b, out);
            break;
          default: choice = matmul_bwd_weights(context, desc, a, diff_dst, out, out_bias); break;
        }
        const std::string where =
            desc.repro(direction) + " [" + algo.id + "] call " + std::to_string(call);
        ASSERT_EQ(choice->algo.id, algo.id) << where;
        const Tensor actual = to_host(out);
        ASSERT_TRUE(all_finite(actual, "output", where));
        ASSERT_TRUE(close_within_scale(actual.to_f32(), expected[inputs].out.to_f32(),
                                       scale[inputs].out.to_f32(), actual.dims(), tolerance,
                                       "output", where));
        if (!out_bias.is_null()) {
          const Tensor actual_bias = to_host(out_bias);
          ASSERT_TRUE(all_finite(actual_bias, "diff_bias", where));
          ASSERT_TRUE(close_within_scale(actual_bias.to_f32(), expected[inputs].out_bias.to_f32(),
                                         scale[inputs].out_bias.to_f32(), actual_bias.dims(),
                                         tolerance_for(desc.dtype, desc.batch * desc.m, false),
                                         "diff_bias", where));
        }
      }
      ++ran;
    }
    EXPECT_GE(ran, 2) << desc.repro(direction);
    std::cout << "[ matmul   ] replayed " << ran << " candidates of " << desc.repro(direction)
              << "\n";
  }
}

}  // namespace
}  // namespace dnnx::test
