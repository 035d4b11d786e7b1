// Parity of every listed cpu cross-entropy candidate with the reference backend, forward (loss)
// and backward (diff_logits), for every case of the xent table in f32, f16 and bf16.
//
// Each candidate runs through a context whose policy is fixed to its id; outputs start as NaN;
// NaN is accepted only where the reference has it (the mean of an all-ignored batch); the rest is
// compared with Note [xent tolerances] (the loss of the clustered large-logit rows with Note
// [xent large-logit tolerance]). Every candidate claims determinism and runs twice
// (bitwise). Unsupported candidates are counted and must carry a reason of Note [expected
// unsupported xent].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "ops/cross_entropy_cases.hpp"
#include "support/compare.hpp"

#include <gtest/gtest.h>

namespace dnnx::test {
namespace {

// Note [expected unsupported xent]: oneDNN has f16 / bf16 softmax only on ISAs with those types;
// elsewhere its candidates collapse into one unavailable entry. The fused candidate runs
// everything.
bool expected_unsupported(const CrossEntropyDesc& desc, const AlgoInfo& algo) {
  return desc.dtype != DType::f32 && algo.id == "onednn:unavailable:softmax+nll" &&
         algo.reason.find("has no softmax") != std::string::npos;
}

struct ParityParam {
  XentCase c;
  DType dtype;
};

void PrintTo(const ParityParam& p, std::ostream* out) {
  *out << p.c.name << " " << to_string(p.dtype);
}

std::vector<ParityParam> params() {
  std::vector<ParityParam> out;
  for (const XentCase& c : xent_cases()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
      if (representable(c, dtype)) out.push_back({c, dtype});
  }
  return out;
}

class XentParity : public ::testing::TestWithParam<ParityParam> {
 protected:
  void check(Direction direction);
};

void XentParity::check(Direction direction) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  const XentCase& c = GetParam().c;
  const CrossEntropyDesc desc = with_dtype(c.desc, GetParam().dtype);
  const XentInputs inputs = xent_inputs(c, desc);
  Context reference = xent_context_for(BackendKind::reference, direction, AlgoPolicy::heuristic());
  const std::vector<float> expected = run_xent(reference, desc, direction, inputs).output.to_f32();
  const std::vector<float> backward_scale =
      direction == Direction::fwd ? std::vector<float>() : xent_backward_scale(desc, inputs);
  const Dims dims = direction == Direction::fwd ? desc.loss_dims() : desc.dims;

  Context cpu(BackendKind::cpu);
  int ran = 0;
  bool onednn_unavailable = false;
  for (const AlgoInfo& algo : cross_entropy_list(cpu, desc, direction)) {
    const std::string where = xent_context(desc, direction, algo.id);
    if (!algo.supported) {
      const bool expected = expected_unsupported(desc, algo);
      EXPECT_TRUE(expected) << "unexpected unsupported: " << algo.reason << "\n  " << where;
      onednn_unavailable = onednn_unavailable || expected;
      continue;
    }
    Context context = xent_context_for(BackendKind::cpu, direction, AlgoPolicy::fixed(algo.id));
    const XentRun first = run_xent(context, desc, direction, inputs);
    ASSERT_EQ(first.choice->algo.id, algo.id) << where;
    const XentBound bound = direction == Direction::fwd
                                ? xent_forward_bound(c, desc, inputs, algo)
                                : XentBound{backward_scale, xent_tolerance(desc.dtype)};
    EXPECT_TRUE(xent_close(first.output, expected, bound.scale, dims, bound.tolerance, where));
    const XentRun second = run_xent(context, desc, direction, inputs);
    EXPECT_TRUE(bitwise_equal(first.output, second.output, "output of two runs", where));
    ++ran;
  }
  // The fused candidate always runs; oneDNN's run too unless this CPU has no softmax for the
  // dtype (Note [expected unsupported xent]), which the listing says.
  EXPECT_GE(ran, onednn_unavailable ? 1 : 2)
      << "the fused and, where oneDNN has a softmax for the dtype, a oneDNN candidate must run: "
      << desc.repro(direction);
}

TEST_P(XentParity, Forward) { check(Direction::fwd); }
TEST_P(XentParity, Backward) { check(Direction::bwd_data); }

INSTANTIATE_TEST_SUITE_P(Table, XentParity, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<ParityParam>& info) {
                           std::string name =
                               info.param.c.name + "_" + std::string(to_string(info.param.dtype));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace dnnx::test
