// dnnx's convolution on the cpu backend, as a user runs it: public API only, user-layout (NCHW)
// tensors, the exhaustive policy for every direction. The selection (timing every candidate)
// happens before the timed loop and is not counted; the loop then times the conv_* call itself,
// dispatch and choice-cache lookup included, since that is what dnnx adds over raw oneDNN.
// Timing as in Note [timing method] (bench_common.hpp); onednn_direct_bench is the yardstick.

#include <dnnx/dnnx.hpp>

#include "bench_common.hpp"

#include <benchmark/benchmark.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

using dnnx::bench::ConvShape;

struct Case {
  ConvShape shape;
  dnnx::ConvDesc desc;
  dnnx::Direction direction = dnnx::Direction::fwd;
  std::string name;  // "conv1/fwd/f32"
};

// The tensors of one desc, filled with the deterministic pattern. Each buffer serves both roles
// of its shape (src / diff_src, dst / diff_dst): a direction reads two and writes the third.
struct Tensors {
  dnnx::ConvDesc desc;
  dnnx::Tensor src, weights, dst;

  explicit Tensors(const dnnx::ConvDesc& d) : desc(d) {
    std::uint32_t seed = 1;
    for (dnnx::Tensor* tensor : {&src, &weights, &dst}) {
      const dnnx::Dims dims = tensor == &src       ? d.src_dims()
                              : tensor == &weights ? d.weights_dims()
                                                   : d.dst_dims();
      *tensor = dnnx::Tensor::empty(dims, d.dtype, d.layout);
      std::vector<float> values(static_cast<std::size_t>(tensor->numel()));
      dnnx::bench::fill_pattern(values.data(), values.size(), seed++);
      tensor->copy_from_f32(values);
    }
  }
};

std::shared_ptr<const dnnx::Choice> call(dnnx::Context& context, const Case& c, Tensors& t) {
  switch (c.direction) {
    case dnnx::Direction::fwd: return dnnx::conv_fwd(context, c.desc, t.src, t.weights, t.dst);
    case dnnx::Direction::bwd_data:
      return dnnx::conv_bwd_data(context, c.desc, t.dst, t.weights, t.src);
    case dnnx::Direction::bwd_weights:
      return dnnx::conv_bwd_weights(context, c.desc, t.src, t.dst, t.weights);
    case dnnx::Direction::fwd_training: break;  // not a convolution direction
  }
  return nullptr;
}

// The policy of every direction: exhaustive unless --policy names another (e.g.
// fixed:onednn:x64:gemm:jit:direct:plain, to time one candidate against onednn_direct_bench).
dnnx::AlgoPolicy& bench_policy() {
  static dnnx::AlgoPolicy policy = dnnx::AlgoPolicy::exhaustive();
  return policy;
}

dnnx::Context& bench_context() {
  static dnnx::Context context = [] {
    dnnx::Context made(dnnx::BackendKind::cpu);
    // A memory-only choice cache: every run selects afresh (a choice read from the persistent
    // tuning cache would have been timed by another process, under other conditions), and the
    // benchmark leaves the user's cache file alone.
    made.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
    for (dnnx::Direction direction :
         {dnnx::Direction::fwd, dnnx::Direction::bwd_data, dnnx::Direction::bwd_weights}) {
      made.tune().policy(direction) = bench_policy();
    }
    return made;
  }();
  return context;
}

void run_case(benchmark::State& state, const Case& c) {
  dnnx::Context& context = bench_context();
  // Google Benchmark calls this several times per case and the cases of one desc run one after
  // the other: keep the last desc's tensors, and only those, alive.
  static std::unique_ptr<Tensors> tensors;
  if (!tensors || !(tensors->desc == c.desc)) {
    tensors.reset();
    tensors = std::make_unique<Tensors>(c.desc);
  }
  try {
    const std::shared_ptr<const dnnx::Choice> choice =
        dnnx::conv_select(context, c.desc, c.direction);
    const std::shared_ptr<const dnnx::Choice> ran = call(context, c, *tensors);
    if (ran->algo.id != choice->algo.id) {
      state.SkipWithError(
          ("the call ran " + ran->algo.id + ", not the selected " + choice->algo.id).c_str());
      return;
    }
    for (auto _ : state) call(context, c, *tensors);
    state.SetLabel(choice->algo.id);
    state.counters["tuning_ms"] = choice->tuning_ms;
    state.counters["candidates_timed"] = choice->candidates_timed;
  } catch (const dnnx::Error& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * c.desc.macs() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--help") {
        std::cout << dnnx::bench::usage_text(argv[0])
                  << "  --policy      selection policy of every direction (default exhaustive; "
                     "e.g. fixed:<id>)\n";
      }
      if (arg.substr(0, 9) == "--policy=") {
        bench_policy() = dnnx::AlgoPolicy::parse(arg.substr(9));
      } else {
        argv[kept++] = argv[i];
      }
    }
    argc = kept;
    argv[argc] = nullptr;
    const dnnx::bench::Options options =
        dnnx::bench::take_options(argc, argv, DNNX_BENCH_DEFAULT_SHAPES);
    const std::vector<ConvShape> shapes = dnnx::bench::selected_shapes(options);

    benchmark::AddCustomContext("dnnx_version", std::string(dnnx::version()));
    benchmark::AddCustomContext("dnnx_backend", bench_context().describe());
    benchmark::AddCustomContext("policy", bench_policy().to_string());
    benchmark::AddCustomContext("batch", std::to_string(options.batch));
    benchmark::AddCustomContext("shapes", options.shapes_path);

    // Same order as onednn_direct_bench and compare_cpu.py: dtype, then shape, then direction.
    for (const std::string& dtype : options.dtypes) {
      for (const ConvShape& shape : shapes) {
        for (const std::string& direction : options.directions) {
          Case c;
          c.shape = shape;
          c.desc = dnnx::ConvDesc::from_shapes(
              dnnx::Dims{options.batch, shape.in_channels, shape.height, shape.width},
              dnnx::Dims{shape.out_channels, shape.group_channels, shape.kernel_h, shape.kernel_w},
              {shape.stride}, {shape.pad}, {1}, shape.groups(), dnnx::parse_dtype(dtype),
              dnnx::Layout::channels_first);
          c.direction = dnnx::parse_direction(direction);
          c.name = dnnx::bench::case_name(shape, direction, dtype);
          benchmark::RegisterBenchmark(c.name.c_str(),
                                       [c](benchmark::State& state) { run_case(state, c); })
              ->UseRealTime()
              ->ComputeStatistics("min", dnnx::bench::min_of)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
    return dnnx::bench::run_benchmarks(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << argv[0] << ": " << error.what() << "\n";
    return 2;
  }
}
