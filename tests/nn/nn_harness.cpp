// The oracle harness of dnnx::nn (driven by torch_nn_parity.py): builds a model, writes its
// printed tree and initial state, then trains it with SGD on the batches the script wrote,
// writing the first step's logits and gradients, every step's loss and the final state.
//
// case.json: {"model": "fashion" | "resnet", "backend": "reference" | "cpu", "seed": N,
//             "steps": S, "lr": x, "momentum": x, "classes": C[, "eval_from": E]}, or for one
//            layer
//            {"layer": {...}, "backend": ..., "input": dims} (run_layer below; recurrent layers:
//            run_recurrent)
// inputs:    x<k>.npy (float32 N x C x H x W) and y<k>.npy (labels as float32), k < S
// outputs:   repr.txt, keys.txt (state_dict keys, one a line), init.<key>.npy, out.npy,
//            grad.<key>.npy (parameters), losses.npy, final.<key>.npy; with eval_from E (the
//            model is put in eval mode before step E) also evalout.npy and evalgrad.<key>.npy of
//            step E

#include <dnnx/dnnx.hpp>
#include <dnnx/nn/nn.hpp>

#include "python/harness_common.hpp"

#include <fstream>
#include <memory>
#include <optional>

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

std::vector<std::int64_t> ints(const nlohmann::json& spec, const char* key,
                               std::vector<std::int64_t> fallback) {
  return spec.contains(key) ? spec.at(key).get<std::vector<std::int64_t>>() : fallback;
}

// One layer from its JSON spec (the "layer" entry of a case; torch_nn_parity.py builds the same
// torch module from it).
std::shared_ptr<nn::Module> make_layer(const Context& context, const nlohmann::json& spec) {
  const std::string type = spec.at("type");
  const int dims = spec.value("dims", 2);
  if (type == "Conv") {
    nn::ConvOptions options;
    options.stride = ints(spec, "stride", {1});
    options.padding = ints(spec, "padding", {0});
    options.dilation = ints(spec, "dilation", {1});
    options.groups = spec.value("groups", 1);
    options.bias = spec.value("bias", true);
    return std::make_shared<nn::Conv>(context, dims, spec.at("in").get<std::int64_t>(),
                                      spec.at("out").get<std::int64_t>(), ints(spec, "kernel", {}),
                                      options);
  }
  if (type == "Linear") {
    return std::make_shared<nn::Linear>(context, spec.at("in").get<std::int64_t>(),
                                        spec.at("out").get<std::int64_t>(),
                                        spec.value("bias", true));
  }
  if (type == "BatchNorm") {
    nn::BatchNormOptions options;
    options.eps = spec.value("eps", 1e-5);
    // "momentum": null is PyTorch's momentum=None (the cumulative average).
    options.momentum = spec.contains("momentum") && spec.at("momentum").is_null()
                           ? std::nullopt
                           : std::optional<double>(spec.value("momentum", 0.1));
    options.affine = spec.value("affine", true);
    options.track_running_stats = spec.value("track", true);
    return std::make_shared<nn::BatchNorm>(context, dims, spec.at("features").get<std::int64_t>(),
                                           options);
  }
  if (type == "Activation") {
    return std::make_shared<nn::Activation>(
        context, parse_activation_kind(spec.at("kind").get<std::string>()),
        spec.value("inplace", false), spec.value("alpha", 1.0), spec.value("ceiling", 6.0));
  }
  if (type == "MaxPool" || type == "AvgPool") {
    nn::PoolOptions options;
    options.stride = ints(spec, "stride", {});
    options.padding = ints(spec, "padding", {0});
    options.dilation = ints(spec, "dilation", {1});
    options.ceil_mode = spec.value("ceil_mode", false);
    options.count_include_pad = spec.value("count_include_pad", true);
    return std::make_shared<nn::Pool>(context, dims,
                                      type == "MaxPool" ? PoolMode::max : PoolMode::avg_include_pad,
                                      ints(spec, "kernel", {}), options);
  }
  if (type == "GlobalAvgPool") return std::make_shared<nn::GlobalAvgPool>(context, dims);
  if (type == "Softmax") {
    return std::make_shared<nn::Softmax>(
        context, spec.value("instance", false) ? SoftmaxMode::instance : SoftmaxMode::channel,
        spec.value("log", false));
  }
  if (type == "Flatten") {
    return std::make_shared<nn::Flatten>(context, spec.value("start", 1), spec.value("end", -1));
  }
  if (type == "RNN" || type == "LSTM" || type == "GRU") {
    nn::RnnOptions options;
    options.num_layers = spec.value("layers", std::int64_t{1});
    options.bias = spec.value("bias", true);
    options.batch_first = spec.value("batch_first", false);
    options.dropout = spec.value("dropout", 0.0);
    options.bidirectional = spec.value("bidirectional", false);
    const std::int64_t in = spec.at("in"), hidden = spec.at("hidden");
    if (type == "LSTM") return std::make_shared<nn::LSTM>(context, in, hidden, options);
    if (type == "GRU") return std::make_shared<nn::GRU>(context, in, hidden, options);
    return std::make_shared<nn::RNN>(context, in, hidden, options,
                                     spec.value("nonlinearity", std::string("tanh")));
  }
  throw std::runtime_error("unknown layer type " + type);
}

// A recurrent layer: as run_layer, with initial states h0.npy / c0.npy and lengths.npy when the
// spec asks ("states", "lengths"), the final states' gradients dhn.npy / dcn.npy; writes hn.npy,
// cn.npy, dh0.npy, dc0.npy besides, and the state_dict as state.safetensors; only
// unsupported.txt (the reason) when the backend does not run the rnn op.
void run_recurrent(const harness::fs::path& dir, const nlohmann::json& spec, nn::RNNBase& layer,
                   const Dims& dims) {
  const Tensor x = harness::load(dir, "x.npy", dims, Layout::channels_first);
  const bool lstm = layer.cell() == RnnCell::lstm;
  const auto& layer_spec = spec.at("layer");
  const bool batch_first = layer.options().batch_first;
  const std::int64_t batch = dims[batch_first ? 0 : 1];
  const std::int64_t rows = layer.options().num_layers * (layer.options().bidirectional ? 2 : 1);
  const Dims state_dims{rows, batch, layer.hidden_size()};
  Tensor h0, c0, lengths;
  if (layer_spec.value("states", false)) {
    h0 = harness::load(dir, "h0.npy", state_dims, Layout::channels_first);
    if (lstm) c0 = harness::load(dir, "c0.npy", state_dims, Layout::channels_first);
  }
  if (layer_spec.value("lengths", false)) {
    const auto values =
        harness::load(dir, "lengths.npy", Dims{batch}, Layout::channels_first).to_f32();
    lengths = Tensor::empty(Dims{batch}, DType::i64);
    for (std::int64_t n = 0; n < batch; ++n) {
      static_cast<std::int64_t*>(lengths.data())[n] =
          static_cast<std::int64_t>(values[static_cast<std::size_t>(n)]);
    }
  }
  nn::RnnOutput out;
  try {
    out = layer.forward(x, h0, c0, lengths);
  } catch (const Error& error) {
    // A backend without the rnn op: the script reports the case as not run, with the reason.
    if (error.kind() != ErrorKind::Unsupported) throw;
    std::ofstream(dir / "unsupported.txt") << error.what();
    return;
  }
  harness::save(dir, "out.npy", out.output);
  harness::save(dir, "hn.npy", out.h_n);
  if (lstm) harness::save(dir, "cn.npy", out.c_n);
  const Tensor dy = harness::load(dir, "dy.npy", out.output.dims(), Layout::channels_first);
  const Tensor dhn = harness::load(dir, "dhn.npy", state_dims, Layout::channels_first);
  const Tensor dcn =
      lstm ? harness::load(dir, "dcn.npy", state_dims, Layout::channels_first) : Tensor();
  const nn::RnnGradients grads = layer.backward(dy, dhn, dcn);
  harness::save(dir, "dx.npy", grads.diff_input);
  harness::save(dir, "dh0.npy", grads.diff_h0);
  if (lstm) harness::save(dir, "dc0.npy", grads.diff_c0);
  for (auto& [key, parameter] : layer.named_parameters()) {
    harness::save(dir, "grad." + key + ".npy", parameter->grad);
  }
  safetensors::save((dir / "state.safetensors").string(), layer.state_dict());
}

// One layer: repr, initial state, output, input gradient and parameter gradients for the
// script's input x.npy and output gradient dy.npy, and the state after the forward (running
// statistics). A CrossEntropyLoss takes labels y.npy (and class weights w.npy) and its backward
// runs with a diff_loss of ones.
void run_layer(const harness::fs::path& dir, const nlohmann::json& spec, const Context& context,
               const Dims& dims) {
  const auto& layer_spec = spec.at("layer");
  const Tensor x = harness::load(dir, "x.npy", dims, Layout::channels_first);
  if (layer_spec.at("type") == "CrossEntropyLoss") {
    nn::CrossEntropyOptions options;
    options.reduction = parse_reduction(layer_spec.value("reduction", std::string("mean")));
    options.ignore_index = layer_spec.value("ignore_index", std::int64_t{-100});
    if (layer_spec.value("weighted", false)) {
      options.weight = harness::load(dir, "w.npy", Dims{dims[1]}, Layout::channels_first);
    }
    nn::CrossEntropyLoss loss(context, options);
    std::vector<std::int64_t> label_dims{dims[0]};
    for (int i = 2; i < dims.rank(); ++i) label_dims.push_back(dims[i]);
    const Tensor floats = harness::load(dir, "y.npy", Dims(label_dims), Layout::channels_first);
    Tensor labels = Tensor::empty(floats.dims(), DType::i64);
    const auto values = floats.to_f32();
    for (std::size_t i = 0; i < values.size(); ++i) {
      static_cast<std::int64_t*>(labels.data())[i] = static_cast<std::int64_t>(values[i]);
    }
    std::ofstream(dir / "repr.txt") << loss.repr();
    harness::save(dir, "out.npy", loss.forward(x, labels));
    harness::save(dir, "dx.npy", loss.backward());
    return;
  }
  std::shared_ptr<nn::Module> layer = make_layer(context, layer_spec);
  std::ofstream(dir / "repr.txt") << layer->repr();
  {
    std::ofstream keys(dir / "keys.txt");
    for (auto& [key, tensor] : layer->state_dict()) keys << key << "\n";
  }
  save_state(dir, "init.", *layer);
  if (auto* recurrent = dynamic_cast<nn::RNNBase*>(layer.get())) {
    run_recurrent(dir, spec, *recurrent, dims);
    return;
  }
  // "passes": P > 1 runs P - 1 training forwards on x1.npy ... first (running statistics);
  // "eval": the measured forward and backward run in eval mode.
  const int passes = layer_spec.value("passes", 1);
  for (int pass = 1; pass < passes; ++pass) {
    layer->forward(
        harness::load(dir, "x" + std::to_string(pass) + ".npy", dims, Layout::channels_first));
  }
  if (layer_spec.value("eval", false)) layer->eval();
  const Tensor y = layer->forward(x);
  harness::save(dir, "out.npy", y);
  const Tensor dy = harness::load(dir, "dy.npy", y.dims(), Layout::channels_first);
  harness::save(dir, "dx.npy", layer->backward(dy));
  for (auto& [key, parameter] : layer->named_parameters()) {
    harness::save(dir, "grad." + key + ".npy", parameter->grad);
  }
  save_state(dir, "final.", *layer);
}

void run(const harness::fs::path& dir) {
  const auto spec = harness::read_json(dir / "case.json");
  Context context(parse_backend(spec.at("backend").get<std::string>()));
  if (spec.contains("layer")) {
    nn::manual_seed(spec.value("seed", std::uint64_t{1}));
    run_layer(
        dir, spec, context,
        Dims(std::span<const std::int64_t>(spec.at("input").get<std::vector<std::int64_t>>())));
    return;
  }
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
  const int eval_from = spec.value("eval_from", steps);
  Tensor losses = Tensor::empty(Dims{steps}, DType::f32);
  std::vector<float> loss_values;
  for (int step = 0; step < steps; ++step) {
    const Tensor x =
        harness::load(dir, "x" + std::to_string(step) + ".npy", dims, Layout::channels_first);
    const Tensor y = load_labels(dir, "y" + std::to_string(step) + ".npy", dims[0]);
    if (step == eval_from) model->eval();
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
    if (step == eval_from) {
      harness::save(dir, "evalout.npy", logits);
      for (auto& [key, parameter] : model->named_parameters()) {
        harness::save(dir, "evalgrad." + key + ".npy", parameter->grad);
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
