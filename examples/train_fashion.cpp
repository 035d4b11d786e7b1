// Trains the small Fashion-MNIST CNN for a few epochs and prints the test accuracy after each:
// data from Debian's dataset-fashion-mnist, batches prepared on a background thread and copied to
// the context's device, metrics counted on the device, the weights saved as safetensors.
//   train_fashion [epochs]
#include <dnnx/data.hpp>
#include <dnnx/dnnx.hpp>
#include <dnnx/nn/nn.hpp>
#include <dnnx/safetensors.hpp>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace dnnx;
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 5;
  Context context(BackendKind::automatic);  // cudnn on a GPU, else oneDNN on the CPU
  auto train_set = data::fashion_mnist(data::Split::train);
  auto test_set = data::fashion_mnist(data::Split::test);

  data::LoaderOptions options;
  options.batch_size = 64;
  options.seed = 1;
  options.mean = {data::fashion_mnist_mean};
  options.std = {data::fashion_mnist_std};
  options.device = context;
  data::DataLoader train(train_set, options);

  nn::manual_seed(1);
  auto model = nn::models::fashion_cnn(context);
  nn::CrossEntropyLoss criterion(context);
  nn::Adam optimizer(context, model->parameters(), AdamHyper{.lr = 1e-3});

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    while (auto batch = train.next()) {
      optimizer.zero_grad();
      const Tensor logits = model->forward(batch->images);
      criterion.forward(logits, batch->labels);
      model->backward(criterion.backward());
      optimizer.step();
    }
    model->eval();
    const nn::NoGradGuard no_grad;  // inference: the forwards keep nothing for a backward
    Tensor correct = Tensor::zeros({1}, DType::i64, Layout::channels_first, context.allocator());
    options.shuffle = false;
    data::DataLoader test(test_set, options);
    while (auto batch = test.next()) {
      const Tensor logits = model->forward(batch->images);
      AccuracyDesc desc{.dims = logits.dims(), .label_dtype = DType::i32, .accumulate = true};
      accuracy_fwd(context, desc, logits, batch->labels, correct);
    }
    Tensor count = Tensor::empty({1}, DType::i64);
    copy(correct, count);
    std::printf("epoch %d: test accuracy %.4f\n", epoch,
                static_cast<double>(*static_cast<const std::int64_t*>(count.data())) /
                    static_cast<double>(test_set->size()));
  }
  safetensors::save("fashion_cnn.safetensors", model->state_dict(), {{"format", "pt"}});
}
