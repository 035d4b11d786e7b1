// Parity of every listed cpu candidate of fill and dropout with the reference backend through the
// parity runner (support/parity.hpp). Seeded draws must agree bitwise (Note [bit-identical
// draws] in src/core/philox.hpp), so the comparison is exact; no cpu candidate may be
// unsupported. Cases: every distribution and dropout direction, f32 / f16 / bf16, both layouts,
// sizes that are not multiples of 4 or 32.

#include <dnnx/dnnx.hpp>

#include "support/parity.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

::testing::AssertionResult same_bits(const Tensor& actual, const Tensor& expected,
                                     std::string_view where) {
  const std::vector<float> a = actual.to_f32(), e = expected.to_f32();
  if (a.size() != e.size()) return ::testing::AssertionFailure() << where << ": sizes differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &e[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << where << ": element " << i << " is " << a[i] << ", the reference's " << e[i];
    }
  }
  return ::testing::AssertionSuccess();
}

class FillParityCase final : public ParityCase {
 public:
  FillParityCase(FillDesc desc, FillParams params) : desc_(desc), params_(params) {}
  OpKind op_kind() const override { return OpKind::fill; }
  std::string label() const override { return desc_.key(); }
  std::string where(Direction, std::string_view candidate) const override {
    return std::string(candidate) + " | " + desc_.repro();
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return fill_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction) const override {
    ParityRun run;
    Tensor dst = nan_tensor(desc_.dims, desc_.dtype, desc_.layout);
    Generator generator(555);
    generator.set_offset(3);
    run.choice = fill_fwd(context, desc_, params_, generator, dst);
    run.outputs.push_back({"dst", std::move(dst)});
    return run;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    *worst = 0;
    return same_bits(actual.outputs[0].tensor, expected.run.outputs[0].tensor, where);
  }
  bool expected_unsupported(Direction, const AlgoInfo&) const override { return false; }

 private:
  static Tensor nan_tensor(const Dims& dims, DType dtype, Layout layout) {
    Tensor t = Tensor::empty(dims, dtype, layout);
    t.fill(NAN);
    return t;
  }
  FillDesc desc_;
  FillParams params_;
};

class DropoutParityCase final : public ParityCase {
 public:
  explicit DropoutParityCase(DropoutDesc desc) : desc_(desc) {
    Context reference(BackendKind::reference);
    reference.set_choice_cache(std::make_shared<ChoiceCache>());
    FillDesc input;
    input.dims = desc.dims, input.dtype = desc.dtype, input.layout = desc.layout;
    Generator generator(21);
    src_ = Tensor::empty(desc.dims, desc.dtype, desc.layout);
    diff_dst_ = Tensor::empty(desc.dims, desc.dtype, desc.layout);
    fill_fwd(reference, input, FillParams::normal(0, 1), generator, src_);
    fill_fwd(reference, input, FillParams::normal(0, 1), generator, diff_dst_);
  }
  OpKind op_kind() const override { return OpKind::dropout; }
  std::string label() const override { return desc_.key(); }
  std::string where(Direction direction, std::string_view candidate) const override {
    return std::string(candidate) + " | " + desc_.repro(direction);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return dropout_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    ParityRun run;
    Tensor out = Tensor::empty(desc_.dims, desc_.dtype, desc_.layout);
    out.fill(NAN);
    Generator generator(808);
    generator.set_offset(5);
    if (direction == Direction::fwd) {
      run.choice = dropout_fwd(context, desc_, src_, out);
    } else {
      SavedState state;
      Tensor dst = Tensor::empty(desc_.dims, desc_.dtype, desc_.layout);
      auto forward = dropout_fwd_training(context, desc_, generator, src_, dst, state);
      if (direction == Direction::fwd_training) {
        run.choice = forward;
        out = dst;
      } else {
        run.choice = dropout_bwd(context, desc_, diff_dst_, out, state);
      }
    }
    run.outputs.push_back({"output", std::move(out)});
    return run;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    *worst = 0;
    return same_bits(actual.outputs[0].tensor, expected.run.outputs[0].tensor, where);
  }
  bool expected_unsupported(Direction, const AlgoInfo&) const override { return false; }

 private:
  DropoutDesc desc_;
  Tensor src_, diff_dst_;
};

bool cpu_or_skip() {
  std::string why;
  return backend_available(BackendKind::cpu, &why);
}

TEST(FillParity, EveryDistributionDtypeAndLayout) {
  if (!cpu_or_skip()) GTEST_SKIP() << "cpu backend unavailable";
  const std::vector<std::pair<Distribution, FillParams>> draws = {
      {Distribution::constant, FillParams::constant(2.5f)},
      {Distribution::uniform, FillParams::uniform(-1.0f, 3.0f)},
      {Distribution::normal, FillParams::normal(-0.5f, 0.25f)},
      {Distribution::trunc_normal, FillParams::trunc_normal(0.0f, 0.02f, -0.04f, 0.04f)}};
  for (const auto& [distribution, params] : draws) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        FillDesc desc;
        desc.dims = {3, 5, 7, 2};
        desc.distribution = distribution, desc.dtype = dtype, desc.layout = layout;
        check_parity(FillParityCase(desc, params), BackendKind::cpu, Direction::fwd);
      }
    }
  }
}

TEST(DropoutParity, EveryDirectionDtypeAndLayout) {
  if (!cpu_or_skip()) GTEST_SKIP() << "cpu backend unavailable";
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
      DropoutDesc desc;
      desc.dims = {3, 11, 5, 3};
      desc.p = 0.35f, desc.dtype = dtype, desc.layout = layout;
      for (const Direction direction :
           {Direction::fwd, Direction::fwd_training, Direction::bwd_data})
        check_parity(DropoutParityCase(desc), BackendKind::cpu, direction);
    }
  }
}

}  // namespace
}  // namespace dnnx::test
