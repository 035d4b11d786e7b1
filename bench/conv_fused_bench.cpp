// The fused convolution on the cudnn backend against running its parts one after the other, on
// ResNet-50's fused layers at batch 64 (f16 NHWC and f32 NCHW by default).
//
// Note [fused bench variants]
// Per layer and config, each on fresh tensors and a fresh choice cache:
//   fused      conv_fused_fwd under the exhaustive policy: every candidate of the fused op
//              (graph-API fused engines, cudnnConvolutionBiasActivationForward, the unfused
//              conv + epilogue kernel) timed, the fastest kept; also its heuristic pick;
//   unfused    conv_fwd under the exhaustive policy, then dnnx's one-pass epilogue kernel
//              (bias + scaled residual + relu) on the same stream: the best separate convolution
//              plus the cheapest possible epilogue;
//   separate   what a caller without fusion writes with the public ops: conv_fwd (exhaustive),
//              conv_bias_fwd, add_fwd (residual), activation_fwd (relu, in place).
// Timing as in Note [gpu timing method] (cudnn_conv_bench.cpp): kernel = CUDA events on the
// backend's stream around a loop of back-to-back calls, per call; per call = median host wall
// time of one call and a synchronization; first call = the exhaustive search plus the call.
// Output: one JSON object per line, then a table. Needs only libdnnx and the CUDA runtime.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/activation.hpp>
#include <dnnx/ops/add.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/conv_fused.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/kernels/conv_fused.hpp"
#include "line_bench.hpp"
#include "ops/context_state.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using Clock = std::chrono::steady_clock;

struct Layer {
  std::string name;
  std::int64_t c, h, w, o, k, stride, pad;
  bool residual;
};

// ResNet-50's convolutions followed by bias (folded batch-norm) and relu; the expanding 1x1
// convolutions end a bottleneck block, so they also add the block's input.
const std::vector<Layer>& default_layers() {
  static const std::vector<Layer> layers = {
      {"l1.conv3x3", 64, 56, 56, 64, 3, 1, 1, false},
      {"l1.reduce", 256, 56, 56, 64, 1, 1, 0, false},
      {"l1.expand", 64, 56, 56, 256, 1, 1, 0, true},
      {"l2.conv3x3", 128, 28, 28, 128, 3, 1, 1, false},
      {"l3.conv3x3", 256, 14, 14, 256, 3, 1, 1, false},
      {"l3.expand", 256, 14, 14, 1024, 1, 1, 0, true},
      {"l4.conv3x3", 512, 7, 7, 512, 3, 1, 1, false},
      {"l4.expand", 512, 7, 7, 2048, 1, 1, 0, true},
  };
  return layers;
}

struct Options {
  std::int64_t batch = 64;
  std::vector<std::string> configs{"f16_nhwc", "f32_nchw"};
  std::vector<std::string> layers;  // empty: all
  std::vector<std::string> variants{"fused", "unfused", "separate"};
  int loop = 50;
  int calls = 20;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--batch") {
      o.batch = std::stoll(value());
    } else if (arg == "--configs") {
      o.configs = split_list(value());
    } else if (arg == "--layers") {
      o.layers = split_list(value());
    } else if (arg == "--variants") {
      o.variants = split_list(value());
    } else if (arg == "--loop") {
      o.loop = std::stoi(value());
    } else if (arg == "--calls") {
      o.calls = std::stoi(value());
    } else if (arg == "--help") {
      std::cout << "conv_fused_bench [--batch 64] [--configs f16_nhwc,f32_nchw]\n"
                   "  [--layers l1.conv3x3,...] [--variants fused,unfused,separate]\n"
                   "  [--loop 50] [--calls 20]\n";
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument '" + arg + "' (see --help)");
    }
  }
  return o;
}

Tensor device_random(const Dims& dims, DType dtype, Layout layout, Context& context,
                     std::uint32_t seed) {
  Tensor host = Tensor::empty(dims, dtype, layout);
  std::vector<float> values(static_cast<std::size_t>(dims.product()));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : values) v = uniform(rng);
  host.copy_from_f32(values);
  Tensor device = Tensor::empty(dims, dtype, layout, context.allocator());
  copy(host, device);
  return device;
}

struct Operands {
  Tensor src, weights, bias, residual, dst;
};

Operands make_operands(const ConvFusedDesc& desc, Context& context) {
  const ConvDesc& c = desc.conv;
  Operands t;
  t.src = device_random(c.src_dims(), c.dtype, c.layout, context, 1);
  t.weights = device_random(c.weights_dims(), c.dtype, c.layout, context, 2);
  t.bias = device_random(c.bias_dims(), c.dtype, Layout::channels_first, context, 3);
  if (desc.residual) t.residual = device_random(c.dst_dims(), c.dtype, c.layout, context, 4);
  t.dst = device_random(c.dst_dims(), c.dtype, c.layout, context, 5);
  context.synchronize();
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Note [fused bench variants]: kernel-bound ms per call and per-call wall ms of `call`.
struct Timing {
  double kernel_ms = 0;
  double call_ms = 0;
};

Timing time_calls(Context& context, const std::function<void()>& call, const Options& options) {
  detail::Backend& backend = detail::state_of(context).backend();
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(std::max(3, options.calls)));
  for (int r = 0; r < 3; ++r) {
    samples.push_back(
        bench::held_loop_ms(backend, options.loop, call));  // Note [held timing loops]
  }
  Timing timing;
  timing.kernel_ms = median(samples);
  samples.clear();
  for (int i = 0; i < options.calls; ++i) {
    const auto start = Clock::now();
    call();
    backend.synchronize();
    samples.push_back(ms_since(start));
  }
  timing.call_ms = median(samples);
  return timing;
}

std::string json_string(const std::string& text) {
  std::string out(1, '"');
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value) {
    field(key) << json_string(value);
    return *this;
  }
  JsonLine& add(const std::string& key, double value) {
    field(key) << value;
    return *this;
  }
  std::string str() const { return text_.str() + "}"; }

 private:
  std::ostream& field(const std::string& key) {
    text_ << (empty_ ? '{' : ',') << json_string(key) << ':';
    empty_ = false;
    return text_;
  }
  std::ostringstream text_;
  bool empty_ = true;
};

Context fresh_context() {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

std::string kind_of(const std::string& id) {
  if (id.rfind("cudnn:fused:engine:", 0) == 0) return "graph-api fused";
  if (id.rfind("cudnn:fused:legacy:", 0) == 0) return "legacy fused";
  if (id.rfind("unfused:", 0) == 0) return "unfused";
  return "other";
}

struct Row {
  std::string layer, config;
  double fused = -1, unfused = -1, separate = -1;
  std::string fused_algo;
};

JsonLine base_line(const char* variant, const Layer& layer, const std::string& config,
                   const ConvFusedDesc& desc) {
  JsonLine line;
  line.add("kind", "case")
      .add("variant", variant)
      .add("layer", layer.name)
      .add("config", config)
      .add("desc", desc.key())
      .add("repro", desc.repro());
  return line;
}

void run_fused(const Layer& layer, const std::string& config, const ConvFusedDesc& desc,
               const Options& options, Row& row) {
  Context context = fresh_context();
  Operands t = make_operands(desc, context);
  auto call = [&] {
    return conv_fused_fwd(context, desc, t.src, t.weights, &t.bias,
                          desc.residual ? &t.residual : nullptr, t.dst);
  };
  const auto heuristic = call();
  const Timing heuristic_timing = time_calls(
      context, [&] { call(); }, options);
  context.tune().fwd = AlgoPolicy::exhaustive();
  const auto start = Clock::now();
  const auto choice = call();
  context.synchronize();
  const double first_call_ms = ms_since(start);
  const Timing timing = time_calls(
      context, [&] { call(); }, options);
  row.fused = timing.kernel_ms;
  row.fused_algo = choice->algo.id;
  std::cout << base_line("fused", layer, config, desc)
                   .add("kernel_ms", timing.kernel_ms)
                   .add("call_ms", timing.call_ms)
                   .add("first_call_ms", first_call_ms)
                   .add("algo", choice->algo.id)
                   .add("algo_kind", kind_of(choice->algo.id))
                   .add("workspace", static_cast<double>(choice->algo.workspace_bytes))
                   .add("runner_up", choice->runner_up)
                   .add("candidates", static_cast<double>(choice->timings.size()))
                   .add("candidates_timed", choice->candidates_timed)
                   .add("heuristic_algo", heuristic->algo.id)
                   .add("heuristic_kernel_ms", heuristic_timing.kernel_ms)
                   .str()
            << std::endl;
}

void run_unfused(const Layer& layer, const std::string& config, const ConvFusedDesc& desc,
                 const Options& options, Row& row) {
  // The epilogue kernel goes on the stream the context queues its convolutions on. One stream
  // serves every run: a context on a caller's stream keeps its backend instance (and the memory
  // its allocator caches) for the rest of the process (Context::with_stream).
  static const cudaStream_t stream = [] {
    cudaStream_t created = nullptr;
    if (cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreateWithFlags failed");
    return created;
  }();
  {
    Context context = fresh_context().with_stream(stream);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    context.tune().fwd = AlgoPolicy::exhaustive();
    Operands t = make_operands(desc, context);
    namespace k = dnnx::cudnn::kernels::conv_fused;
    k::Shape shape;
    shape.batch = desc.conv.batch;
    shape.channels = desc.conv.out_channels;
    shape.spatial = desc.dst_dims().product() / (shape.batch * shape.channels);
    shape.channels_last = desc.conv.layout == Layout::channels_last;
    shape.relu = true;
    shape.residual_scale = desc.residual_scale;
    shape.element = desc.conv.dtype == DType::f16    ? k::Element::f16
                    : desc.conv.dtype == DType::bf16 ? k::Element::bf16
                                                     : k::Element::f32;
    std::shared_ptr<const Choice> choice;
    auto call = [&] {
      choice = conv_fwd(context, desc.conv, t.src, t.weights, t.dst);
      if (k::epilogue(shape, t.dst.data(), t.bias.data(),
                      desc.residual ? t.residual.data() : nullptr, t.dst.data(),
                      stream) != cudaSuccess)
        throw std::runtime_error("the epilogue kernel failed to launch");
    };
    const auto start = Clock::now();
    call();
    context.synchronize();
    const double first_call_ms = ms_since(start);
    const Timing timing = time_calls(context, call, options);
    row.unfused = timing.kernel_ms;
    std::cout << base_line("unfused", layer, config, desc)
                     .add("kernel_ms", timing.kernel_ms)
                     .add("call_ms", timing.call_ms)
                     .add("first_call_ms", first_call_ms)
                     .add("conv_algo", choice->algo.id)
                     .str()
              << std::endl;
  }
}

void run_separate(const Layer& layer, const std::string& config, const ConvFusedDesc& desc,
                  const Options& options, Row& row) {
  Context context = fresh_context();
  context.tune().fwd = AlgoPolicy::exhaustive();
  Operands t = make_operands(desc, context);
  const ConvDesc& conv = desc.conv;
  const AddDesc add = AddDesc::from_dims(conv.dst_dims(), conv.dst_dims(), desc.residual_scale,
                                         1.0f, conv.dtype, conv.layout);
  const ActivationDesc relu =
      ActivationDesc::from_dims(ActivationKind::relu, conv.dst_dims(), conv.dtype, conv.layout);
  std::shared_ptr<const Choice> choice;
  auto call = [&] {
    choice = conv_fwd(context, conv, t.src, t.weights, t.dst);
    conv_bias_fwd(context, conv, t.bias, t.dst);
    if (desc.residual) add_fwd(context, add, t.residual, t.dst);
    activation_fwd(context, relu, t.dst, t.dst);
  };
  const auto start = Clock::now();
  call();
  context.synchronize();
  const double first_call_ms = ms_since(start);
  const Timing timing = time_calls(context, call, options);
  row.separate = timing.kernel_ms;
  std::cout << base_line("separate", layer, config, desc)
                   .add("kernel_ms", timing.kernel_ms)
                   .add("call_ms", timing.call_ms)
                   .add("first_call_ms", first_call_ms)
                   .add("conv_algo", choice->algo.id)
                   .str()
            << std::endl;
}

std::string cell(double ms) {
  if (ms < 0) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << ms;
  return out.str();
}

std::string ratio(double a, double b) {
  if (a < 0 || b <= 0) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << a / b << 'x';
  return out.str();
}

bool wanted(const std::vector<std::string>& list, const std::string& item) {
  return list.empty() || std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  std::cout << std::setprecision(6);
  {
    Context probe(BackendKind::cudnn);
    std::cout << JsonLine()
                     .add("kind", "device")
                     .add("describe", probe.describe())
                     .add("fingerprint", probe.fingerprint())
                     .add("batch", static_cast<double>(options.batch))
                     .str()
              << std::endl;
  }
  std::vector<Row> rows;
  for (const std::string& config : options.configs) {
    const DType dtype = config.rfind("f16", 0) == 0    ? DType::f16
                        : config.rfind("bf16", 0) == 0 ? DType::bf16
                                                       : DType::f32;
    const Layout layout =
        config.find("nhwc") != std::string::npos ? Layout::channels_last : Layout::channels_first;
    for (const Layer& layer : default_layers()) {
      if (!wanted(options.layers, layer.name)) continue;
      ConvFusedDesc desc;
      desc.conv = ConvDesc::from_shapes(Dims{options.batch, layer.c, layer.h, layer.w},
                                        Dims{layer.o, layer.c, layer.k, layer.k}, {layer.stride},
                                        {layer.pad}, {1}, 1, dtype, layout);
      desc.bias = true;
      desc.residual = layer.residual;
      desc.activation = FusedActivation::relu;
      Row row;
      row.layer = layer.name;
      row.config = config;
      if (wanted(options.variants, "fused")) run_fused(layer, config, desc, options, row);
      if (wanted(options.variants, "unfused")) run_unfused(layer, config, desc, options, row);
      if (wanted(options.variants, "separate")) run_separate(layer, config, desc, options, row);
      rows.push_back(row);
    }
  }
  std::cout << "\nkernel-bound ms per call (batch " << options.batch << ")\n"
            << std::left << std::setw(12) << "layer" << std::setw(10) << "config" << std::right
            << std::setw(10) << "fused" << std::setw(10) << "unfused" << std::setw(10) << "separate"
            << std::setw(14) << "unfused/fused" << std::setw(15) << "separate/fused"
            << "  fused choice\n";
  for (const Row& row : rows) {
    std::cout << std::left << std::setw(12) << row.layer << std::setw(10) << row.config
              << std::right << std::setw(10) << cell(row.fused) << std::setw(10)
              << cell(row.unfused) << std::setw(10) << cell(row.separate) << std::setw(14)
              << ratio(row.unfused, row.fused) << std::setw(15) << ratio(row.separate, row.fused)
              << "  " << row.fused_algo << '\n';
  }
  return 0;
} catch (const std::exception& error) {
  std::cerr << "conv_fused_bench: " << error.what() << '\n';
  return 1;
}
