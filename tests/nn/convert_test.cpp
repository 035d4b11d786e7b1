// nn::convert: between backends (cpu <-> reference) and dtypes (f32 -> f16 -> f32 with f32
// master weights, batch norm excluded), and an SGD step on the converted model.

#include "nn/nn_test_util.hpp"

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

TEST(NnConvert, CpuToReferenceAndBack) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "no cpu backend in this build";
  Context cpu(BackendKind::cpu);
  Context reference(BackendKind::reference);
  nn::manual_seed(2);
  auto model = nn::models::fashion_cnn(cpu);
  model->eval();
  const Tensor x = input(Dims{2, 1, 28, 28}, 3);
  const Tensor on_cpu = model->forward(x);
  nn::convert(*model, reference);
  for (auto& [name, module] : model->named_modules()) {
    EXPECT_EQ(module->context().backend(), BackendKind::reference) << name;
  }
  const Tensor on_reference = model->forward(x);
  EXPECT_EQ((*model)[0].choice(Direction::fwd)->backend, "reference");
  expect_close(on_reference, on_cpu, 1e-4, 1e-5, "reference vs cpu");
  nn::convert(*model, cpu);
  expect_close(model->forward(x), on_cpu, 0, 0, "back on cpu");
}

TEST(NnConvert, HalfWithMasterWeightsAndBack) {
  Context f32(BackendKind::reference);
  Context half(BackendKind::reference, 0, TypeConfig::half);
  nn::manual_seed(4);
  auto model = nn::models::fashion_cnn(f32);
  model->eval();
  const nn::StateDict original = model->state_dict();
  std::vector<std::vector<float>> values;
  for (auto& [key, tensor] : original) {
    if (is_floating(tensor.dtype())) values.push_back(tensor.to_f32());
  }
  const Tensor x = input(Dims{2, 1, 28, 28}, 5);
  const Tensor reference_out = model->forward(x);

  nn::convert(*model, half, [](const std::string&, const nn::Module& module) {
    return module.type_name().starts_with("BatchNorm");
  });
  auto& conv = dynamic_cast<nn::Conv&>((*model)[0]);
  EXPECT_EQ(conv.weight().value.dtype(), DType::f16);
  EXPECT_EQ(conv.weight().grad.dtype(), DType::f16);
  ASSERT_FALSE(conv.weight().master.is_null());
  EXPECT_EQ(conv.weight().master.dtype(), DType::f32);
  EXPECT_EQ(conv.weight().master.to_f32(), values[0]);  // the f32 values, unrounded
  auto& bn = dynamic_cast<nn::BatchNorm&>((*model)[1]);
  EXPECT_EQ(bn.weight().value.dtype(), DType::f32);
  EXPECT_EQ(bn.context().type_config(), TypeConfig::float32);  // excluded

  const Tensor x16 = random_tensor(x.dims(), DType::f16, Layout::channels_first, 5);
  const Tensor half_out = model->forward(x16);
  EXPECT_EQ(half_out.dtype(), DType::f16);
  // f16 storage of weights and activations through five layers: a few f16 ulps of the outputs.
  expect_close(half_out, reference_out, 2e-2, 2e-2, "f16 vs f32 outputs");

  nn::convert(*model, f32);
  std::size_t index = 0;
  for (auto& [key, tensor] : model->state_dict()) {
    if (!is_floating(tensor.dtype())) continue;
    EXPECT_EQ(tensor.dtype(), DType::f32) << key;
    EXPECT_EQ(tensor.to_f32(), values[index++]) << key << ": the master copy comes back";
  }
  EXPECT_TRUE(conv.weight().master.is_null());
}

TEST(NnConvert, SgdUpdatesMasterAndHalfValues) {
  Context half(BackendKind::reference, 0, TypeConfig::half);
  nn::manual_seed(6);
  nn::Sequential model(half);
  model.push_back(std::make_shared<nn::Linear>(half, 8, 4));
  auto& linear = dynamic_cast<nn::Linear&>(model[0]);
  ASSERT_EQ(linear.weight().value.dtype(), DType::f16);
  const std::vector<float> master_before = linear.weight().master.to_f32();
  nn::SGD sgd(half, model.parameters(), SgdHyper{0.1, 0.0, 0.0, 0.0});
  model.forward(random_tensor(Dims{3, 8}, DType::f16, Layout::channels_first, 1));
  model.backward(random_tensor(Dims{3, 4}, DType::f16, Layout::channels_first, 2));
  const std::vector<float> grad = linear.weight().grad.to_f32();
  sgd.step();
  const std::vector<float> master = linear.weight().master.to_f32();
  const std::vector<float> value = linear.weight().value.to_f32();
  for (std::size_t i = 0; i < master.size(); ++i) {
    EXPECT_NEAR(master[i], master_before[i] - 0.1f * grad[i], 1e-6);
    Tensor rounded = Tensor::empty(Dims{1}, DType::f16);
    rounded.copy_from_f32(std::vector<float>{master[i]});
    EXPECT_EQ(value[i], rounded.to_f32()[0]);
  }
}

}  // namespace
}  // namespace dnnx::test::nn
