// The cudnn backend's optimizer and loss-scaling kernels on a GPU (label "gpu"): every listed
// candidate (multi-tensor and per-tensor launches) of every case of the optimizer table
// (ops/optim_cases.hpp: odd sizes, empty tensors, several chunks with a tail, 200 to 470 tensors,
// misaligned tensors taking the element-by-element path, found_inf skips, grad scales, master
// weights) in f32, f16 and bf16 against the reference backend through the parity runner, bitwise
// determinism; the multi-tensor launch unsupported beyond its table's capacity; and ResNet-50's
// 161 tensors through one Adam step against the reference backend. Every test skips with the reason when
// no usable GPU is present.

#include <dnnx/dnnx.hpp>

#include "ops/optim_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace dnnx::test {
namespace {

class CudnnOptim : public ::testing::TestWithParam<DTypeCase<OptimCase>> {};

TEST_P(CudnnOptim, every_candidate) {
  DNNX_REQUIRE_GPU();
  const auto c = optim_parity_case(GetParam().c, GetParam().dtype);
  const ParityTally tally = check_parity(*c, BackendKind::cudnn, Direction::fwd);
  if (GetParam().c.op != OpKind::update_scale) {
    const bool over = GetParam().c.name == "sgd_over_table";
    EXPECT_EQ(tally.ran, over ? 1 : 2) << "multi-tensor and per-tensor launches";
    EXPECT_EQ(tally.unsupported, over ? 1 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnOptim,
                         ::testing::ValuesIn(in_every_dtype(optim_cases(), optim_representable)),
                         dtype_case_name<OptimCase>);

Tensor to_context(const Tensor& host, Context& context) {
  Tensor t = Tensor::empty(host.dims(), host.dtype(), Layout::channels_first, context.allocator());
  copy(host, t);
  return t;
}

// ResNet-50's parameters, bf16 with f32 master weights: one multi-tensor launch for the 161
// tensors, against the reference backend (f64 arithmetic: the GPU's f32 result agrees to about
// one f32 rounding of the parameter).
TEST(CudnnOptimResnet, adam_bf16_master_matches_reference) {
  DNNX_REQUIRE_GPU();
  AdamDesc desc = AdamDesc::adamw(resnet50_parameter_shapes(), DType::bf16);
  desc.master_weights = true;
  const AdamHyper hyper{1e-3, 0.9, 0.999, 1e-8, 0.01};
  std::vector<std::vector<float>> results[2];
  for (int b = 0; b < 2; ++b) {
    Context context(b == 0 ? BackendKind::reference : BackendKind::cudnn);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    std::vector<Tensor> params, grads, master, m, v;
    std::uint64_t seed = 1;
    for (const Dims& dims : desc.shapes) {
      const Tensor p = random_tensor(dims, DType::bf16, Layout::channels_first, seed++);
      params.push_back(to_context(p, context));
      master.push_back(
          to_context(tensor_from(dims, DType::f32, Layout::channels_first, p.to_f32()), context));
      grads.push_back(
          to_context(random_tensor(dims, DType::bf16, Layout::channels_first, seed++), context));
      m.push_back(to_context(Tensor::zeros(dims, DType::f32), context));
      v.push_back(to_context(Tensor::zeros(dims, DType::f32), context));
    }
    Tensor step = to_context(Tensor::zeros(Dims{1}, DType::f32), context);
    const AdamTensors t{params, grads, master, m, v, {}, &step, nullptr, nullptr};
    const auto choice = adam_step(context, desc, hyper, t);
    if (b == 1) {
      EXPECT_EQ(choice->algo.id, "cudnn:kernel:adam:multi_tensor");
    }
    for (std::size_t i = 0; i < desc.shapes.size(); i += 20) {
      Tensor host = Tensor::empty(desc.shapes[i], DType::f32);
      copy(master[i], host);
      results[b].push_back(host.to_f32());
    }
  }
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_EQ(results[0][i].size(), results[1][i].size());
    for (std::size_t k = 0; k < results[0][i].size(); ++k)
      ASSERT_NEAR(results[1][i][k], results[0][i][k],
                  1e-6f * std::max(1.0f, std::abs(results[0][i][k])))
          << "tensor " << i * 20 << " element " << k;
  }
}

}  // namespace
}  // namespace dnnx::test
