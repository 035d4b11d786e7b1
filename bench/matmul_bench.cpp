// Matrix multiplies of real networks on any backend, every direction: ResNet-50's classifier
// (a linear layer 2048 -> 1000 with bias), transformer blocks (a square 4096^3 product, a
// 4096 -> 1024 projection of 8192 tokens) and the batched attention products of a 12-head,
// 64-dim model at sequence length 512 (Q K^T and P V), and a transformer MLP's up-projection
// 1024 -> 4096 of 8192 tokens with a bias and a relu or gelu (tanh) epilogue, whose forward for
// training keeps the activation's state for the two backward passes. bench/compare_matmul.py
// runs it next to PyTorch (F.linear then F.relu / F.gelu composed) in the same run and prints the
// table.
//
// Timing as Note [layer timing method] in bench/layers_bench.cpp: exhaustive selection first (not
// counted), then `kernel`, the backend's timer around a loop of back-to-back calls, divided by
// the count, median of five loops; and `per call`, the median host time of single synchronized
// calls. Output: one JSON object per line, with the achieved TFLOP/s (2 m n k per product).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/matmul.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include "line_bench.hpp"

#include <algorithm>
#include <chrono>
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
using Clock = std::chrono::steady_clock;

// A case: a name and its desc (dtype filled per config). `rows` scales the linear layers' rows
// (the batch of samples or tokens) when --rows is given.
struct Shape {
  std::string name;
  MatmulDesc desc;
  std::string what;
};

MatmulDesc linear(std::int64_t rows, std::int64_t in, std::int64_t out, bool bias,
                  MatmulActivation activation = MatmulActivation::none) {
  MatmulDesc d;
  d.m = rows, d.k = in, d.n = out, d.transpose_b = true, d.bias = bias;
  d.activation = activation;
  return d;
}

MatmulDesc product(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                   bool transpose_b) {
  MatmulDesc d;
  d.batch = batch, d.m = m, d.n = n, d.k = k, d.transpose_b = transpose_b;
  return d;
}

// Every case. With `rows` > 0 (the CPU runs batch 8) the linear layers and the square product
// have that many rows and the attention products cover rows / 8 sequences (at least one).
std::vector<Shape> shapes(std::int64_t rows) {
  const auto classifier = [](std::int64_t m) {
    return Shape{"cls" + std::to_string(m), linear(m, 2048, 1000, true),
                 "ResNet-50 classifier, " + std::to_string(m) + " x 2048 -> 1000 + bias"};
  };
  const std::int64_t square = rows > 0 ? rows : 4096;
  const std::int64_t tokens = rows > 0 ? rows : 8192;
  const std::int64_t sequences = rows > 0 ? std::max<std::int64_t>(1, rows / 8) : 8;
  std::vector<Shape> list;
  if (rows > 0) {
    list.push_back(classifier(rows));
  } else {
    list.push_back(classifier(64));
    list.push_back(classifier(256));
  }
  list.push_back({"sq4096", product(1, square, 4096, 4096, false),
                  "square product " + std::to_string(square) + " x 4096 x 4096"});
  list.push_back({"proj", linear(tokens, 4096, 1024, false),
                  "projection, " + std::to_string(tokens) + " tokens x 4096 -> 1024"});
  const std::string heads = "12 heads x " + std::to_string(sequences) + " seqs";
  list.push_back({"attn_qk", product(sequences * 12, 512, 512, 64, true),
                  "attention Q K^T, " + heads + ", 512 x 64 x 512"});
  list.push_back({"attn_pv", product(sequences * 12, 512, 64, 512, false),
                  "attention P V, " + heads + ", 512 x 512 x 64"});
  for (const MatmulActivation act : {MatmulActivation::relu, MatmulActivation::gelu_tanh}) {
    const std::string name(to_string(act));
    list.push_back({"mlp_" + name, linear(tokens, 1024, 4096, true, act),
                    "MLP up-projection + " + name + ", " + std::to_string(tokens) +
                        " tokens x 1024 -> 4096 + bias"});
  }
  return list;
}

struct Options {
  BackendKind backend = BackendKind::automatic;
  std::vector<std::string> configs{"f16", "bf16", "f32"};
  std::vector<std::string> cases;  // empty: all
  std::int64_t rows = 0;
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
    } else if (flag == "--cases") {
      options.cases = split(value(), ',');
    } else if (flag == "--rows") {
      options.rows = std::stoll(value());
    } else if (flag == "--loop") {
      options.loop = std::stoi(value());
    } else if (flag == "--calls") {
      options.calls = std::stoi(value());
    } else if (flag == "--help" || flag == "-h") {
      std::cout << "matmul_bench [--backend cpu|cudnn|reference|auto] [--configs f16,bf16,f32]\n"
                   "             [--cases cls64,cls256,sq4096,proj,attn_qk,attn_pv,mlp_relu,\n"
                   "                      mlp_gelu_tanh]\n"
                   "             [--rows N (rows of the large products; attention: N/8 seqs)]\n"
                   "             [--loop 20] [--calls 20]\n";
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  if (options.loop < 1 || options.calls < 1 || options.rows < 0)
    throw std::invalid_argument("--loop and --calls must be >= 1, --rows >= 0");
  return options;
}

// Uniform values in [-1, 1) on the context's device.
Tensor filled(Context& context, const Dims& dims, DType dtype, unsigned seed) {
  Tensor host = Tensor::empty(dims, dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  for (float& v : values) v = uniform(rng);
  host.copy_from_f32(values);
  if (context.device().kind == Device::Kind::cpu) return host;
  Tensor device = context.empty(dims);
  copy(host, device);
  return device;
}

// The tensors of one case, every direction on them (a, b, bias double as their gradients); with
// an activation the training forward fills `state`, which the backward passes then read.
struct Tensors {
  Tensor a, b, bias, dst;
  SavedState state;
  std::shared_ptr<const Choice> call(Context& context, const MatmulDesc& d, Direction direction) {
    const bool act = d.activation != MatmulActivation::none;
    switch (direction) {
      case Direction::fwd: return matmul_fwd(context, d, a, b, bias, dst);
      case Direction::fwd_training: return matmul_fwd_training(context, d, a, b, bias, dst, state);
      case Direction::bwd_data:
        return act ? matmul_bwd_data(context, d, dst, b, a, state)
                   : matmul_bwd_data(context, d, dst, b, a);
      default:
        return act ? matmul_bwd_weights(context, d, a, dst, b, bias, state)
                   : matmul_bwd_weights(context, d, a, dst, b, bias);
    }
  }
};

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
    for (const Shape& shape : shapes(options.rows)) {
      if (!options.cases.empty() &&
          std::find(options.cases.begin(), options.cases.end(), shape.name) == options.cases.end())
        continue;
      Context context(options.backend, 0, parse_type_config(config));
      context.set_choice_cache(std::make_shared<ChoiceCache>());
      context.tune().verbose = std::getenv("DNNX_VERBOSE") != nullptr;
      MatmulDesc desc = shape.desc;
      desc.dtype = context.dtype();
      desc.validate();
      Tensors t;
      t.a = filled(context, desc.a_dims(), desc.dtype, 1);
      t.b = filled(context, desc.b_dims(), desc.dtype, 2);
      if (desc.bias) t.bias = filled(context, desc.bias_dims(), desc.dtype, 3);
      t.dst = filled(context, desc.dst_dims(), desc.dtype, 4);
      for (const Direction direction :
           {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
        if (direction == Direction::fwd_training && desc.activation == MatmulActivation::none)
          continue;
        context.tune().policy(OpKind::matmul, direction) = AlgoPolicy::exhaustive();
        const auto start = Clock::now();
        const auto choice = t.call(context, desc, direction);
        context.synchronize();
        const double first_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        const auto call = [&] { t.call(context, desc, direction); };
        const double kernel = bench::kernel_ms(context, options.loop, call);
        const double per_call = bench::per_call_ms(context, options.calls, call);
        std::cout << "{\"kind\": \"case\", \"case\": " << quoted(shape.name)
                  << ", \"shape\": " << quoted(shape.what) << ", \"config\": " << quoted(config)
                  << ", \"direction\": " << quoted(std::string(to_string(direction)))
                  << ", \"batch\": " << desc.batch << ", \"m\": " << desc.m << ", \"n\": " << desc.n
                  << ", \"k\": " << desc.k
                  << ", \"transpose_b\": " << (desc.transpose_b ? "true" : "false")
                  << ", \"bias\": " << (desc.bias ? "true" : "false")
                  << ", \"activation\": " << quoted(std::string(to_string(desc.activation)))
                  << ", \"algo\": " << quoted(choice->algo.id)
                  << ", \"candidates_timed\": " << choice->candidates_timed
                  << ", \"first_call_ms\": " << first_ms << ", \"kernel_ms\": " << kernel
                  << ", \"per_call_ms\": " << per_call
                  << ", \"tflops\": " << desc.flops() / (kernel * 1e9) << "}" << std::endl;
      }
    }
  }
  return 0;
} catch (const dnnx::Error& error) {
  std::cerr << "matmul_bench: " << error.what() << '\n';
  return 1;
} catch (const std::exception& error) {
  std::cerr << "matmul_bench: " << error.what() << '\n';
  return 2;
}
