// The oracle harness of dnnx::nn (driven by torch_nn_parity.py): builds a model, writes its
// printed tree and initial state, then trains it with SGD on the batches the script wrote,
// writing the first step's logits and gradients, every step's loss and the final state.
//
// case.json: {"model": "fashion" | "resnet", "backend": "reference" | "cpu", "seed": N,
//             "steps": S, "lr": x, "momentum": x, "classes": C}
// inputs:    x<k>.npy (float32 N x C x H x W) and y<k>.npy (labels as float32), k < S
// outputs:   repr.txt, keys.txt (state_dict keys, one a line), init.<key>.npy, out.npy,
//            grad.<key>.npy (parameters), losses.npy, final.<key>.npy

#include <dnnx/dnnx.hpp>
#include <dnnx/nn/nn.hpp>

#include "python/harness_common.hpp"

#include <fstream>
#include <memory>

namespace {

using namespace dnnx;
namespace harness = dnnx::test::harness;

nn::ConvOptions same(bool bias) {
  nn::ConvOptions options;
  options.padding = {1};
  options.bias = bias;
  return options;
}

// A small residual network: a stem, torchvision BasicBlocks (with and without downsample), a
// generic Residual block, global average pooling and a classifier.
std::shared_ptr<nn::Module> small_resnet(const Context& context, std::int64_t in_channels,
                                         std::int64_t classes) {
  auto model = std::make_shared<nn::Sequential>(context);
  const std::vector<std::int64_t> three{3};
  model->push_back(std::make_shared<nn::Conv2d>(context, in_channels, 8, three, same(false)));
  model->push_back(std::make_shared<nn::BatchNorm2d>(context, 8));
  model->push_back(std::make_shared<nn::ReLU>(context, true));
  model->push_back(std::make_shared<nn::BasicBlock>(context, 8, 8, 1));
  model->push_back(std::make_shared<nn::BasicBlock>(context, 8, 16, 2));
  auto branch = std::make_shared<nn::Sequential>(context);
  branch->push_back(std::make_shared<nn::Conv2d>(context, 16, 16, three, same(true)));
  branch->push_back(std::make_shared<nn::BatchNorm2d>(context, 16));
  model->push_back(std::make_shared<nn::Residual>(
      context,
      std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{{"0", branch},
                                                                       {"1", nullptr}},
      std::make_shared<nn::ReLU>(context, false)));
  model->push_back(std::make_shared<nn::GlobalAvgPool>(context, 2));
  model->push_back(std::make_shared<nn::Flatten>(context));
  model->push_back(std::make_shared<nn::Linear>(context, 16, classes));
  return model;
}

void save_state(const harness::fs::path& dir, const std::string& prefix, nn::Module& model) {
  for (auto& [key, tensor] : model.state_dict()) {
    if (tensor.dtype() == DType::i64) {
      Tensor value = Tensor::empty(Dims{1}, DType::f32);
      value.copy_from_f32(
          std::vector<float>{static_cast<float>(*static_cast<const std::int64_t*>(tensor.data()))});
      harness::save(dir, prefix + key + ".npy", value);
    } else {
      harness::save(dir, prefix + key + ".npy", tensor);
    }
  }
}

Tensor load_labels(const harness::fs::path& dir, const std::string& name, std::int64_t count) {
  const Tensor values = harness::load(dir, name, Dims{count}, Layout::channels_first);
  Tensor labels = Tensor::empty(Dims{count}, DType::i64);
  const auto floats = values.to_f32();
  for (std::int64_t i = 0; i < count; ++i) {
    static_cast<std::int64_t*>(labels.data())[i] =
        static_cast<std::int64_t>(floats[static_cast<std::size_t>(i)]);
  }
  return labels;
}

void run(const harness::fs::path& dir) {
  const auto spec = harness::read_json(dir / "case.json");
  Context context(parse_backend(spec.at("backend").get<std::string>()));
  const std::string kind = spec.at("model");
  const Dims dims =
      Dims(std::span<const std::int64_t>(spec.at("input").get<std::vector<std::int64_t>>()));
  const std::int64_t classes = spec.at("classes");
  nn::manual_seed(spec.at("seed").get<std::uint64_t>());
  std::shared_ptr<nn::Module> model =
      kind == "fashion"
          ? std::shared_ptr<nn::Module>(nn::models::fashion_cnn(context, classes, dims[1]))
          : small_resnet(context, dims[1], classes);
  std::ofstream(dir / "repr.txt") << model->repr();
  {
    std::ofstream keys(dir / "keys.txt");
    for (auto& [key, tensor] : model->state_dict()) keys << key << "\n";
  }
  save_state(dir, "init.", *model);

  nn::CrossEntropyLoss criterion(context);
  nn::SGD sgd(context, model->parameters(),
              SgdHyper{spec.at("lr").get<double>(), spec.at("momentum").get<double>(), 0.0, 0.0});
  const int steps = spec.at("steps");
  Tensor losses = Tensor::empty(Dims{steps}, DType::f32);
  std::vector<float> loss_values;
  for (int step = 0; step < steps; ++step) {
    const Tensor x =
        harness::load(dir, "x" + std::to_string(step) + ".npy", dims, Layout::channels_first);
    const Tensor y = load_labels(dir, "y" + std::to_string(step) + ".npy", dims[0]);
    sgd.zero_grad();
    const Tensor logits = model->forward(x);
    loss_values.push_back(criterion.forward(logits, y).to_f32()[0]);
    model->backward(criterion.backward());
    if (step == 0) {
      harness::save(dir, "out.npy", logits);
      for (auto& [key, parameter] : model->named_parameters()) {
        harness::save(dir, "grad." + key + ".npy", parameter->grad);
      }
    }
    sgd.step();
  }
  losses.copy_from_f32(loss_values);
  harness::save(dir, "losses.npy", losses);
  save_state(dir, "final.", *model);
}

}  // namespace

int main(int argc, char** argv) {
  return harness::main(argc, argv, "nn_harness", "(case.json, x<k>.npy, y<k>.npy)", run);
}
