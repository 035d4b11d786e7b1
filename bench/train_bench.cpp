// Training steps of a dnnx::nn ResNet (forward, cross-entropy, backward, SGD with momentum on f32
// master weights) on synthetic data already on the device: the dnnx half of
// bench/train_resnet50_gpu.py, which runs PyTorch beside it.
//
//   train_bench [--device cuda|cpu|reference] [--model resnet50|resnet18] [--batch 64] [--size 224]
//               [--dtype f16|bf16|f32] [--layout nhwc|nchw]
//               [--policy exhaustive|heuristic|min_energy|energy_delay]
//               [--steps 20] [--warmup 5] [--rounds 3] [--loss-scale 1024] [--lr 0.01]
//               [--graph] [--first-step-only] [--profile-steps N] [--energy]
//
// Prints one JSON line: the first step's wall time (selection, and under exhaustive timing,
// happens inside it; a choice cache given by DNNX_CACHE / DNNX_CACHE_FILE makes it short), the
// step time of each round, images/s of the median round, the last loss, and on a GPU the peaks of
// the backend's caching allocator.
//
// Note [train bench timing]
// On a GPU the model runs on a CUDA stream of the bench's own (Context::with_stream), and each
// round is CUDA events recorded on that stream around `steps` back-to-back training steps (no
// host synchronisation inside the loop), divided by `steps`: PyTorch's side is timed the same way
// on its stream. On the cpu backend the round is the host clock around the same loop followed by a
// synchronize. The first step is the host clock from before the first forward to after a
// synchronize following the optimizer step: it includes the selection of every layer's
// algorithms (and cuDNN's plan building), which the rounds do not. Peak memory is the caching
// allocator's most bytes handed out (peak_in_use, PyTorch's max_memory_allocated) and most bytes
// held (peak_reserved, max_memory_reserved): over the whole run (first step included) and over
// the timed rounds alone.
//
// Note [train bench graph]
// Whether a step is bound by the GPU or by the host's enqueueing is told by two more figures on
// a GPU: host_ms, the host clock around each of `steps` single steps started on an idle stream
// (the time to queue one step's work: when it is close to the step time, the GPU waits for the
// host), and with --graph, the step captured once into a CUDA graph (cudaStreamBeginCapture on
// the bench's stream, relaxed mode; the caching allocator is warm by then, so no allocation needs
// the driver) and replayed in rounds timed like the others: the GPU's work alone. A capture that
// fails (a step that waits for the device, which a capture forbids) is reported as graph_error.
// The graph reuses the captured step's memory, so nothing else runs after it.
//
// --profile-steps N runs N more steps between cudaProfilerStart and cudaProfilerStop after the
// timed rounds, for a profiler started with profiling off (`ncu --profile-from-start off`), so
// that it sees a steady step's kernels and not the selection's. The first step's end is written
// to stderr, so that a tool sampling the host can start after it.
//
// --energy measures the energy of a training step after the timed rounds, on the backend's energy
// counter (NVML's on a GPU), as a candidate's is measured (Note [energy per call] in
// src/tune/energy.cpp: loops of steps of at least DNNX_ENERGY_WINDOW_MS, 1 s by default, over
// idle, DNNX_ENERGY_REPEATS of them), so that a model tuned with --policy min_energy can be set
// against one tuned for time: energy_j_per_step, its spread, the mean power and the clock, and
// energy_meter (the counter, or why there is none).
//
// Note [train bench loss scaling]
// f16 training scales the loss so that small gradients survive in f16 (bf16, with f32's range,
// does not), with nn::GradScaler at a static scale (`--loss-scale`): the backward starts from the
// scale instead of 1 (a tensor filled once); scaler.step(sgd) checks every gradient for inf / NaN
// with the unscale op (found_inf on the device, the gradients unchanged) and the sgd op divides
// the gradients by the scale and skips the whole step when found_inf is set, master weights
// included (PyTorch's GradScaler around a fused SGD; Note [nn grad scaler] in src/nn/optim.cpp).
// The scale is static: update() changes nothing, as PyTorch's update() (one tiny kernel halving
// or growing the scale) is left out of the timed work, so a run whose gradients overflow at this
// scale skips every step; the last loss is printed, and the number of skipped steps is not
// (reading found_inf would synchronise). bf16 and f32 run with the scaler disabled: ones as the
// loss gradient and the plain sgd step.

#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/nn/nn.hpp>
#include <dnnx/ops/optim.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"
#include "core/strings.hpp"
#include "ops/context_state.hpp"
#include "tune/energy.hpp"

#ifdef DNNX_BENCH_CUDA
#include "backends/cudnn/allocator.hpp"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string device = "cuda";
  std::string model = "resnet50";
  std::int64_t batch = 64;
  std::int64_t size = 224;
  std::string dtype = "f16";
  std::string layout = "nhwc";
  std::string policy = "exhaustive";
  int steps = 20;
  int warmup = 5;
  int rounds = 3;
  float loss_scale = 1024.0f;
  double lr = 0.01;
  bool graph = false;  // Note [train bench graph]
  bool first_step_only = false;
  int profile_steps = 0;  // steps between cudaProfilerStart/Stop
  bool energy = false;    // the energy of a step after the timed rounds
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "train_bench: " << message
            << "\nusage: train_bench [--device cuda|cpu|reference] [--model resnet50|resnet18] "
               "[--batch N] "
               "[--size N] [--dtype f16|bf16|f32] [--layout nhwc|nchw] [--policy "
               "exhaustive|heuristic|min_energy|energy_delay] [--steps N] [--warmup N] "
               "[--rounds N] [--loss-scale X] [--lr X] [--graph] [--first-step-only] "
               "[--profile-steps N] [--energy]\n";
  std::exit(2);
}

std::int64_t parse_count(const std::string& flag, const std::string& text, std::int64_t minimum) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    usage(flag + " '" + text + "': expected an integer");
  }
  if (used != text.size() || value < minimum) {
    usage(flag + " '" + text + "': expected an integer >= " + std::to_string(minimum));
  }
  return value;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--first-step-only") {
      options.first_step_only = true;
      continue;
    }
    if (flag == "--energy") {
      options.energy = true;
      continue;
    }
    if (flag == "--graph") {
      options.graph = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--device") {
      options.device = value;
    } else if (flag == "--model") {
      options.model = value;
    } else if (flag == "--batch") {
      options.batch = parse_count(flag, value, 1);
    } else if (flag == "--size") {
      options.size = parse_count(flag, value, 32);
    } else if (flag == "--dtype") {
      options.dtype = value;
    } else if (flag == "--layout") {
      options.layout = value;
    } else if (flag == "--policy") {
      options.policy = value;
    } else if (flag == "--steps") {
      options.steps = static_cast<int>(parse_count(flag, value, 1));
    } else if (flag == "--warmup") {
      options.warmup = static_cast<int>(parse_count(flag, value, 0));
    } else if (flag == "--rounds") {
      options.rounds = static_cast<int>(parse_count(flag, value, 1));
    } else if (flag == "--profile-steps") {
      options.profile_steps = static_cast<int>(parse_count(flag, value, 0));
    } else if (flag == "--loss-scale") {
      try {
        options.loss_scale = std::stof(value);
      } catch (const std::exception&) {
        usage("--loss-scale '" + value + "': expected a number");
      }
      if (!(options.loss_scale > 0) || !std::isfinite(options.loss_scale)) {
        usage("--loss-scale '" + value + "': expected a finite number > 0");
      }
    } else if (flag == "--lr") {
      try {
        options.lr = std::stod(value);
      } catch (const std::exception&) {
        usage("--lr '" + value + "': expected a number");
      }
      if (!(options.lr > 0) || !std::isfinite(options.lr)) {
        usage("--lr '" + value + "': expected a finite number > 0");
      }
    } else {
      usage("unknown argument '" + flag + "'");
    }
  }
  if (options.device != "cuda" && options.device != "cpu" && options.device != "reference") {
    usage("--device '" + options.device + "': expected cuda, cpu or reference");
  }
  if (options.model != "resnet50" && options.model != "resnet18") {
    usage("--model '" + options.model + "': expected resnet50 or resnet18");
  }
  if (options.policy != "exhaustive" && options.policy != "heuristic" &&
      options.policy != "min_energy" && options.policy != "energy_delay") {
    usage("--policy '" + options.policy +
          "': expected exhaustive, heuristic, min_energy or energy_delay");
  }
  return options;
}

#ifdef DNNX_BENCH_CUDA
void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}
#endif

// The bench's model: ResNet-50 or ResNet-18 for 1000 classes, in `layout`.
std::shared_ptr<nn::ResNet> make_model(Context& context, const Options& options, Layout layout) {
  nn::manual_seed(0);
  auto model = options.model == "resnet50" ? nn::models::resnet50(context, 1000, 3)
                                           : nn::models::resnet18(context, 1000, 3);
  nn::to_layout(*model, layout);
  return model;
}

// The loss scaler: a static `--loss-scale` for f16, disabled otherwise (bf16 has f32's exponent
// range: only f16 scales its loss, as PyTorch's AMP).
nn::GradScalerOptions scaler_options(const Options& options, DType dtype) {
  nn::GradScalerOptions scaling;
  scaling.init_scale = options.loss_scale;
  scaling.dynamic = false;
  scaling.enabled = dtype == DType::f16;
  return scaling;
}

// One training step of `model`: zero_grad (set to none, PyTorch's default: Note [gradients set
// to none]), forward, loss, backward of loss * scale, the check of the gradients and the SGD step
// with momentum per dtype group (Note [train bench loss scaling]).
class Trainer {
 public:
  Trainer(Context& context, const Options& options, Layout layout, DType dtype)
      : model_(make_model(context, options, layout)),
        criterion_(context),
        sgd_(context, model_->parameters(), SgdHyper{options.lr, 0.9}),
        scaler_(context, scaler_options(options, dtype)) {
    const std::int64_t classes = 1000;

    // Synthetic data on the device: uniform images in [-1, 1), labels uniform over the classes.
    const Dims image_dims{options.batch, 3, options.size, options.size};
    std::mt19937 generator(1);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(image_dims.product()));
    for (float& v : values) v = uniform(generator);
    Tensor typed = Tensor::empty(image_dims, dtype, layout);
    typed.copy_from_f32(values);
    images_ = Tensor::empty(image_dims, dtype, layout, context.allocator());
    copy(typed, images_);
    Tensor labels = Tensor::empty(Dims{options.batch}, DType::i64);
    auto* label_data = static_cast<std::int64_t*>(labels.data());
    for (std::int64_t i = 0; i < options.batch; ++i) {
      label_data[i] = static_cast<std::int64_t>(generator() % classes);
    }
    labels_ =
        Tensor::empty(Dims{options.batch}, DType::i64, Layout::channels_first, context.allocator());
    copy(labels, labels_);
  }

  void step() {
    model_->zero_grad(/*set_to_none=*/true);
    const Tensor logits = model_->forward(images_);
    loss_ = criterion_.forward(logits, labels_);
    model_->backward(criterion_.backward(scaler_.loss_gradient(loss_)));
    scaler_.step(sgd_);
    scaler_.update();
  }

  float last_loss() const {
    Tensor host = Tensor::empty(loss_.dims(), loss_.dtype());
    copy(loss_, host);
    return host.to_f32()[0];
  }

 private:
  std::shared_ptr<nn::ResNet> model_;
  nn::CrossEntropyLoss criterion_;
  nn::SGD sgd_;
  nn::GradScaler scaler_;
  Tensor images_, labels_, loss_;
};

std::string json_list(const std::vector<double>& values) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  return out.str() + "]";
}

int run(const Options& options) {
  const DType dtype = parse_dtype(options.dtype);
  const Layout layout = parse_layout(options.layout);
  const TypeConfig type_config = dtype == DType::f16    ? TypeConfig::half
                                 : dtype == DType::bf16 ? TypeConfig::bfloat16
                                                        : TypeConfig::float32;
  const bool cuda = options.device == "cuda";
  Context base(cuda                            ? BackendKind::cudnn
               : options.device == "reference" ? BackendKind::reference
                                               : BackendKind::cpu,
               0, type_config);
  void* stream = nullptr;
#ifdef DNNX_BENCH_CUDA
  cudaStream_t cuda_stream = nullptr;
  if (cuda) {
    cuda_check(cudaStreamCreateWithFlags(&cuda_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    stream = cuda_stream;
  }
#else
  if (cuda) usage("--device cuda: this build has no CUDA (configure with the cudnn backend)");
#endif
  Context context = stream ? base.with_stream(stream) : base;
  // The tuning variables (DNNX_ENERGY_WINDOW_MS, DNNX_FINAL_LOOP_MS, ...) apply; --policy sets
  // every op's policy over theirs.
  apply_tune_env(context.tune());
  const AlgoPolicy policy = AlgoPolicy::parse(options.policy);
  for (int op = 0; op < op_kind_count; ++op) {
    for (int d = 0; d < direction_count; ++d) {
      const auto kind = static_cast<OpKind>(op);
      const auto direction = static_cast<Direction>(d);
      if (op_info(kind).has(direction)) context.tune().policy(kind, direction) = policy;
    }
  }

#ifdef DNNX_BENCH_CUDA
  auto* allocator = cuda ? dynamic_cast<cudnn::CachingAllocator*>(&context.allocator()) : nullptr;
#endif
  Trainer trainer(context, options, layout, dtype);
  context.synchronize();
#ifdef DNNX_BENCH_CUDA
  if (allocator) allocator->reset_peaks();
#endif

  const auto first_start = Clock::now();
  trainer.step();
  context.synchronize();
  const double first_step_s = std::chrono::duration<double>(Clock::now() - first_start).count();
  std::cerr << "train_bench: first step done in " << first_step_s << " s" << std::endl;

  std::vector<double> step_ms;
  std::vector<double> host_ms, graph_ms;  // Note [train bench graph]
  std::string graph_error;
  double peak_run_in_use = 0, peak_run_reserved = 0, peak_steady_in_use = 0,
         peak_steady_reserved = 0;
  if (!options.first_step_only) {
    for (int i = 0; i < options.warmup; ++i) trainer.step();
    context.synchronize();
#ifdef DNNX_BENCH_CUDA
    if (allocator) {
      peak_run_in_use = static_cast<double>(allocator->peak_bytes_in_use());
      peak_run_reserved = static_cast<double>(allocator->peak_bytes_reserved());
      allocator->reset_peaks();
    }
    cudaEvent_t begin = nullptr, end = nullptr;
    if (cuda) {
      cuda_check(cudaEventCreate(&begin), "cudaEventCreate");
      cuda_check(cudaEventCreate(&end), "cudaEventCreate");
    }
#endif
    for (int round = 0; round < options.rounds; ++round) {
#ifdef DNNX_BENCH_CUDA
      if (cuda) {
        cuda_check(cudaEventRecord(begin, cuda_stream), "cudaEventRecord");
        for (int i = 0; i < options.steps; ++i) trainer.step();
        cuda_check(cudaEventRecord(end, cuda_stream), "cudaEventRecord");
        cuda_check(cudaEventSynchronize(end), "cudaEventSynchronize");
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
        step_ms.push_back(ms / options.steps);
        continue;
      }
#endif
      const auto start = Clock::now();
      for (int i = 0; i < options.steps; ++i) trainer.step();
      context.synchronize();
      step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() /
                        options.steps);
    }
#ifdef DNNX_BENCH_CUDA
    // Note [train bench graph]: the host's share, then the step captured and replayed.
    if (cuda) {
      for (int i = 0; i < options.steps; ++i) {
        context.synchronize();
        const auto start = Clock::now();
        trainer.step();
        host_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
      context.synchronize();
    }
    if (cuda && options.graph) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      cuda_check(cudaStreamBeginCapture(cuda_stream, cudaStreamCaptureModeRelaxed),
                 "cudaStreamBeginCapture");
      try {
        trainer.step();
      } catch (const std::exception& error) {
        graph_error = error.what();
      }
      const cudaError_t ended = cudaStreamEndCapture(cuda_stream, &graph);
      if (graph_error.empty() && ended != cudaSuccess) graph_error = cudaGetErrorString(ended);
      if (graph_error.empty()) {
        const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
        if (made != cudaSuccess) graph_error = cudaGetErrorString(made);
      }
      cudaGetLastError();
      if (graph_error.empty()) {
        for (int round = 0; round < options.rounds; ++round) {
          cuda_check(cudaEventRecord(begin, cuda_stream), "cudaEventRecord");
          for (int i = 0; i < options.steps; ++i)
            cuda_check(cudaGraphLaunch(exec, cuda_stream), "cudaGraphLaunch");
          cuda_check(cudaEventRecord(end, cuda_stream), "cudaEventRecord");
          cuda_check(cudaEventSynchronize(end), "cudaEventSynchronize");
          float ms = 0;
          cuda_check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
          graph_ms.push_back(ms / options.steps);
        }
      }
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
    if (cuda && options.profile_steps > 0) {
      context.synchronize();
      cuda_check(cudaProfilerStart(), "cudaProfilerStart");
      for (int i = 0; i < options.profile_steps; ++i) trainer.step();
      context.synchronize();
      cuda_check(cudaProfilerStop(), "cudaProfilerStop");
    }
    if (allocator) {
      peak_steady_in_use = static_cast<double>(allocator->peak_bytes_in_use());
      peak_steady_reserved = static_cast<double>(allocator->peak_bytes_reserved());
      peak_run_in_use = std::max(peak_run_in_use, peak_steady_in_use);
      peak_run_reserved = std::max(peak_run_reserved, peak_steady_reserved);
    }
    if (cuda) {
      cuda_check(cudaEventDestroy(begin), "cudaEventDestroy");
      cuda_check(cudaEventDestroy(end), "cudaEventDestroy");
    }
#endif
  }
#ifdef DNNX_BENCH_CUDA
  if (allocator && options.first_step_only) {
    peak_run_in_use = static_cast<double>(allocator->peak_bytes_in_use());
    peak_run_reserved = static_cast<double>(allocator->peak_bytes_reserved());
  }
#endif
  const float loss = trainer.last_loss();
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median_ms = sorted.empty() ? NAN : sorted[sorted.size() / 2];

  // --energy: a step's energy on the backend's counter, as a candidate's is measured.
  std::optional<tune::EnergyReading> energy;
  std::string energy_meter;
  if (options.energy && !options.first_step_only) {
    std::shared_ptr<detail::EnergyCounter> counter =
        detail::state_of(context).backend().energy_counter(energy_meter);
    if (counter != nullptr) {
      energy_meter = counter->name();
      tune::EnergyMeter meter(counter, context.tune().energy_window_ms,
                              context.tune().energy_repeats);
      energy = meter.measure(
          [&](long runs) {
            for (long i = 0; i < runs; ++i) trainer.step();
            context.synchronize();
          },
          median_ms);
    }
  }

  std::ostringstream line;
  line.precision(6);
  line << "{\"model\": \"" << options.model << "\", \"device\": \"" << options.device
       << "\", \"backend\": \"" << context.describe() << "\", \"batch\": " << options.batch
       << ", \"size\": " << options.size << ", \"dtype\": \"" << to_string(dtype)
       << "\", \"layout\": \"" << to_string(layout) << "\", \"policy\": \"" << options.policy
       << "\", \"loss_scale\": " << (dtype == DType::f16 ? options.loss_scale : 1.0f)
       << ", \"first_step_s\": " << first_step_s << ", \"steps\": " << options.steps
       << ", \"step_ms\": " << json_list(step_ms) << ", \"median_step_ms\": ";
  if (std::isnan(median_ms)) {
    line << "null, \"images_per_s\": null";
  } else {
    line << median_ms << ", \"images_per_s\": " << options.batch * 1000.0 / median_ms;
  }
  line << ", \"lr\": " << options.lr << ", \"last_loss\": " << loss;
  if (options.energy) {
    line << ", \"energy_meter\": " << detail::json_quote(energy_meter);
    if (energy) {
      line << ", \"energy_j_per_step\": " << energy->joules_per_call
           << ", \"energy_spread_j\": " << energy->spread_joules
           << ", \"power_w\": " << energy->power_w << ", \"idle_w\": " << energy->idle_w
           << ", \"clock_mhz\": " << (std::isnan(energy->clock_mhz) ? -1 : energy->clock_mhz);
    }
  }
  if (!host_ms.empty()) line << ", \"host_ms\": " << json_list(host_ms);
  if (options.graph) {
    line << ", \"graph_step_ms\": " << json_list(graph_ms);
    if (!graph_error.empty()) {
      line << ", \"graph_error\": " << detail::json_quote(graph_error);
    }
  }
  if (cuda) {
    line << ", \"peak_bytes_in_use\": " << peak_run_in_use
         << ", \"peak_bytes_reserved\": " << peak_run_reserved
         << ", \"steady_peak_bytes_in_use\": " << peak_steady_in_use
         << ", \"steady_peak_bytes_reserved\": " << peak_steady_reserved;
  }
  line << "}";
  std::cout << line.str() << std::endl;
  // The stream is left to the process's end: the model's tensors and the backend instance made
  // for it (Context::with_stream) outlive this function.
  return std::isfinite(loss) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::cerr << "train_bench: " << error.what() << "\n";
    return 1;
  }
}
