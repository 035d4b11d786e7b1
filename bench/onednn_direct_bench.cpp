// The yardstick for the cpu backend: the benchmark shapes run on oneDNN directly, with the best
// implementation oneDNN has for each. Every implementation of convolution_direct and
// convolution_winograd (next_impl) is timed, in five memory set-ups:
//   plain:         every tensor in the user's layout (NCHW / OIHW); no copies;
//   any:           format_tag::any everywhere, so oneDNN picks its blocked layouts;
//   nhwc:          activations channels-last, weights format_tag::any (the implementations that
//                  want NHWC, e.g. brgconv, are not offered for `any` activations);
//   reorders:      the layouts of `any`, with the reorders from and to the user's layout timed
//                  in every call;
//   nhwc_reorders: the layouts of `nhwc`, likewise with the reorders timed.
// any and nhwc leave the reorders out, as a framework that keeps its tensors in those layouts
// between layers avoids them: oneDNN's best case. The *_reorders set-ups are what a library that
// takes and returns user-layout tensors must do to use those implementations.
// The fastest implementation of each set-up is then timed like conv_bench (Note [timing method]
// in bench_common.hpp). dnnx takes and returns user-layout tensors, so the fair yardstick for it
// is the fastest of plain, reorders and nhwc_reorders; compare_cpu.py reports that and the
// fastest of plain, any and nhwc.
//
// This file is the one place outside src/backends/onednn that includes dnnl.hpp: its whole point
// is to measure raw oneDNN, without dnnx in between.

#include "bench_common.hpp"

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;
using dnnx::bench::ConvShape;

enum class Direction { fwd, bwd_data, bwd_weights };
enum class Formats { plain, any, nhwc, reorders, nhwc_reorders };

const char* to_string(Formats formats) {
  switch (formats) {
    case Formats::plain: return "plain";
    case Formats::any: return "any";
    case Formats::nhwc: return "nhwc";
    case Formats::reorders: return "reorders";
    case Formats::nhwc_reorders: return "nhwc_reorders";
  }
  return "?";
}
const char* to_string(dnnl::algorithm algorithm) {
  return algorithm == dnnl::algorithm::convolution_winograd ? "winograd" : "direct";
}

Direction parse_direction(const std::string& text) {
  if (text == "fwd") return Direction::fwd;
  if (text == "bwd_data") return Direction::bwd_data;
  return Direction::bwd_weights;  // take_options accepts nothing else
}

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2_vnni_2: return "avx2_vnni_2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
    default: return "isa_" + std::to_string(static_cast<int>(isa));
  }
}

// Whether the reorders from and to the user's layout are part of every timed call.
bool reorders_timed(Formats formats) {
  return formats == Formats::reorders || formats == Formats::nhwc_reorders;
}

struct Case {
  ConvShape shape;
  std::int64_t batch = 8;
  Direction direction = Direction::fwd;
  memory::data_type dtype = memory::data_type::f32;
  std::string dtype_name;
  Formats formats = Formats::plain;
  std::string name;  // "conv1/fwd/f32/plain"
};

// The three tensors of a direction in execute-argument order: two read, one written.
struct Roles {
  int in0, in1, out;
};
Roles roles(Direction direction) {
  switch (direction) {
    case Direction::fwd: return {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    case Direction::bwd_data: return {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    case Direction::bwd_weights: return {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS};
  }
  return {};
}

// Logical shapes and plain tags of one case.
struct Geometry {
  memory::dims src, weights, dst, strides, dilates, pad_l, pad_r;
  memory::format_tag weights_tag;

  explicit Geometry(const Case& c) {
    const ConvShape& s = c.shape;
    src = {c.batch, s.in_channels, s.height, s.width};
    dst = {c.batch, s.out_channels, s.out_height(), s.out_width()};
    if (s.groups() == 1) {
      weights = {s.out_channels, s.group_channels, s.kernel_h, s.kernel_w};
      weights_tag = memory::format_tag::oihw;
    } else {
      weights = {s.groups(), s.out_channels / s.groups(), s.group_channels, s.kernel_h, s.kernel_w};
      weights_tag = memory::format_tag::goihw;
    }
    strides = {s.stride, s.stride};
    dilates = {0, 0};  // oneDNN counts dilation from 0
    pad_l = {s.pad, s.pad};
    pad_r = {s.pad, s.pad};
  }
  // The user (plain) descriptor of the tensor bound to `arg`, in `dtype`.
  memory::desc user_md(int arg, memory::data_type dtype) const {
    switch (arg) {
      case DNNL_ARG_SRC:
      case DNNL_ARG_DIFF_SRC: return {src, dtype, memory::format_tag::nchw};
      case DNNL_ARG_DST:
      case DNNL_ARG_DIFF_DST: return {dst, dtype, memory::format_tag::nchw};
      default: return {weights, dtype, weights_tag};
    }
  }
};

// A conv primitive descriptor at its first implementation (empty if none) and, for the backward
// directions, the forward hint it was made with: oneDNN's backward descriptor keeps a plain
// pointer to the hint and reads it again in next_impl(), so the hint must outlive it.
struct ConvPd {
  dnnl::convolution_forward::primitive_desc hint;
  dnnl::primitive_desc pd;
};

// The descriptor of `c` for `algorithm`.
ConvPd make_pd(const dnnl::engine& engine, const Case& c, const Geometry& g,
               dnnl::algorithm algorithm) {
  memory::format_tag activations = memory::format_tag::any;
  memory::format_tag weights_tag = memory::format_tag::any;
  if (c.formats == Formats::plain) {
    activations = memory::format_tag::nchw;
    weights_tag = g.weights_tag;
  } else if (c.formats == Formats::nhwc || c.formats == Formats::nhwc_reorders) {
    activations = memory::format_tag::nhwc;
  }
  const memory::desc src(g.src, c.dtype, activations);
  const memory::desc dst(g.dst, c.dtype, activations);
  const memory::desc weights(g.weights, c.dtype, weights_tag);
  dnnl::primitive_attr attr;
  // dnnx's cpu backend passes its own workspace too; this keeps allocation out of every call.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // forward_training, as dnnx uses: the backward passes need a forward hint of the same kind.
  const dnnl::convolution_forward::primitive_desc forward(
      engine, dnnl::prop_kind::forward_training, algorithm, src, weights, dst, g.strides, g.dilates,
      g.pad_l, g.pad_r, attr, /*allow_empty=*/true);
  if (!forward || c.direction == Direction::fwd) return {{}, forward};
  if (c.direction == Direction::bwd_data) {
    return {forward, dnnl::convolution_backward_data::primitive_desc(
                         engine, algorithm, src, weights, dst, g.strides, g.dilates, g.pad_l,
                         g.pad_r, forward, attr, /*allow_empty=*/true)};
  }
  return {forward, dnnl::convolution_backward_weights::primitive_desc(
                       engine, algorithm, src, weights, dst, g.strides, g.dilates, g.pad_l, g.pad_r,
                       forward, attr, /*allow_empty=*/true)};
}

memory::desc query_md(const dnnl::primitive_desc& pd, int arg) {
  switch (arg) {
    case DNNL_ARG_SRC: return pd.src_desc();
    case DNNL_ARG_DIFF_SRC: return pd.diff_src_desc();
    case DNNL_ARG_WEIGHTS: return pd.weights_desc();
    case DNNL_ARG_DIFF_WEIGHTS: return pd.diff_weights_desc();
    case DNNL_ARG_DST: return pd.dst_desc();
    default: return pd.diff_dst_desc();
  }
}

bool is_weights(int arg) { return arg == DNNL_ARG_WEIGHTS || arg == DNNL_ARG_DIFF_WEIGHTS; }

// oneDNN's name for a layout ("nchw", "nChw16c", "OIhw16i16o") from the descriptor's strides
// and inner blocks: which layouts an implementation wants is part of why it wins or loses.
std::string format_name(const memory::desc& md, bool is_weights) {
  const memory::dims strides = md.get_strides();
  const memory::dims blocks = md.get_inner_blks();
  const memory::dims block_dims = md.get_inner_idxs();
  const int rank = md.get_ndims();
  const std::string letters = is_weights ? (rank == 5 ? "goihw" : "oihw") : "nchw";
  std::vector<int> order(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return strides[static_cast<std::size_t>(a)] > strides[static_cast<std::size_t>(b)];
  });
  std::string name;
  for (int dim : order) {
    const bool blocked = std::find(block_dims.begin(), block_dims.end(), dim) != block_dims.end();
    const char letter = letters[static_cast<std::size_t>(dim)];
    name += blocked ? static_cast<char>(letter - 'a' + 'A') : letter;
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    name += std::to_string(blocks[i]) + letters[static_cast<std::size_t>(block_dims[i])];
  }
  return name;
}

// "nChw16c OIhw16i16o nChw16c": the layouts of the direction's three tensors.
std::string formats_of(const dnnl::primitive_desc& pd, Direction direction);

// One implementation, built and bound to memory, ready to execute: the conv and, for
// the *_reorders set-ups, the reorders around it, in order.
struct Runnable {
  std::string impl;  // "jit:avx512_core (direct)"
  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, memory> args;
  };
  std::vector<Step> steps;

  void execute(dnnl::stream& stream) {
    for (Step& step : steps) step.primitive.execute(stream, step.args);
    stream.wait();
  }
};

// Inputs get the deterministic pattern, reordered from plain f32 so that blocked layouts carry
// the zero padding oneDNN expects; the output starts at zero.
Runnable bind(const dnnl::engine& engine, dnnl::stream& stream, const Case& c, const Geometry& g,
              const dnnl::primitive_desc& pd, std::string impl) {
  const Roles r = roles(c.direction);
  Runnable::Step conv{dnnl::primitive(pd), {}};
  std::vector<Runnable::Step> before, after;
  std::uint32_t seed = 1;
  for (int arg : {r.in0, r.in1}) {
    memory pattern(g.user_md(arg, memory::data_type::f32), engine);
    dnnx::bench::fill_pattern(static_cast<float*>(pattern.get_data_handle()),
                              pattern.get_desc().get_size() / sizeof(float), seed++);
    memory inner(query_md(pd, arg), engine);
    if (reorders_timed(c.formats) && inner.get_desc() != g.user_md(arg, c.dtype)) {
      memory user(g.user_md(arg, c.dtype), engine);
      dnnl::reorder(pattern, user).execute(stream, pattern, user);
      before.push_back({dnnl::reorder(user, inner), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}}});
    } else {
      dnnl::reorder(pattern, inner).execute(stream, pattern, inner);
    }
    conv.args.emplace(arg, inner);
  }
  memory out(query_md(pd, r.out), engine);
  std::fill_n(static_cast<unsigned char*>(out.get_data_handle()), out.get_desc().get_size(), 0);
  if (reorders_timed(c.formats) && out.get_desc() != g.user_md(r.out, c.dtype)) {
    memory user(g.user_md(r.out, c.dtype), engine);
    after.push_back({dnnl::reorder(out, user), {{DNNL_ARG_FROM, out}, {DNNL_ARG_TO, user}}});
  }
  conv.args.emplace(r.out, out);
  conv.args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine));
  stream.wait();
  Runnable runnable{std::move(impl), std::move(before)};
  runnable.steps.push_back(std::move(conv));
  for (Runnable::Step& step : after) runnable.steps.push_back(std::move(step));
  return runnable;
}

std::string formats_of(const dnnl::primitive_desc& pd, Direction direction) {
  const Roles r = roles(direction);
  std::string text;
  for (int arg : {r.in0, r.in1, r.out}) {
    if (!text.empty()) text += ' ';
    text += format_name(query_md(pd, arg), is_weights(arg));
  }
  return text;
}

double run_ms(Runnable& runnable, dnnl::stream& stream) {
  const auto start = std::chrono::steady_clock::now();
  runnable.execute(stream);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The sweep's per-implementation timing: one untimed warm-up run, then the median of 5 runs; an
// implementation whose first timed run is over 4x the best median so far is dropped after it, so
// slow fallbacks do not take minutes. The abandon test must not look at the warm-up run: a first
// call can carry one-time costs many times the steady time (oneDNN generates its gemm kernels
// on first use: 63 ms instead of 3.4 ms for l1.expand fwd).
constexpr int sweep_runs = 5;
constexpr double abandon_factor = 4.0;

struct Selected {
  std::string case_name;
  std::unique_ptr<Runnable> best;
  double sweep_ms = 0;
  int timed = 0;
};

// Times every implementation of `c` and keeps the fastest. Logs one line per implementation to
// stderr (which implementation wins is what the backend engineer needs to know).
Selected select_best(const dnnl::engine& engine, dnnl::stream& stream, const Case& c) {
  const Geometry g(c);
  Selected selected{c.name, nullptr, std::numeric_limits<double>::infinity(), 0};
  std::string log;
  std::set<std::string> seen;
  for (dnnl::algorithm algorithm :
       {dnnl::algorithm::convolution_direct, dnnl::algorithm::convolution_winograd}) {
    ConvPd conv_pd = make_pd(engine, c, g, algorithm);
    dnnl::primitive_desc& pd = conv_pd.pd;
    if (!pd) {
      log += std::string("  ") + to_string(algorithm) + ": no implementation\n";
      continue;
    }
    do {
      std::string impl = std::string(pd.impl_info_str()) + " (" + to_string(algorithm) + ", " +
                         formats_of(pd, c.direction) + ")";
      // oneDNN's reference loops are its correctness fallback, never its best; one run of them
      // takes minutes on these shapes, before the abandon rule could drop them.
      if (impl.rfind("ref:", 0) == 0) {
        log += "  " + impl + ": skipped (reference implementation)\n";
        continue;
      }
      // next_impl() can list an implementation (same name and layouts) more than once: seen in
      // oneDNN 3.2 once an earlier case had built primitives of the same desc.
      if (!seen.insert(impl).second) continue;
      try {
        Runnable runnable = bind(engine, stream, c, g, pd, impl);
        run_ms(runnable, stream);
        const double first = run_ms(runnable, stream);
        if (first > abandon_factor * selected.sweep_ms) {
          log += "  " + impl + ": abandoned, first timed run " + std::to_string(first) + " ms\n";
          continue;
        }
        std::vector<double> times{first};
        while (static_cast<int>(times.size()) < sweep_runs)
          times.push_back(run_ms(runnable, stream));
        std::nth_element(times.begin(), times.begin() + sweep_runs / 2, times.end());
        const double median = times[sweep_runs / 2];
        ++selected.timed;
        log += "  " + impl + ": " + std::to_string(median) + " ms\n";
        if (median < selected.sweep_ms) {
          selected.sweep_ms = median;
          selected.best = std::make_unique<Runnable>(std::move(runnable));
        }
      } catch (const dnnl::error& error) {
        log += "  " + impl + ": failed: " + error.what() + "\n";
      }
    } while (pd.next_impl());
  }
  std::cerr << c.name << " (" << c.shape.describe(c.batch) << "):\n" << log;
  if (selected.best) std::cerr << "  best: " << selected.best->impl << "\n";
  return selected;
}

void run_case(benchmark::State& state, const Case& c) {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static dnnl::stream stream(engine);
  // Google Benchmark calls this function several times per case (warm-up, repetitions) and the
  // cases run one after the other: keep the last case's selection, and only that one, alive.
  static Selected current;
  if (current.case_name != c.name) {
    current = Selected{};
    current = select_best(engine, stream, c);
  }
  if (!current.best) {
    state.SkipWithError("oneDNN has no implementation for this case");
    return;
  }
  Runnable& runnable = *current.best;
  run_ms(runnable, stream);
  for (auto _ : state) runnable.execute(stream);
  state.SetLabel(runnable.impl);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * c.shape.macs(c.batch) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sweep_ms"] = current.sweep_ms;
  state.counters["impls_timed"] = current.timed;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    for (int i = 1; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--help") std::cout << dnnx::bench::usage_text(argv[0]);
    }
    const dnnx::bench::Options options =
        dnnx::bench::take_options(argc, argv, DNNX_BENCH_DEFAULT_SHAPES);
    const std::vector<ConvShape> shapes = dnnx::bench::selected_shapes(options);

    const dnnl::version_t* version = dnnl::version();
    benchmark::AddCustomContext(
        "onednn_version", std::to_string(version->major) + "." + std::to_string(version->minor) +
                              "." + std::to_string(version->patch) + " (" + version->hash + ")");
    benchmark::AddCustomContext("onednn_isa", isa_name(dnnl::get_effective_cpu_isa()));
    benchmark::AddCustomContext("batch", std::to_string(options.batch));
    benchmark::AddCustomContext("shapes", options.shapes_path);

    // Same order as conv_bench and compare_cpu.py: dtype, then shape, then direction.
    for (const std::string& dtype : options.dtypes) {
      for (const ConvShape& shape : shapes) {
        for (const std::string& direction : options.directions) {
          for (Formats formats : {Formats::plain, Formats::any, Formats::nhwc, Formats::reorders,
                                  Formats::nhwc_reorders}) {
            Case c;
            c.shape = shape;
            c.batch = options.batch;
            c.direction = parse_direction(direction);
            c.dtype = dtype == "bf16" ? memory::data_type::bf16 : memory::data_type::f32;
            c.dtype_name = dtype;
            c.formats = formats;
            c.name = dnnx::bench::case_name(shape, direction, dtype) + "/" + to_string(formats);
            benchmark::RegisterBenchmark(c.name.c_str(),
                                         [c](benchmark::State& state) { run_case(state, c); })
                ->UseRealTime()
                ->ComputeStatistics("min", dnnx::bench::min_of)
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
    return dnnx::bench::run_benchmarks(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << argv[0] << ": " << error.what() << "\n";
    return 2;
  }
}
