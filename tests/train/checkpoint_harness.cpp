// The C++ side of torch_checkpoint_parity.py: loads a `dnnx train --save` checkpoint of
// fashion_cnn into a fresh model (reference backend), runs it in eval mode on four synthetic
// images and writes the images and the logits to OUT (safetensors: "input", "logits").

#include <dnnx/data.hpp>
#include <dnnx/dnnx.hpp>
#include <dnnx/nn/nn.hpp>
#include <dnnx/safetensors.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: checkpoint_harness CHECKPOINT OUT\n";
    return 2;
  }
  try {
    using namespace dnnx;
    Context context(BackendKind::reference);
    auto model = nn::models::fashion_cnn(context);
    const safetensors::File checkpoint = safetensors::load(argv[1]);
    nn::StateDict state;
    for (const std::string& name : checkpoint.names()) {
      state.emplace_back(name, checkpoint.tensor(name));
    }
    model->load_state_dict(state);
    model->eval();
    data::LoaderOptions options;
    options.batch_size = 4;
    options.shuffle = false;
    options.mean = {0.5f};
    options.std = {0.5f};
    data::DataLoader loader(std::make_shared<data::SyntheticDataset>(4, Dims{1, 28, 28}, 10, 99),
                            options);
    const data::Batch batch = *loader.next();
    const Tensor logits = model->forward(batch.images);
    safetensors::save(argv[2], {{"input", batch.images}, {"logits", logits}});
    return 0;
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
}
