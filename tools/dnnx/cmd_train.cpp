// dnnx train: trains a model of dnnx::nn on Fashion-MNIST or synthetic data, printing one line per
// epoch (and a progress bar on a terminal), with checkpoints in safetensors.

#include <dnnx/data.hpp>
#include <dnnx/nn/nn.hpp>
#include <dnnx/safetensors.hpp>

#include "commands.hpp"
#include "layer_args.hpp"
#include "train_optimizer.hpp"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dnnx::cli {
namespace {

struct TrainArgs {
  std::string model;
  std::string dataset = "fashion-mnist";
  std::string data;
  std::string synthetic_size = "10000";
  std::string synthetic_test_size = "1000";
  std::string image;
  std::string classes = "10";
  std::string epochs = "1";
  std::string batch = "64";
  std::string steps = "0";
  std::string test_limit = "0";
  std::string optimizer = "sgd";
  std::string lr;
  std::string momentum;
  std::string weight_decay = "0";
  bool nesterov = false;
  std::string dtype = "f32";
  std::string layout = "nchw";
  std::string seed = "0";
  std::string save;
  std::string resume;
  std::string progress = "auto";
  std::string prefetch = "4";
  BackendArgs backend;
};

enum class ProgressStyle { bar, lines };

struct TrainConfig {
  std::string model;
  std::string dataset;
  std::string data;
  std::int64_t synthetic_size = 0;
  std::int64_t synthetic_test_size = 0;
  std::optional<Dims> image;
  std::int64_t classes = 10;
  std::int64_t epochs = 1;
  std::int64_t batch = 64;
  std::int64_t steps = 0;
  std::int64_t test_limit = 0;
  OptimizerConfig optimizer;
  DType dtype = DType::f32;
  Layout layout = Layout::channels_first;
  std::uint64_t seed = 0;
  std::string save;
  std::string resume;
  ProgressStyle progress = ProgressStyle::lines;
  std::size_t prefetch = 4;
  BackendChoice backend;
};

TrainConfig parse_train(const TrainArgs& args) {
  TrainConfig config;
  if (args.model != "fashion-cnn" && args.model != "resnet18" && args.model != "resnet50") {
    throw UsageError("--model '" + args.model + "': expected fashion-cnn, resnet18 or resnet50");
  }
  config.model = args.model;
  if (args.dataset != "fashion-mnist" && args.dataset != "synthetic") {
    throw UsageError("--dataset '" + args.dataset + "': expected fashion-mnist or synthetic");
  }
  config.dataset = args.dataset;
  config.data = args.data;
  config.synthetic_size = parse_int("--synthetic-size", args.synthetic_size, 1, max_batch);
  config.synthetic_test_size =
      parse_int("--synthetic-test-size", args.synthetic_test_size, 1, max_batch);
  if (!args.image.empty()) {
    config.image = parse_dims_of_rank("--image", args.image, 3, 3, "C x H x W");
    if (config.dataset != "synthetic") {
      throw UsageError("--image '" + args.image +
                       "': only --dataset synthetic takes an image size");
    }
  }
  config.classes = parse_int("--classes", args.classes, 2, 1 << 20);
  config.epochs = parse_int("--epochs", args.epochs, 1, 100000);
  config.batch = parse_int("--batch", args.batch, 1, 65536);
  config.steps = parse_int("--steps", args.steps, 0, std::int64_t{1} << 40);
  config.test_limit = parse_int("--test-limit", args.test_limit, 0, max_batch);
  if (args.optimizer == "sgd") {
    config.optimizer.kind = OptimizerKind::sgd;
  } else if (args.optimizer == "adam") {
    config.optimizer.kind = OptimizerKind::adam;
  } else if (args.optimizer == "adamw") {
    config.optimizer.kind = OptimizerKind::adamw;
  } else {
    throw UsageError("--optimizer '" + args.optimizer + "': expected sgd, adam or adamw");
  }
  const bool sgd = config.optimizer.kind == OptimizerKind::sgd;
  config.optimizer.lr =
      args.lr.empty() ? (sgd ? 0.05 : 1e-3) : parse_number<double>("--lr", args.lr, Finite::only);
  if (!(config.optimizer.lr > 0)) throw UsageError("--lr '" + args.lr + "': must be > 0");
  if (!args.momentum.empty() && !sgd) {
    throw UsageError("--momentum '" + args.momentum + "': only --optimizer sgd takes a momentum");
  }
  config.optimizer.momentum = args.momentum.empty()
                                  ? (sgd ? 0.9 : 0.0)
                                  : parse_number<double>("--momentum", args.momentum, Finite::only);
  if (config.optimizer.momentum < 0 || config.optimizer.momentum >= 1) {
    throw UsageError("--momentum '" + args.momentum + "': must be in [0, 1)");
  }
  config.optimizer.weight_decay =
      parse_number<double>("--weight-decay", args.weight_decay, Finite::only);
  if (config.optimizer.weight_decay < 0) {
    throw UsageError("--weight-decay '" + args.weight_decay + "': must be >= 0");
  }
  if (args.nesterov && (!sgd || config.optimizer.momentum == 0)) {
    throw UsageError("--nesterov needs --optimizer sgd with a momentum > 0");
  }
  config.optimizer.nesterov = args.nesterov;
  config.dtype = parse_dtype_arg("--dtype", args.dtype);
  config.layout = parse_layout_arg("--layout", args.layout);
  if (!is_floating(config.dtype)) {
    throw UsageError("--dtype '" + args.dtype + "': expected f32, f16 or bf16");
  }
  config.seed = static_cast<std::uint64_t>(
      parse_int("--seed", args.seed, 0, std::numeric_limits<std::int64_t>::max()));
  config.save = args.save;
  config.resume = args.resume;
  if (args.progress == "auto") {
    config.progress = ::isatty(STDERR_FILENO) ? ProgressStyle::bar : ProgressStyle::lines;
  } else if (args.progress == "bar") {
    config.progress = ProgressStyle::bar;
  } else if (args.progress == "lines") {
    config.progress = ProgressStyle::lines;
  } else {
    throw UsageError("--progress '" + args.progress + "': expected auto, bar or lines");
  }
  config.prefetch = static_cast<std::size_t>(parse_int("--prefetch", args.prefetch, 1, 1024));
  config.backend = parse_backend_args(args.backend);
  return config;
}

// Note [train checkpoint files]
// --save PATH writes the model's state_dict alone to PATH, so that PyTorch loads it as it is
// (safetensors.torch.load_file, then load_state_dict), and the optimizer state with the epoch to
// the optimizer file beside it; --resume PATH reads both.
std::string optimizer_path(const std::string& path) {
  const std::string suffix = ".safetensors";
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return path.substr(0, path.size() - suffix.size()) + ".optimizer" + suffix;
  }
  return path + ".optimizer" + suffix;
}

std::shared_ptr<nn::Module> build_model(const TrainConfig& config, const Context& context,
                                        const Dims& image, std::int64_t classes) {
  if (config.model == "fashion-cnn") {
    if (image[1] != 28 || image[2] != 28) {
      throw UsageError("--model fashion-cnn takes C x 28 x 28 images, the dataset's are " +
                       image.to_string());
    }
    return nn::models::fashion_cnn(context, classes, image[0]);
  }
  if (config.model == "resnet18") return nn::models::resnet18(context, classes, image[0]);
  return nn::models::resnet50(context, classes, image[0]);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%" PRId64 ":%02d:%02d", total / 3600,
                static_cast<int>(total / 60 % 60), static_cast<int>(total % 60));
  return text;
}

// Losses stay on the device until a flush copies them to the host together (one wait for the
// device per flush, not per step).
class LossMeter {
 public:
  void add(Tensor loss) { pending_.push_back(std::move(loss)); }
  void flush() {
    for (const Tensor& loss : pending_) {
      Tensor host = Tensor::empty(loss.dims(), loss.dtype());
      copy(loss, host);
      sum_ += host.to_f32()[0];
      ++count_;
    }
    pending_.clear();
  }
  std::size_t pending() const { return pending_.size(); }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : NAN; }

 private:
  std::vector<Tensor> pending_;
  double sum_ = 0;
  std::int64_t count_ = 0;
};

std::int64_t read_count(const Tensor& count) {
  Tensor host = Tensor::empty(count.dims(), count.dtype());
  copy(count, host);
  return static_cast<const std::int64_t*>(host.data())[0];
}

// The number of correct predictions of `model` (in eval mode) over the first `limit` samples of
// `dataset` (all when 0), counted on the device by the accuracy op, and the number of samples.
std::pair<std::int64_t, std::int64_t> evaluate(nn::Module& model,
                                               std::shared_ptr<const data::Dataset> dataset,
                                               const data::LoaderOptions& options, Context& context,
                                               std::int64_t limit) {
  model.eval();
  const nn::NoGradGuard no_grad;  // inference: the forwards keep nothing for a backward
  Tensor count = Tensor::zeros({1}, DType::i64, Layout::channels_first, context.allocator());
  std::int64_t seen = 0;
  data::DataLoader loader(std::move(dataset), options);
  while (auto batch = loader.next()) {
    const Tensor logits = model.forward(batch->images);
    AccuracyDesc desc;
    desc.dims = logits.dims();
    desc.label_dtype = batch->labels.dtype();
    desc.dtype = logits.dtype();
    desc.accumulate = true;
    accuracy_fwd(context, desc, logits, batch->labels, count);
    seen += batch->labels.dims()[0];
    if (limit > 0 && seen >= limit) break;
  }
  model.train();
  return {read_count(count), seen};
}

int run_train(const TrainArgs& args) {
  const TrainConfig config = parse_train(args);
  Context context = make_context(config.backend, config.dtype);

  std::shared_ptr<const data::Dataset> train_set, test_set;
  std::vector<float> mean, std;
  if (config.dataset == "fashion-mnist") {
    train_set = data::fashion_mnist(data::Split::train, config.data);
    test_set = data::fashion_mnist(data::Split::test, config.data);
    mean = {data::fashion_mnist_mean};
    std = {data::fashion_mnist_std};
  } else {
    const Dims image =
        config.image.value_or(config.model == "fashion-cnn" ? Dims{1, 28, 28} : Dims{3, 224, 224});
    train_set = std::make_shared<data::SyntheticDataset>(config.synthetic_size, image,
                                                         config.classes, config.seed);
    // The test set continues the training set's stream: other samples, same distribution.
    test_set = std::make_shared<data::SyntheticDataset>(config.synthetic_test_size, image,
                                                        config.classes, config.seed + 1);
    mean = {0.5f};
    std = {0.5f};
  }

  nn::manual_seed(config.seed);
  std::shared_ptr<nn::Module> model =
      build_model(config, context, train_set->image_dims(), train_set->classes());
  nn::CrossEntropyLoss criterion(context);

  std::int64_t first_epoch = 0;
  std::optional<safetensors::File> optimizer_state;
  if (!config.resume.empty()) {
    const safetensors::File weights = safetensors::load(config.resume);
    nn::StateDict state;
    for (const std::string& name : weights.names()) state.emplace_back(name, weights.tensor(name));
    model->load_state_dict(state);
    optimizer_state = safetensors::load(optimizer_path(config.resume));
    const auto epoch = optimizer_state->metadata().find("epoch");
    if (epoch == optimizer_state->metadata().end()) {
      throw Error(ErrorKind::InvalidArgument,
                  "'" + optimizer_path(config.resume) + "' has no epoch in its metadata");
    }
    first_epoch =
        parse_int("the epoch of " + optimizer_path(config.resume), epoch->second, 0, 100000);
  }
  // Note [nn layouts]: the convolution weights are stored in the layout the data comes in,
  // before the optimizer takes the parameters.
  nn::to_layout(*model, config.layout);
  TrainOptimizer optimizer(context, *model, config.optimizer);
  if (optimizer_state) optimizer.load_state(*optimizer_state);

  data::LoaderOptions options;
  options.batch_size = config.batch;
  options.seed = config.seed;
  options.mean = mean;
  options.std = std;
  options.prefetch = config.prefetch;
  options.dtype = context.dtype();
  options.layout = config.layout;
  options.device = context;
  data::DataLoader train_loader(train_set, options, first_epoch);
  data::LoaderOptions test_options = options;
  test_options.shuffle = false;

  std::cout << "train " << config.model << " on " << config.dataset << " (" << train_set->size()
            << " train, " << test_set->size() << " test, " << train_set->image_dims().to_string()
            << ", " << train_set->classes() << " classes): " << context.describe() << ", "
            << to_string(config.layout) << ", batch " << config.batch << ", "
            << to_string(config.optimizer.kind) << " lr " << config.optimizer.lr;
  if (config.optimizer.kind == OptimizerKind::sgd) {
    std::cout << " momentum " << config.optimizer.momentum;
  }
  std::cout << " weight-decay " << config.optimizer.weight_decay << ", seed " << config.seed;
  if (first_epoch > 0) std::cout << ", resumed after epoch " << first_epoch;
  std::cout << std::endl;

  using Clock = std::chrono::steady_clock;
  std::int64_t steps_done = 0;
  const std::int64_t batches = train_loader.batches_per_epoch();
  for (std::int64_t epoch = first_epoch; epoch < config.epochs; ++epoch) {
    const auto start = Clock::now();
    LossMeter losses;
    Tensor correct = Tensor::zeros({1}, DType::i64, Layout::channels_first, context.allocator());
    std::int64_t images = 0;
    std::int64_t step = 0;
    // The first step of a run selects (and, under exhaustive policies, times) every layer's
    // algorithms: the rate after it is the steady one.
    double first_step_seconds = NAN;
    std::int64_t first_step_images = 0;
    while (auto batch = train_loader.next()) {
      model->zero_grad(/*set_to_none=*/true);  // Note [gradients set to none]
      const Tensor logits = model->forward(batch->images);
      losses.add(criterion.forward(logits, batch->labels));
      model->backward(criterion.backward());
      optimizer.step();
      AccuracyDesc desc;
      desc.dims = logits.dims();
      desc.label_dtype = batch->labels.dtype();
      desc.dtype = logits.dtype();
      desc.accumulate = true;
      accuracy_fwd(context, desc, logits, batch->labels, correct);
      images += batch->labels.dims()[0];
      ++step;
      ++steps_done;
      if (step == 1) {
        context.synchronize();
        first_step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
        first_step_images = images;
      }
      const bool last = config.steps > 0 && steps_done >= config.steps;
      if (losses.pending() >= 32 || (config.progress == ProgressStyle::bar && step % 10 == 0)) {
        losses.flush();
      }
      if (config.progress == ProgressStyle::bar && (step % 10 == 0 || step == batches)) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const std::int64_t total = config.steps > 0 ? std::min(batches, config.steps) : batches;
        const int width = 30;
        const auto filled = static_cast<int>(width * step / std::max<std::int64_t>(total, 1));
        std::fprintf(stderr,
                     "\repoch %" PRId64 "/%" PRId64 " [%-*s] %" PRId64 "/%" PRId64
                     " loss %.4f %.0f img/s ETA %s ",
                     epoch + 1, config.epochs, width, std::string(filled, '=').c_str(), step, total,
                     losses.mean(), images / elapsed,
                     format_duration(elapsed / step * static_cast<double>(total - step)).c_str());
        std::fflush(stderr);
      }
      if (last) break;
    }
    losses.flush();
    context.synchronize();
    const double train_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (config.progress == ProgressStyle::bar) std::fputs("\r\033[K", stderr);
    const std::int64_t train_correct = read_count(correct);
    const auto [test_correct, tested] =
        evaluate(*model, test_set, test_options, context, config.test_limit);
    char line[640];
    std::snprintf(
        line, sizeof line,
        "epoch %" PRId64 "/%" PRId64 " steps %" PRId64
        " loss %.9g train-acc %.4f "
        "test-acc %.4f (%" PRId64 "/%" PRId64 ") time %.1f s %.0f img/s",
        epoch + 1, config.epochs, step, losses.mean(),
        images > 0 ? static_cast<double>(train_correct) / static_cast<double>(images) : 0.0,
        tested > 0 ? static_cast<double>(test_correct) / static_cast<double>(tested) : 0.0,
        test_correct, tested, train_seconds, images / train_seconds);
    std::cout << line;
    // The steady rate: the epoch's steps but the first (excluded from the queue of work it
    // waited for by a synchronize after it).
    if (step > 1) {
      std::snprintf(
          line, sizeof line, " (first step %.3f s, after it %.0f images/s)", first_step_seconds,
          static_cast<double>(images - first_step_images) / (train_seconds - first_step_seconds));
      std::cout << line;
    }
    std::cout << std::endl;
    if (!config.save.empty()) {
      safetensors::File weights;
      for (const auto& [name, tensor] : model->state_dict()) weights.set(name, tensor);
      weights.metadata() = {{"format", "pt"}, {"dnnx.model", config.model}};
      weights.write(config.save);
      safetensors::File state;
      optimizer.save_state(state);
      state.metadata()["epoch"] = std::to_string(epoch + 1);
      state.metadata()["model"] = config.model;
      state.write(optimizer_path(config.save));
    }
    if (config.steps > 0 && steps_done >= config.steps) break;
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto shared = std::make_shared<TrainArgs>();
  TrainArgs& args = *shared;
  CLI::App* command = app.add_subcommand(
      "train", "train a dnnx::nn model on Fashion-MNIST or synthetic data (docs/cli.md, train)");
  command->add_option("--model", args.model, "fashion-cnn | resnet18 | resnet50")
      ->type_name("NAME")
      ->required();
  command->add_option("--dataset", args.dataset, "fashion-mnist | synthetic")
      ->type_name("NAME")
      ->capture_default_str();
  command
      ->add_option("--data", args.data,
                   "Fashion-MNIST folder (default: $DNNX_FASHION_MNIST, else "
                   "/usr/share/datasets/fashion-mnist)")
      ->type_name("DIR");
  command->add_option("--synthetic-size", args.synthetic_size, "synthetic training samples")
      ->type_name("N")
      ->capture_default_str();
  command->add_option("--synthetic-test-size", args.synthetic_test_size, "synthetic test samples")
      ->type_name("N")
      ->capture_default_str();
  command
      ->add_option("--image", args.image,
                   "synthetic image size C x H x W (default 1x28x28 for fashion-cnn, "
                   "3x224x224 for the resnets)")
      ->type_name("CxHxW");
  command->add_option("--classes", args.classes, "synthetic classes")
      ->type_name("N")
      ->capture_default_str();
  command->add_option("--epochs", args.epochs, "epochs (in all, counting resumed ones)")
      ->type_name("N")
      ->capture_default_str();
  command->add_option("--batch", args.batch, "batch size")->type_name("N")->capture_default_str();
  command->add_option("--steps", args.steps, "stop after N training steps in all (0: no limit)")
      ->type_name("N")
      ->capture_default_str();
  command
      ->add_option("--test-limit", args.test_limit,
                   "evaluate on the first test batches holding at least N images (0: all)")
      ->type_name("N")
      ->capture_default_str();
  command->add_option("--optimizer", args.optimizer, "sgd | adam | adamw")
      ->type_name("NAME")
      ->capture_default_str();
  command->add_option("--lr", args.lr, "learning rate (default 0.05 for sgd, 1e-3 for adam(w))")
      ->type_name("X");
  command->add_option("--momentum", args.momentum, "sgd momentum (default 0.9)")->type_name("X");
  command->add_option("--weight-decay", args.weight_decay, "weight decay")
      ->type_name("X")
      ->capture_default_str();
  command->add_flag("--nesterov", args.nesterov, "Nesterov momentum (sgd)");
  command->add_option("--dtype", args.dtype, "f32 | f16 | bf16 (f32 master weights for f16/bf16)")
      ->type_name("DTYPE")
      ->capture_default_str();
  command
      ->add_option("--layout", args.layout,
                   "nchw | nhwc: the images' memory order and the convolution weights' (nhwc: "
                   "PyTorch's channels_last)")
      ->type_name("LAYOUT")
      ->capture_default_str();
  command->add_option("--seed", args.seed, "seed of the weights, the shuffles and synthetic data")
      ->type_name("N")
      ->capture_default_str();
  command
      ->add_option("--save", args.save,
                   "after every epoch, the weights to PATH (safetensors, PyTorch state_dict "
                   "names) and the optimizer state to PATH's .optimizer.safetensors")
      ->type_name("PATH");
  command
      ->add_option("--resume", args.resume,
                   "continue from a --save checkpoint: weights, optimizer state, epoch")
      ->type_name("PATH");
  command
      ->add_option("--progress", args.progress,
                   "auto (a bar when stderr is a terminal) | bar | lines")
      ->type_name("MODE")
      ->capture_default_str();
  command->add_option("--prefetch", args.prefetch, "batches the loader prepares ahead")
      ->type_name("N")
      ->capture_default_str();
  add_backend_options(*command, args.backend);
  command->callback([&action, shared] { action = [shared] { return run_train(*shared); }; });
}

}  // namespace dnnx::cli
