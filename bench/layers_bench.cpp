// ResNet-50's layers other than convolution, at its sizes, on any backend: max-pool 3x3/2 on
// 112x112x64 (with argmax indices as PyTorch, and without), batch-norm training on 56x56x256 and
// 7x7x2048, relu on 56x56x256, softmax and cross-entropy over 1000 classes; forward and backward.
// bench/compare_layers.py runs it next to PyTorch in the same run and prints the table.
//
// Note [layer timing method]
// For each case and direction: exhaustive selection first (every candidate timed, not counted),
// then
//   kernel    the backend's timer (CUDA events on the stream; host clock + stream wait on cpu)
//             around a loop of `--loop` back-to-back calls, divided by the count; the median of
//             five such loops. On a GPU the stream is held while the loop is queued (the cudnn
//             backend's timing gate; PyTorch's, a sleep of its stream: Note [gated PyTorch
//             loops] in compare_gpu.py), so this is the device time per call whatever the host's;
//   per call  the median over `--calls` calls of the host wall time from the call to the end of
//             a synchronization: what a synchronous caller waits.
// compare_layers.py times PyTorch the same two ways. Output: one JSON object per line.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/activation.hpp>
#include <dnnx/ops/batch_norm.hpp>
#include <dnnx/ops/cross_entropy.hpp>
#include <dnnx/ops/pool.hpp>
#include <dnnx/ops/softmax.hpp>
#include <dnnx/tensor.hpp>

#include "line_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using bench::median;
using bench::quoted;
using bench::split;
using Clock = std::chrono::steady_clock;

struct Options {
  BackendKind backend = BackendKind::automatic;
  std::int64_t batch = 64;
  std::vector<std::string> configs{"f32_nchw", "f16_nhwc"};
  std::vector<std::string> cases{"maxpool", "maxpool_srcdst", "bnorm56", "bnorm7",
                                 "relu",    "softmax",        "xent"};
  int loop = 50;
  int calls = 30;
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
    } else if (flag == "--batch") {
      options.batch = std::stoll(value());
    } else if (flag == "--configs") {
      options.configs = split(value(), ',');
    } else if (flag == "--cases") {
      options.cases = split(value(), ',');
    } else if (flag == "--loop") {
      options.loop = std::stoi(value());
    } else if (flag == "--calls") {
      options.calls = std::stoi(value());
    } else if (flag == "--help" || flag == "-h") {
      std::cout << "layers_bench [--backend cpu|cudnn|reference|auto] [--batch 64]\n"
                   "             [--configs f32_nchw,f16_nhwc,bf16_nchw,...]\n"
                   "             [--cases maxpool,maxpool_srcdst,bnorm56,bnorm7,relu,softmax,\n"
                   "                      xent]\n"
                   "             [--loop 50] [--calls 30]\n"
                   "DNNX_VERBOSE set: every selection's decision line on stderr.\n";
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  if (options.batch < 1 || options.loop < 1 || options.calls < 1)
    throw std::invalid_argument("--batch, --loop and --calls must be >= 1");
  return options;
}

// Uniform values in [low, high) on the context's device, or the integers 0..classes-1 for labels.
Tensor filled(Context& context, const Dims& dims, DType dtype, Layout layout, float low, float high,
              unsigned seed) {
  Tensor host = Tensor::empty(dims, dtype, layout);
  std::mt19937 rng(seed);
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  if (is_floating(dtype)) {
    std::uniform_real_distribution<float> uniform(low, high);
    for (float& v : values) v = uniform(rng);
  } else {
    std::uniform_int_distribution<int> uniform(static_cast<int>(low), static_cast<int>(high) - 1);
    for (float& v : values) v = static_cast<float>(uniform(rng));
  }
  host.copy_from_f32(values);
  if (context.device().kind == Device::Kind::cpu) return host;
  Tensor device = Tensor::empty(dims, dtype, layout, context.allocator());
  copy(host, device);
  return device;
}

// One benchmark case: its tensors, and a call per direction.
struct Case {
  std::string name;
  std::string op;
  std::string shape;
  std::vector<Tensor> tensors;
  std::function<std::shared_ptr<const Choice>(Context&, Direction)> call;
};

// On the heap: the calls refer to the case's tensors.
std::unique_ptr<Case> make_case(const std::string& name, Context& context, std::int64_t n,
                                DType dtype, Layout layout) {
  auto owned = std::make_unique<Case>();
  Case& c = *owned;
  c.name = name;
  auto tensor = [&](const Dims& dims, float low, float high, DType type, Layout l, unsigned seed) {
    c.tensors.push_back(filled(context, dims, type, l, low, high, seed));
    return c.tensors.size() - 1;
  };
  // Tensors are created up front and referenced by index: the vector must not grow afterwards.
  c.tensors.reserve(16);
  if (name == "maxpool" || name == "maxpool_srcdst") {
    // maxpool: PyTorch's form, the forward saving i64 argmax indices and the backward reading
    // them (max_pool2d_with_indices and its backward); maxpool_srcdst: the backward from src and
    // dst, without indices.
    PoolDesc desc = PoolDesc::from_shapes(Dims{n, 64, 112, 112}, {3}, {2}, {1}, PoolMode::max,
                                          false, dtype, layout);
    desc.indices = name == "maxpool";
    const auto src = tensor(desc.src_dims(), -1, 1, dtype, layout, 1);
    const auto dst = tensor(desc.dst_dims(), -1, 1, dtype, layout, 2);
    const auto diff_dst = tensor(desc.dst_dims(), -1, 1, dtype, layout, 3);
    const auto diff_src = tensor(desc.src_dims(), -1, 1, dtype, layout, 4);
    const auto indices = tensor(desc.dst_dims(), 0, 1, DType::i64, layout, 5);
    c.op = "pool";
    c.shape = std::string(desc.indices ? "max 3x3/2 pad 1 (indices), " : "max 3x3/2 pad 1, ") +
              std::to_string(n) + "x64x112x112";
    c.call = [desc, src, dst, diff_dst, diff_src, indices, &c](Context& ctx, Direction direction) {
      auto& t = c.tensors;
      if (desc.indices) {
        if (direction == Direction::fwd) return pool_fwd(ctx, desc, t[src], t[dst], t[indices]);
        return pool_bwd(ctx, desc, t[diff_dst], t[indices], t[diff_src]);
      }
      if (direction == Direction::fwd) return pool_fwd(ctx, desc, t[src], t[dst]);
      return pool_bwd(ctx, desc, t[src], t[dst], t[diff_dst], t[diff_src]);
    };
    // The real forward output (and indices), so that backward routes gradients as in training.
    c.call(context, Direction::fwd);
  } else if (name == "bnorm56" || name == "bnorm7") {
    const Dims dims = name == "bnorm56" ? Dims{n, 256, 56, 56} : Dims{n, 2048, 7, 7};
    BatchNormDesc desc = BatchNormDesc::spatial_of(dims, true, dtype, layout);
    const Dims p = desc.param_dims();
    const auto src = tensor(dims, -1, 1, dtype, layout, 1);
    const auto dst = tensor(dims, -1, 1, dtype, layout, 2);
    const auto diff_dst = tensor(dims, -1, 1, dtype, layout, 3);
    const auto diff_src = tensor(dims, -1, 1, dtype, layout, 4);
    const auto scale = tensor(p, 0.5, 1.5, DType::f32, Layout::channels_first, 5);
    const auto shift = tensor(p, -0.5, 0.5, DType::f32, Layout::channels_first, 6);
    const auto running_mean = tensor(p, -0.1, 0.1, DType::f32, Layout::channels_first, 7);
    const auto running_var = tensor(p, 0.9, 1.1, DType::f32, Layout::channels_first, 8);
    const auto saved_mean = tensor(p, 0, 0.1, DType::f32, Layout::channels_first, 9);
    const auto saved_inv_std = tensor(p, 0.9, 1.1, DType::f32, Layout::channels_first, 10);
    const auto diff_scale = tensor(p, 0, 1, DType::f32, Layout::channels_first, 11);
    const auto diff_shift = tensor(p, 0, 1, DType::f32, Layout::channels_first, 12);
    c.op = "bnorm";
    c.shape = "training, spatial, " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
              "x" + std::to_string(dims[2]) + "x" + std::to_string(dims[3]);
    c.call = [=, &c](Context& ctx, Direction direction) {
      auto& t = c.tensors;
      BatchNormTensors bt;
      bt.scale = &t[scale];
      bt.shift = &t[shift];
      if (direction == Direction::fwd) {
        bt.running_mean = &t[running_mean];
        bt.running_var = &t[running_var];
        bt.saved_mean = &t[saved_mean];
        bt.saved_inv_std = &t[saved_inv_std];
        return batch_norm_fwd(ctx, desc, t[src], t[dst], bt);
      }
      bt.saved_mean = &t[saved_mean];
      bt.saved_inv_std = &t[saved_inv_std];
      return batch_norm_bwd(ctx, desc, t[src], t[diff_dst], bt, t[diff_src], &t[diff_scale],
                            &t[diff_shift]);
    };
    // Saved statistics from a real forward.
    c.call(context, Direction::fwd);
  } else if (name == "relu") {
    ActivationDesc desc;
    desc.kind = ActivationKind::relu;
    desc.dims = Dims{n, 256, 56, 56};
    desc.dtype = dtype;
    desc.layout = layout;
    const auto src = tensor(desc.dims, -1, 1, dtype, layout, 1);
    const auto dst = tensor(desc.dims, -1, 1, dtype, layout, 2);
    const auto diff_dst = tensor(desc.dims, -1, 1, dtype, layout, 3);
    const auto diff_src = tensor(desc.dims, -1, 1, dtype, layout, 4);
    c.op = "act";
    c.shape = "relu, " + std::to_string(n) + "x256x56x56";
    c.call = [=, &c](Context& ctx, Direction direction) {
      auto& t = c.tensors;
      if (direction == Direction::fwd) return activation_fwd(ctx, desc, t[src], t[dst]);
      return activation_bwd(ctx, desc, &t[src], &t[dst], t[diff_dst], t[diff_src]);
    };
    c.call(context, Direction::fwd);
  } else if (name == "softmax") {
    SoftmaxDesc desc;
    desc.dims = Dims{n, 1000};
    desc.mode = SoftmaxMode::channel;
    desc.dtype = dtype;
    desc.layout = layout;
    const auto src = tensor(desc.dims, -4, 4, dtype, layout, 1);
    const auto dst = tensor(desc.dims, 0, 1, dtype, layout, 2);
    const auto diff_dst = tensor(desc.dims, -1, 1, dtype, layout, 3);
    const auto diff_src = tensor(desc.dims, -1, 1, dtype, layout, 4);
    c.op = "softmax";
    c.shape = "softmax, " + std::to_string(n) + "x1000";
    c.call = [=, &c](Context& ctx, Direction direction) {
      auto& t = c.tensors;
      if (direction == Direction::fwd) return softmax_fwd(ctx, desc, t[src], t[dst]);
      return softmax_bwd(ctx, desc, t[dst], t[diff_dst], t[diff_src]);
    };
    c.call(context, Direction::fwd);
  } else if (name == "xent") {
    CrossEntropyDesc desc;
    desc.dims = Dims{n, 1000};
    desc.reduction = Reduction::mean;
    desc.label_dtype = DType::i64;
    desc.dtype = dtype;
    desc.layout = layout;
    const auto logits = tensor(desc.dims, -4, 4, dtype, layout, 1);
    const auto labels = tensor(desc.labels_dims(), 0, 1000, DType::i64, Layout::channels_first, 2);
    const auto loss = tensor(desc.loss_dims(), 0, 1, dtype, Layout::channels_first, 3);
    const auto diff_loss = tensor(desc.loss_dims(), 1, 1.0001f, dtype, Layout::channels_first, 4);
    const auto diff_logits = tensor(desc.dims, 0, 1, dtype, layout, 5);
    c.op = "xent";
    c.shape = "cross-entropy (mean), " + std::to_string(n) + "x1000";
    c.call = [=, &c](Context& ctx, Direction direction) {
      auto& t = c.tensors;
      if (direction == Direction::fwd)
        return cross_entropy_fwd(ctx, desc, t[logits], t[labels], nullptr, t[loss]);
      return cross_entropy_bwd(ctx, desc, t[logits], t[labels], nullptr, t[diff_loss],
                               t[diff_logits]);
    };
  } else {
    throw std::invalid_argument("unknown case " + name +
                                "; accepted: maxpool, maxpool_srcdst, bnorm56, bnorm7, relu, "
                                "softmax, xent");
  }
  return owned;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  std::cout << std::setprecision(6);
  {
    Context probe(options.backend);
    std::cout << "{\"kind\": \"device\", \"describe\": " << quoted(probe.describe())
              << ", \"fingerprint\": " << quoted(probe.fingerprint()) << "}\n";
  }
  for (const std::string& config : options.configs) {
    const DType dtype = parse_dtype(config.substr(0, config.find('_')));
    const Layout layout =
        config.find("nhwc") != std::string::npos ? Layout::channels_last : Layout::channels_first;
    for (const std::string& name : options.cases) {
      Context context(options.backend);
      context.set_choice_cache(std::make_shared<ChoiceCache>());
      // The selections' decision lines on stderr, as the library's own DNNX_VERBOSE would print.
      context.tune().verbose = std::getenv("DNNX_VERBOSE") != nullptr;
      const std::unique_ptr<Case> owned = make_case(name, context, options.batch, dtype, layout);
      Case& c = *owned;
      const OpKind op = parse_op_kind(c.op);
      for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
        context.tune().policy(op, direction) = AlgoPolicy::exhaustive();
        const auto start = Clock::now();
        const auto choice = c.call(context, direction);
        context.synchronize();
        const double first_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        const auto call = [&] { c.call(context, direction); };
        const double kernel = bench::kernel_ms(context, options.loop, call);
        const double per_call = bench::per_call_ms(context, options.calls, call);
        std::cout << "{\"kind\": \"case\", \"case\": " << quoted(name)
                  << ", \"shape\": " << quoted(c.shape) << ", \"config\": " << quoted(config)
                  << ", \"direction\": " << quoted(direction == Direction::fwd ? "fwd" : "bwd")
                  << ", \"algo\": " << quoted(choice->algo.id)
                  << ", \"candidates_timed\": " << choice->candidates_timed
                  << ", \"first_call_ms\": " << first_ms << ", \"kernel_ms\": " << kernel
                  << ", \"per_call_ms\": " << per_call << ", \"timings\": [";
        // The search's rows, as the selection left them (final-round contenders re-timed).
        for (std::size_t i = 0; i < choice->timings.size(); ++i) {
          const ProfileRow& row = choice->timings[i];
          std::cout << (i ? ", " : "") << "{\"id\": " << quoted(row.algo.id)
                    << ", \"status\": " << quoted(std::string(to_string(row.status)))
                    << ", \"median_ms\": " << (row.runs > 0 ? row.median_ms : -1.0)
                    << ", \"runs\": " << row.runs << ", \"detail\": " << quoted(row.detail) << "}";
        }
        std::cout << "]}" << std::endl;
      }
    }
  }
  return 0;
} catch (const dnnx::Error& error) {
  std::cerr << "layers_bench: " << error.what() << '\n';
  return 1;
} catch (const std::exception& error) {
  std::cerr << "layers_bench: " << error.what() << '\n';
  return 2;
}
