// One optimizer step over ResNet-50's 161 parameter tensors (25,557,032 values), on any backend:
// Adam, AdamW and SGD with momentum, f32 parameters and bf16 parameters with f32 master weights,
// every supported candidate of the backend (fixed by id: the multi-tensor and per-tensor launches
// on the GPU). bench/compare_optim.py runs it next to torch.optim (fused and foreach) in the same
// run and prints the table.
//
// Timing as matmul_bench (bench/line_bench.hpp): `kernel`, the backend's timer (CUDA events on the
// stream) around a loop of back-to-back steps, divided by the count, median of five loops — the
// steps are queued without a host synchronisation, as a training loop queues them, so the host's
// per-call work is hidden unless it is slower than the GPU; and `per call`, the median host time
// of single synchronized steps. Output: one JSON object per line, with the bytes one step moves
// and the bandwidth that makes.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/optim.hpp>
#include <dnnx/tensor.hpp>

#include "line_bench.hpp"

#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using bench::quoted;
using bench::split;

struct Options {
  BackendKind backend = BackendKind::automatic;
  std::vector<std::string> configs{"f32", "bf16_master"};
  std::vector<std::string> ops{"adam", "adamw", "sgd"};
  int loop = 20;
  int calls = 20;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--backend") {
      options.backend = parse_backend(value());
    } else if (flag == "--configs") {
      options.configs = split(value(), ',');
    } else if (flag == "--ops") {
      options.ops = split(value(), ',');
    } else if (flag == "--loop") {
      options.loop = std::stoi(value());
    } else if (flag == "--calls") {
      options.calls = std::stoi(value());
    } else if (flag == "--help" || flag == "-h") {
      std::cout << "optim_bench [--backend cpu|cudnn|reference|auto] [--configs f32,bf16_master]\n"
                   "            [--ops adam,adamw,sgd] [--loop 20] [--calls 20]\n";
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  for (const std::string& config : options.configs) {
    if (config != "f32" && config != "bf16_master")
      throw std::invalid_argument("--configs: f32 or bf16_master, got " + config);
  }
  for (const std::string& op : options.ops) {
    if (op != "adam" && op != "adamw" && op != "sgd")
      throw std::invalid_argument("--ops: adam, adamw or sgd, got " + op);
  }
  if (options.loop < 1 || options.calls < 1)
    throw std::invalid_argument("--loop and --calls must be >= 1");
  return options;
}

// Values uniform in [low, high) on the context's device.
Tensor filled(Context& context, const Dims& dims, DType dtype, std::mt19937& rng, float low,
              float high) {
  Tensor host = Tensor::empty(dims, dtype);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  for (float& v : values) v = uniform(rng);
  host.copy_from_f32(values);
  if (context.device().kind == Device::Kind::cpu) return host;
  Tensor device = Tensor::empty(dims, dtype, Layout::channels_first, context.allocator());
  copy(host, device);
  return device;
}

// The tensors of one configuration: parameters, gradients, master copies, up to three state
// lists, the step count.
struct Tensors {
  std::vector<Tensor> params, grads, master, state[3];
  Tensor step;
};

Tensors make_tensors(Context& context, const std::vector<Dims>& shapes, DType dtype, bool master,
                     int states) {
  std::mt19937 rng(1);
  Tensors t;
  for (const Dims& dims : shapes) {
    t.params.push_back(filled(context, dims, dtype, rng, -1, 1));
    t.grads.push_back(filled(context, dims, dtype, rng, -1e-2f, 1e-2f));
    if (master) t.master.push_back(filled(context, dims, DType::f32, rng, -1, 1));
    for (int s = 0; s < states; ++s)
      t.state[s].push_back(filled(context, dims, DType::f32, rng, 0, 1e-4f));
  }
  t.step = filled(context, Dims{1}, DType::f32, rng, 0, 1);
  return t;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  const std::vector<Dims> shapes = resnet50_parameter_shapes();
  std::int64_t total = 0;
  for (const Dims& dims : shapes) total += dims.product();
  if (shapes.size() != 161 || total != 25557032) {
    std::cerr << "optim_bench: ResNet-50 has 161 parameter tensors of 25,557,032 values; the "
                 "shape list has "
              << shapes.size() << " of " << total << '\n';
    return 1;
  }
  std::cout << std::setprecision(6);
  {
    Context probe(options.backend);
    std::cout << "{\"kind\": \"device\", \"describe\": " << quoted(probe.describe())
              << ", \"fingerprint\": " << quoted(probe.fingerprint())
              << ", \"tensors\": " << shapes.size() << ", \"parameters\": " << total << "}\n";
  }
  for (const std::string& config : options.configs) {
    const bool master = config == "bf16_master";
    const DType dtype = master ? DType::bf16 : DType::f32;
    for (const std::string& op : options.ops) {
      Context context(options.backend);
      context.set_choice_cache(std::make_shared<ChoiceCache>());
      const bool sgd = op == "sgd";
      Tensors t = make_tensors(context, shapes, dtype, master, sgd ? 1 : 2);
      SgdDesc sgd_desc;
      sgd_desc.shapes = shapes;
      sgd_desc.dtype = dtype;
      sgd_desc.master_weights = master;
      sgd_desc.momentum = true;
      AdamDesc adam_desc;
      adam_desc.shapes = shapes;
      adam_desc.dtype = dtype;
      adam_desc.master_weights = master;
      adam_desc.decoupled_weight_decay = op == "adamw";
      const SgdHyper sgd_hyper{1e-3, 0.9, 0.0, 1e-4};
      const AdamHyper adam_hyper{1e-4, 0.9, 0.999, 1e-8, op == "adamw" ? 1e-2 : 0.0};
      const auto call = [&] {
        if (sgd) {
          return sgd_step(context, sgd_desc, sgd_hyper,
                          {t.params, t.grads, t.master, t.state[0], &t.step, nullptr, nullptr});
        }
        return adam_step(
            context, adam_desc, adam_hyper,
            {t.params, t.grads, t.master, t.state[0], t.state[1], {}, &t.step, nullptr, nullptr});
      };
      const std::vector<AlgoInfo> algos = sgd ? sgd_list(context, sgd_desc, Direction::fwd)
                                              : adam_list(context, adam_desc, Direction::fwd);
      // Bytes one step moves: grads read and params written in dtype, params read too unless the
      // master copy is (f32, read and written); every state list read and written.
      const double elements = static_cast<double>(total);
      const double bytes = elements * ((master ? 2.0 : 3.0) * static_cast<double>(size_of(dtype)) +
                                       (master ? 8.0 : 0.0) + (sgd ? 8.0 : 16.0));
      for (const AlgoInfo& algo : algos) {
        if (!algo.supported) continue;
        context.tune().policy(sgd ? OpKind::sgd : OpKind::adam, Direction::fwd) =
            AlgoPolicy::fixed(algo.id);
        const auto choice = call();
        context.synchronize();
        const double kernel = bench::kernel_ms(context, options.loop, call);
        const double per_call = bench::per_call_ms(context, options.calls, call);
        std::cout << "{\"kind\": \"case\", \"op\": " << quoted(op)
                  << ", \"config\": " << quoted(config) << ", \"algo\": " << quoted(choice->algo.id)
                  << ", \"kernel_ms\": " << kernel << ", \"per_call_ms\": " << per_call
                  << ", \"bytes\": " << bytes << ", \"gbps\": " << bytes / (kernel * 1e6) << "}"
                  << std::endl;
      }
    }
  }
  return 0;
} catch (const dnnx::Error& error) {
  std::cerr << "optim_bench: " << error.what() << '\n';
  return 1;
} catch (const std::exception& error) {
  std::cerr << "optim_bench: " << error.what() << '\n';
  return 2;
}
