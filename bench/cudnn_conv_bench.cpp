// dnnx's cudnn backend on the benchmark shapes: exhaustive selection per layer and direction, then
// the chosen candidate timed two ways, and the host overhead of one conv call.
//
// Note [gpu timing method]
// bench/compare_gpu.py times PyTorch the same way, in the same run:
//   first call  wall time of the first call on fresh tensors, for a desc the process has not
//               seen: dnnx's exhaustive search (listing the candidates, plan builds and timing
//               of every admissible candidate) or PyTorch's cudnn.benchmark search, plus the
//               call itself; synchronized;
//   kernel      CUDA events on the backend's stream around a loop of `--loop` back-to-back calls,
//               divided by the count, after warm-up, the stream held while the loop is queued
//               (dnnx: the backend's timing gate, Note [gated timing], held for as long as the
//               loop takes to queue, Note [held timing loops] in line_bench.hpp; PyTorch: a
//               sleep of the stream, Note [gated PyTorch loops] in compare_gpu.py): the GPU time
//               per call, whatever the host's time per call;
//   per call    the median over `--calls` calls of the host wall time from the call to the end of
//               a stream synchronization: what a synchronous caller waits.
// Host overhead: a tiny convolution whose kernel takes a few microseconds; batches of 100 calls are
// issued without synchronizing (they fit in the launch queue, so the host never waits for the
// GPU) and the median host time per call is reported: through the op layer (conv_fwd...), for the
// chosen plan's execute() alone, and for a legacy algorithm through the op layer.
//
// Output: one JSON object per line (the comparison script reads them), then a summary table.
// The shape file's fields are read here rather than through bench_common.hpp, which needs Google
// Benchmark: this program runs on the GPU machine, where only dnnx and the CUDA libraries are.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "line_bench.hpp"
#include "ops/context_state.hpp"
#include "ops/dispatch.hpp"
#include "shapes/shapes_file.hpp"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace dnnx;
using Clock = std::chrono::steady_clock;

// Note [crash report]
// A suite run once died with a segmentation fault and no word of where. The case being measured
// is kept in a fixed buffer, and a fatal signal writes it and the stack's return addresses to
// stderr (write and backtrace_symbols_fd only: no allocation in the handler; backtrace is called
// once at start so that its library is loaded), then dies of the same signal as before.
char current_case[256] = "(before the first case)";

void set_current_case(const std::string& name) {
  const std::size_t n = std::min(name.size(), sizeof current_case - 1);
  std::copy_n(name.data(), n, current_case);
  current_case[n] = '\0';
}

void write_text(const char* text) {
  std::size_t n = 0;
  while (text[n] != '\0') ++n;
  while (n > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, n);
    if (written <= 0) return;
    text += written;
    n -= static_cast<std::size_t>(written);
  }
}

extern "C" void on_fatal_signal(int signal_number) {
  write_text("cudnn_conv_bench: fatal signal ");
  write_text(signal_number == SIGSEGV  ? "SIGSEGV"
             : signal_number == SIGBUS ? "SIGBUS"
             : signal_number == SIGFPE ? "SIGFPE"
             : signal_number == SIGILL ? "SIGILL"
                                       : "SIGABRT");
  write_text(" during case ");
  write_text(current_case);
  write_text("; stack:\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_crash_report() {
  void* frames[1];
  backtrace(frames, 1);
  for (const int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(signal_number, on_fatal_signal);
}

// One layer of a shapes file (Note [shapes file lines]): 1-, 2- or 3-D, groups, dilation.
struct Shape {
  std::string name;
  std::vector<std::int64_t> src;      // C x spatial
  std::vector<std::int64_t> weights;  // O x C/groups x kernel
  std::vector<std::int64_t> stride, pad, dilation{1};
  std::int64_t groups = 1;
  std::vector<std::string> tags;

  ConvDesc desc(std::int64_t batch, DType dtype, Layout layout) const {
    std::vector<std::int64_t> dims{batch};
    dims.insert(dims.end(), src.begin(), src.end());
    return ConvDesc::from_shapes(Dims(std::span<const std::int64_t>(dims)),
                                 Dims(std::span<const std::int64_t>(weights)), stride, pad,
                                 dilation, groups, dtype, layout);
  }
};

// The sizes of a `CxHxW`-style field, or an empty list when one is not an integer >= 1.
std::vector<std::int64_t> split_dims(const std::string& text) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) {
    const auto value = shapes::parse_int(part, 1);
    if (!value) return {};
    values.push_back(*value);
  }
  return values;
}

struct ShapesFile {
  std::vector<Shape> shapes;
  std::int64_t batch = 0;  // the file's `batch=N`; 0 when absent
};

// `name src weights stride pad count [options] [tags...]` per line, `batch=N` directives (Note
// [shapes file lines]); layers carrying `tag` ("all" or "": every layer). Every layer's desc is
// validated at batch 1, so a bad field is an error naming its line before anything runs.
ShapesFile read_shapes(const std::string& path, const std::string& tag) {
  const auto lines = shapes::read_lines(path);
  if (!lines) throw std::runtime_error("cannot read shape file " + path);
  ShapesFile file;
  if (const std::string error = shapes::parse_directives(*lines, file.batch); !error.empty())
    throw std::runtime_error(path + ": " + error);
  for (const shapes::Line& line : *lines) {
    if (shapes::is_directive(line)) continue;
    const std::vector<std::string>& fields = line.fields;
    const std::string where = path + ":" + std::to_string(line.number);
    if (fields.size() < 6)
      throw std::runtime_error(where +
                               ": expected 'name src weights stride pad count [options] "
                               "[tags]', got " +
                               std::to_string(fields.size()) + " fields");
    Shape s;
    s.name = fields[0];
    s.src = split_dims(fields[1]);
    s.weights = split_dims(fields[2]);
    if (s.src.size() < 2 || s.src.size() > 4 || s.weights.size() != s.src.size() + 1)
      throw std::runtime_error(where + ": src '" + fields[1] + "' must be C x 1 to 3 spatial " +
                               "sizes and weights '" + fields[2] +
                               "' O x C/groups x as many kernel sizes (integers >= 1)");
    const auto stride = shapes::parse_int_list(fields[3], 1);
    const auto pad = shapes::parse_int_list(fields[4], 0);
    if (!stride || !pad || !shapes::parse_int(fields[5], 1))
      throw std::runtime_error(where + ": stride '" + fields[3] + "', pad '" + fields[4] +
                               "' (integers or comma-separated lists) or count '" + fields[5] +
                               "' (an integer >= 1) is malformed");
    s.stride = *stride;
    s.pad = *pad;
    shapes::LayerOptions options;
    if (const std::string error = shapes::parse_options(fields, 6, options); !error.empty())
      throw std::runtime_error(where + ": " + error);
    s.groups = s.src[0] % s.weights[1] == 0 ? s.src[0] / s.weights[1] : 1;
    if (options.groups != 0 && options.groups != s.groups)
      throw std::runtime_error(
          where + ": groups=" + std::to_string(options.groups) +
          " disagrees with src C / weights' C/groups = " + std::to_string(s.groups));
    if (!options.dilation.empty()) s.dilation = options.dilation;
    s.tags = options.tags;
    try {
      s.desc(1, DType::f32, Layout::channels_first);
    } catch (const std::exception& error) {
      throw std::runtime_error(where + ": layer '" + s.name + "': " + error.what());
    }
    if (tag.empty() || tag == "all" || std::find(s.tags.begin(), s.tags.end(), tag) != s.tags.end())
      file.shapes.push_back(s);
  }
  return file;
}

// Note [choices across processes]
// A program that keeps its choices (the choice cache's file, and cuDNN's plans saved beside it)
// pays the search in its first process only. --choices-file gives every case a cache backed by
// one file, as such a program has; a run with --reuse over a file an earlier run wrote measures
// what a later process pays instead: its first call reads the choice, re-validates it (describes
// the one id, builds or loads its plan) and runs, with no listing. Its record says whether the
// file answered (`from_file`); a case the file did not answer searched within its first call.
// A later process is one program with one cache for all its layers, so the --reuse run's cases
// share one cache object: the share of the search it may spend on the late plans it settles is
// pooled over every choice it reads (Note [settling credit] in src/ops/dispatch.cpp), as in a
// program's second process; a cache per case would give each case a process's share and its
// one overrunning settling. The searching run keeps a cache per case (each case a first call
// on a desc the process has not seen).
// bench/compare_gpu.py's --reuse-choices makes the first of its rounds write the file and the
// later ones reuse it (Note [suite rounds]).

// Note [the program's next step]
// A search may leave late plans: runtime-compiled candidates still compiling when its compile
// budget ran out (Note [late plans] in src/ops/dispatch.cpp). A program calls each layer again at
// its next step, and a call whose choice lists late plans times those that have come to hand
// against the choice (outside the settling credit of a later process), so a program's first
// process has settled most of its late plans within seconds of its searches, and writes the
// settled choices to its file. The benchmark's cases are each called in one stretch and never
// again, so without more its choices file would hand a later process every late plan, which that
// process settles within its credit and leaves the rest to the process after it: the suite's
// second round then ran a search's choice that the program's own first process would have
// replaced (odd sizes' dw.prime.3x3 fwd in f16: the depthwise kernel at 0.070 ms in two rounds,
// cuDNN's runtime-compiled engine 80 at 0.014 ms in the third). So a searching run with a choices
// file ends as a program's next step would: it selects every case once more in its order
// (conv_select, through the case's own cache, on scratch tensors when a late plan is timed), and
// records per case what that took, the choice and late plans after it and the choice's search
// figures (kind `next_step`); the late plans not yet at hand stay listed for a later process. The
// cases' own records (their kernel times among them) are the search's choice, as before.
struct Options {
  std::string shapes = DNNX_BENCH_DEFAULT_SHAPES;
  std::string tag = "bench";
  std::int64_t batch = 0;  // 0: the shapes file's batch=N, else 64
  int max_layers = 0;      // 0: every layer the tag selects
  std::vector<std::string> layers;  // empty: every layer the tag selects; else these, in order
  double budget_s = 0;     // 0: no budget; else no new layer starts after this many seconds
  std::vector<std::string> configs{"f16_nhwc", "f32_nchw"};
  int loop = 50;
  int calls = 20;
  bool overhead_only = false;
  bool study = false;  // Note [search study]
  // Note [choices across processes]
  std::string choices_file;  // a choice-cache file every case reads and writes ("": none)
  bool reuse = false;        // the cases' choices come from choices_file: no listing first
  bool heuristic = true;     // also time the heuristic pick (--no-heuristic: not)
  int search_rows = 6;       // rows of the search in each record (0: every row)
  // The operands' values: one uniform draw per element (false), or dnnx's scratch tensors'
  // block of draws repeated (detail::random_tensor, Note [scratch data] in
  // src/ops/dispatch.cpp): --fill block compares a search on the user's tensors with one on
  // scratch tensors, which should time the same.
  bool scratch_fill = false;
  // The directions run per layer, in this order (--directions fwd,bwd_weights): one alone in a
  // fresh process shows what the cases before it in the same process change.
  std::vector<Direction> directions{Direction::fwd, Direction::bwd_data, Direction::bwd_weights};
  // The search's fastest N rows timed again in the benchmark's loop (loop_rows_json): whether
  // the loop ranks them as the search did (0: not).
  int loop_rows = 0;
  // Note [the program's next step]: a searching run with a choices file selects every case
  // once more after the last (--no-next-step: not).
  bool next_step = true;
  // Note [profiled loops]: this many calls of each case's choice between cudaProfilerStart and
  // cudaProfilerStop after its timing (0: none); no host-overhead records then.
  int profile_loop = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--shapes")
      o.shapes = value();
    else if (arg == "--tag")
      o.tag = value();
    else if (arg == "--batch")
      o.batch = std::stoll(value());
    else if (arg == "--max-layers")
      o.max_layers = std::stoi(value());
    else if (arg == "--layers") {
      std::stringstream in(value());
      for (std::string name; std::getline(in, name, ',');) o.layers.push_back(name);
    } else if (arg == "--budget-s")
      o.budget_s = std::stod(value());
    else if (arg == "--configs") {
      o.configs.clear();
      std::stringstream in(value());
      for (std::string c; std::getline(in, c, ',');) o.configs.push_back(c);
    } else if (arg == "--loop")
      o.loop = std::stoi(value());
    else if (arg == "--calls")
      o.calls = std::stoi(value());
    else if (arg == "--overhead-only")
      o.overhead_only = true;
    else if (arg == "--study")
      o.study = true;
    else if (arg == "--choices-file")
      o.choices_file = value();
    else if (arg == "--reuse")
      o.reuse = true;
    else if (arg == "--no-heuristic")
      o.heuristic = false;
    else if (arg == "--search-rows")
      o.search_rows = std::stoi(value());
    else if (arg == "--loop-rows")
      o.loop_rows = std::stoi(value());
    else if (arg == "--directions") {
      o.directions.clear();
      std::stringstream in(value());
      for (std::string name; std::getline(in, name, ',');) {
        const Direction direction = parse_direction(name);
        if (direction == Direction::fwd_training)
          throw std::runtime_error("--directions: fwd_training is not a convolution direction");
        o.directions.push_back(direction);
      }
    } else if (arg == "--fill") {
      const std::string fill = value();
      if (fill == "block")
        o.scratch_fill = true;
      else if (fill != "random")
        throw std::runtime_error("--fill is random or block, not '" + fill + "'");
    } else if (arg == "--no-next-step") {
      o.next_step = false;
    } else if (arg == "--profile-loop") {
      o.profile_loop = std::stoi(value());
    } else if (arg == "--help") {
      std::cout
          << "cudnn_conv_bench [--shapes FILE] [--tag bench|all] [--batch N]\n"
             "  [--configs f16_nhwc,f32_nchw] [--loop 50] [--calls 20] [--overhead-only]\n"
             "  [--max-layers N]  (the first N layers the tag selects)\n"
             "  [--layers A,B]    (only these layers of the file, in this order)\n"
             "  [--budget-s S]    (no new layer starts after S seconds; a 'budget' record\n"
             "                     names what was left out)\n"
             "  --batch defaults to the shapes file's batch=N line, else 64\n"
             "  [--study]  (every candidate on the full problem and on a slice, no selection)\n"
             "  [--choices-file PATH]  (each case's choice cache reads and writes PATH, its\n"
             "                          plans saved next to it, as a program's would)\n"
             "  [--reuse]  (with --choices-file: the choices come from an earlier run's file;\n"
             "              the first call is timed as a later process's, with no listing)\n"
             "  [--no-heuristic]  (no heuristic pick timed beside the choice: a run that\n"
             "                     repeats one whose speedup over it is known)\n"
             "  [--search-rows N]  (the search's N fastest rows in each record, default 6;\n"
             "                      0: every row, those not timed in full with their reason)\n"
             "  [--directions fwd,bwd_data,bwd_weights]  (the directions per layer, in order)\n"
             "  [--loop-rows N]  (the search's N fastest rows timed again, each as a fixed\n"
             "                    choice in the benchmark's loop, in two interleaved passes)\n"
             "  [--fill random|block]  (the operands' values: a uniform draw per element, or\n"
             "                          dnnx's scratch tensors, a block of draws repeated)\n"
             "  [--no-next-step]  (with --choices-file and no --reuse: no selection of every\n"
             "                     case again after the last, the late plans of the searches\n"
             "                     left to a later process)\n"
             "  [--profile-loop N]  (N more calls of each case's choice after its timing,\n"
             "                       between cudaProfilerStart and cudaProfilerStop, for a\n"
             "                       profiler run with its capture off at the start, e.g.\n"
             "                       ncu --profile-from-start off; no host-overhead records)\n";
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument '" + arg + "' (see --help)");
    }
  }
  if (o.reuse && o.choices_file.empty()) throw std::runtime_error("--reuse needs --choices-file");
  if (o.search_rows < 0) throw std::runtime_error("--search-rows must be >= 0");
  if (o.loop_rows < 0) throw std::runtime_error("--loop-rows must be >= 0");
  if (o.profile_loop < 0 || o.profile_loop > 1000)
    throw std::runtime_error("--profile-loop must be 0 to 1000");
  if (o.directions.empty()) throw std::runtime_error("--directions names no direction");
  if (!o.choices_file.empty() && o.study)
    throw std::runtime_error("--study makes no choices: --choices-file does not apply");
  return o;
}

// The desc in one line for the report ("128x96x112x112 * 96x1x3x3 s2 p1 d1 g96").
std::string detail_desc(const ConvDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

// Uniform values in [-1, 1], a draw per element, in memory order. The draws are made in chunks
// of 2^20, each from its own generator seeded with (seed, chunk) and stored in the dtype as a
// dense run of the buffer, on every host thread: one generator and a conversion in logical order
// took about a second per case for the larger tensors of the suite, most of a later round's time.
// With `scratch`, dnnx's own scratch tensor instead (detail::random_tensor).
Tensor device_random(const Dims& dims, DType dtype, Layout layout, Context& context,
                     std::uint32_t seed, bool scratch = false) {
  if (scratch) return detail::random_tensor(context, dims, dtype, layout, -1.0f, 1.0f, seed);
  Tensor host = Tensor::empty(dims, dtype, layout);
  const auto count = static_cast<std::size_t>(dims.product());
  auto* bytes = static_cast<std::byte*>(host.data());
  const std::size_t element = size_of(dtype);
  constexpr std::size_t chunk = std::size_t{1} << 20;
  const std::size_t chunks = (count + chunk - 1) / chunk;
  std::atomic<std::size_t> next{0};
  auto draw = [&] {
    std::vector<float> values;
    for (std::size_t c = next++; c < chunks; c = next++) {
      const std::size_t first = c * chunk, size = std::min(count, first + chunk) - first;
      std::seed_seq seeds{seed, static_cast<std::uint32_t>(c)};
      std::mt19937 rng(seeds);
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      values.resize(size);
      for (float& value : values) value = uniform(rng);
      Tensor::view(bytes + first * element, Dims{static_cast<std::int64_t>(size)}, dtype)
          .copy_from_f32(values);
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(draw);
  draw();
  for (std::thread& helper : helpers) helper.join();
  Tensor device = Tensor::empty(dims, dtype, layout, context.allocator());
  copy(host, device);
  return device;
}

struct Operands {
  Tensor src, weights, dst;
};

// The operands' device addresses, "src weights dst" in hex.
std::string device_addresses(const Operands& t) {
  std::ostringstream out;
  out << std::hex << "0x" << reinterpret_cast<std::uintptr_t>(t.src.data()) << " 0x"
      << reinterpret_cast<std::uintptr_t>(t.weights.data()) << " 0x"
      << reinterpret_cast<std::uintptr_t>(t.dst.data());
  return out.str();
}

// A choice cache backed by `path` in readwrite mode, or a memory-only one when `path` is empty.
std::shared_ptr<ChoiceCache> file_cache(const std::string& path) {
  if (path.empty()) return std::make_shared<ChoiceCache>();
  CacheFileOptions file_options;
  file_options.mode = CacheMode::readwrite;
  file_options.path = path;
  return std::make_shared<ChoiceCache>(file_options);
}

std::shared_ptr<const Choice> call(Context& context, const ConvDesc& desc, Direction direction,
                                   Operands& t) {
  switch (direction) {
    case Direction::fwd: return conv_fwd(context, desc, t.src, t.weights, t.dst);
    case Direction::bwd_data: return conv_bwd_data(context, desc, t.dst, t.weights, t.src);
    case Direction::bwd_weights: return conv_bwd_weights(context, desc, t.src, t.dst, t.weights);
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return nullptr;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Kernel-bound ms per call: events around `loop` back-to-back calls (Note [gpu timing method]).
double kernel_ms(Context& context, const ConvDesc& desc, Direction direction, Operands& t,
                 int loop) {
  detail::Backend& backend = detail::state_of(context).backend();
  for (int i = 0; i < 3; ++i) call(context, desc, direction, t);
  std::vector<double> samples;
  samples.reserve(3);
  for (int r = 0; r < 3; ++r) {
    samples.push_back(
        bench::held_loop_ms(backend, loop, [&] { call(context, desc, direction, t); }));
  }
  return median(samples);
}

// Note [profiled loops]
// Which kernels a choice launches, and for how long each, is what a profiler tells (Nsight
// Compute names every kernel and times it alone); the benchmark's own figures cannot. A profiler
// that captures a whole run would also capture the search, hundreds of candidates' launches. So
// with --profile-loop N each case's choice runs N more calls after its timing, synchronized on
// both sides, between cudaProfilerStart and cudaProfilerStop: a profiler started with its capture
// off (ncu --profile-from-start off) sees those launches only, in case order; without one the
// two calls do nothing. The host-overhead records (thousands of tiny launches) are left out then.
void profiled_loop(Context& context, const ConvDesc& desc, Direction direction, Operands& t,
                   int calls) {
  detail::Backend& backend = detail::state_of(context).backend();
  backend.synchronize();
  cudaProfilerStart();
  for (int i = 0; i < calls; ++i) call(context, desc, direction, t);
  backend.synchronize();
  cudaProfilerStop();
}

double per_call_ms(Context& context, const ConvDesc& desc, Direction direction, Operands& t,
                   int calls) {
  detail::Backend& backend = detail::state_of(context).backend();
  std::vector<double> samples;
  for (int i = 0; i < calls; ++i) {
    const auto start = Clock::now();
    call(context, desc, direction, t);
    backend.synchronize();
    samples.push_back(ms_since(start));
  }
  return median(samples);
}

std::string json_string(const std::string& text) {
  std::string out(1, '"');
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

// One JSON object, fields in the order added (the comparison script reads one per line).
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
  JsonLine& raw(const std::string& key, const std::string& json) {
    field(key) << json;
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

// What the search measured (its table is sorted fastest first): the first `count` timed rows
// and the heuristic pick's row, each {"id", "median_ms", "runs"}, so that a row the benchmark's
// loop ranks differently from the search can be read against the search's own figures; with
// `count` 0 every row, each with its status and detail too (why a candidate was not timed, or
// abandoned).
std::string search_rows_json(const Choice& choice, const std::string& heuristic_id,
                             std::size_t count) {
  std::ostringstream out;
  std::size_t listed = 0;
  bool heuristic_listed = heuristic_id.empty();
  out << '[';
  auto add = [&](const ProfileRow& row) {
    out << (listed++ == 0 ? "" : ",") << "{\"id\":" << json_string(row.algo.id)
        << ",\"median_ms\":";
    if (std::isfinite(row.median_ms))
      out << row.median_ms;
    else
      out << "null";
    out << ",\"runs\":" << row.runs;
    if (count == 0) {
      out << ",\"status\":" << json_string(std::string(to_string(row.status)))
          << ",\"detail\":" << json_string(row.detail);
    }
    out << '}';
    heuristic_listed |= row.algo.id == heuristic_id;
  };
  for (const ProfileRow& row : choice.timings) {
    if (count == 0) {
      add(row);
      continue;
    }
    if (row.status != CandidateStatus::ok) continue;
    if (listed < count) {
      add(row);
    } else if (!heuristic_listed && row.algo.id == heuristic_id) {
      add(row);
    }
  }
  out << ']';
  return out.str();
}

// Median host microseconds per call of `issue` over `batches` batches of `batch` unsynchronized
// calls (after one untimed batch), with `wait` (the stream's synchronization) between batches.
template <typename Issue, typename Wait>
double host_us_waiting(Issue&& issue, Wait&& wait, int batch = 100, int batches = 30) {
  for (int i = 0; i < batch; ++i) issue();
  wait();
  std::vector<double> per_call_us;
  for (int r = 0; r < batches; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < batch; ++i) issue();
    per_call_us.push_back(ms_since(start) * 1000.0 / batch);
    wait();
  }
  return median(per_call_us);
}

template <typename Issue>
double host_us(detail::Backend& backend, Issue&& issue, int batch = 100, int batches = 30) {
  return host_us_waiting(
      issue, [&] { backend.synchronize(); }, batch, batches);
}

// The search's `count` fastest timed rows run again, each as a fixed choice, in the benchmark's
// loop (kernel_ms), in two passes over the rows so that a drift of the GPU's clocks reaches
// them all: [{"id", "search_ms", "loop_ms": [first pass, second pass]}], with "error" (and the
// passes that ran) for a row that failed to run as a fixed choice. The search times a
// contender in short turns; the loop runs it long enough for the board's power to limit the
// clocks, and after whatever ran before it in the process, which can rank close rows otherwise.
// Each row also gives "host_us": the host's microseconds per call when calls are issued without
// waiting (host_us, in short batches), which is about the kernel's time for a plan whose call
// waits for the device, and a few microseconds for one that queues its work.
// Leaves the direction's policy fixed to the last row.
std::string loop_rows_json(Context& context, const ConvDesc& desc, Direction direction, Operands& t,
                           const Choice& choice, std::size_t count, int loop) {
  std::vector<const ProfileRow*> rows;
  for (const ProfileRow& row : choice.timings) {
    if (rows.size() == count) break;
    if (row.status == CandidateStatus::ok) rows.push_back(&row);
  }
  std::vector<std::vector<double>> loops(rows.size());
  std::vector<std::string> errors(rows.size());  // a row that failed to run as a fixed choice
  std::vector<double> host(rows.size(), -1.0);
  detail::Backend& backend = detail::state_of(context).backend();
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!errors[i].empty()) continue;
      context.tune().policy(direction) = AlgoPolicy::fixed(rows[i]->algo.id);
      try {
        loops[i].push_back(kernel_ms(context, desc, direction, t, loop));
        if (pass == 1)
          host[i] = host_us(
              backend, [&] { call(context, desc, direction, t); }, 20, 5);
      } catch (const std::exception& error) {
        errors[i] = error.what();
      }
    }
  }
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out << (i == 0 ? "" : ",") << "{\"id\":" << json_string(rows[i]->algo.id)
        << ",\"search_ms\":" << rows[i]->median_ms << ",\"loop_ms\":[";
    for (std::size_t k = 0; k < loops[i].size(); ++k) out << (k == 0 ? "" : ",") << loops[i][k];
    out << ']';
    if (host[i] >= 0) out << ",\"host_us\":" << host[i];
    if (!errors[i].empty()) out << ",\"error\":" << json_string(errors[i]);
    out << '}';
  }
  out << ']';
  return out.str();
}

// The search's rows of the candidates that took the most of its time (SearchTimes::costliest,
// "<id> <ms> ms" joined by ", "), each {"id", "status", "detail", "median_ms", "runs", "workspace"}: what
// a costly candidate's runs measured on the device against its host time.
std::string costliest_rows_json(const Choice& choice) {
  std::ostringstream out;
  out << '[';
  std::size_t listed = 0;
  std::string_view rest = choice.search.costliest;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(", ");
    std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
    // "<id> <ms> ms": the id is what precedes the last two words.
    const std::size_t unit = part.rfind(' ');
    const std::size_t number = unit == std::string_view::npos ? unit : part.rfind(' ', unit - 1);
    if (number == std::string_view::npos) continue;
    const std::string_view id = part.substr(0, number);
    const auto row = std::find_if(choice.timings.begin(), choice.timings.end(),
                                  [&](const ProfileRow& r) { return r.algo.id == id; });
    if (row == choice.timings.end()) continue;
    out << (listed++ == 0 ? "" : ",") << "{\"id\":" << json_string(row->algo.id)
        << ",\"status\":" << json_string(std::string(to_string(row->status)))
        << ",\"detail\":" << json_string(row->detail)
        << ",\"median_ms\":" << (std::isfinite(row->median_ms) ? row->median_ms : -1.0)
        << ",\"runs\":" << row->runs << ",\"workspace\":" << row->algo.workspace_bytes << '}';
  }
  out << ']';
  return out.str();
}

detail::ConvArgs conv_args(Direction direction, Operands& t) {
  return detail::ConvArgs::by_shape(direction, t.src, t.weights, t.dst);
}

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// The CUDA runtime's own floor under a conv call on this host, measured like the calls: host
// microseconds per cudaGraphLaunch of a graph that holds a single 4-byte memset (a plan called
// again on the same memory is replayed as a graph, Note [graph replay]) and per plain
// cudaMemsetAsync (one launch without a graph).
std::pair<double, double> cuda_floor_us() {
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void* word = nullptr;
  cuda_check(cudaMalloc(&word, 4), "cudaMalloc");
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  cuda_check(cudaMemsetAsync(word, 0, 4, stream), "capturing a memset");
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  auto wait = [&] { cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  const double graph_us =
      host_us_waiting([&] { cuda_check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, wait);
  const double memset_us = host_us_waiting(
      [&] { cuda_check(cudaMemsetAsync(word, 0, 4, stream), "cudaMemsetAsync"); }, wait);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(word);
  cudaStreamDestroy(stream);
  return {graph_us, memset_us};
}

// Note [search study]
// What the search's shortcuts rest on, measured without them (--study): every supported
// candidate of a case, in listing order, is run on the first eighth of the batch (one of the
// slices the search probes on: first call, as the search sees it, then the median of 3 warm
// runs) and on the full problem (likewise). A candidate whose warm slice already takes over 4x the best full
// median so far cannot win (the full problem contains the slice's work) and is not run in full;
// naive reference candidates are not run at all. Listing and plan builds are timed too.
struct Timed {
  double first_ms = -1, first_wall_ms = -1, warm_ms = -1;
  std::vector<double> queuing_ms;  // host time of each execute() call, in order
};

template <typename Execute>
Timed time_plan(detail::Backend& backend, Execute&& execute) {
  Timed timed;
  auto queued = [&] {
    const auto start = Clock::now();
    execute();
    timed.queuing_ms.push_back(ms_since(start));
  };
  const auto start = Clock::now();
  timed.first_ms = backend.time_ms(queued);
  timed.first_wall_ms = ms_since(start);
  std::vector<double> warm;
  for (int i = 0; i < 3; ++i) warm.push_back(backend.time_ms(queued));
  timed.warm_ms = median(warm);
  return timed;
}

std::string json_numbers(const std::vector<double>& values) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str() + ']';
}

void study_case(std::ostream& out, Context& context, const ConvDesc& desc, Direction direction,
                Operands& t, const std::string& case_name) {
  detail::Backend& backend = detail::state_of(context).backend();
  detail::ConvBackend& conv = backend.conv();
  auto start = Clock::now();
  const std::vector<AlgoInfo> candidates = conv.list(desc, direction);
  const double list_ms = ms_since(start);
  std::vector<std::string> ids;
  for (const AlgoInfo& algo : candidates) {
    const bool naive =
        std::find(algo.notes.begin(), algo.notes.end(), "reference") != algo.notes.end();
    if (algo.supported && !naive) ids.push_back(algo.id);
  }
  const Clock::time_point search_start = start;
  start = Clock::now();
  conv.prepare(desc, direction, ids, search_start);
  const double prepare_ms = ms_since(start);
  ConvDesc slice_desc = desc;
  slice_desc.batch = desc.batch / 8;
  start = Clock::now();
  conv.prepare_probes(slice_desc, direction, ids);
  const double prepare_probes_ms = ms_since(start);
  out << JsonLine()
             .add("kind", "study_case")
             .add("case", case_name)
             .add("candidates", static_cast<double>(candidates.size()))
             .add("run", static_cast<double>(ids.size()))
             .add("list_ms", list_ms)
             .add("prepare_ms", prepare_ms)
             .add("prepare_probes_ms", prepare_probes_ms)
             .str()
      << std::endl;
  auto view = [&](Tensor& tensor, const Dims& dims) {
    return Tensor::view(tensor.data(), dims, desc.dtype, desc.layout, tensor.device());
  };
  Tensor slice_src = view(t.src, slice_desc.src_dims());
  Tensor slice_dst = view(t.dst, slice_desc.dst_dims());
  const detail::ConvArgs full_args = conv_args(direction, t);
  const detail::ConvArgs slice_args =
      detail::ConvArgs::by_shape(direction, slice_src, t.weights, slice_dst);
  double best = std::numeric_limits<double>::infinity();
  for (const std::string& id : ids) {
    JsonLine line;
    line.add("kind", "study").add("case", case_name).add("id", id);
    try {
      Timed slice;
      if (auto plan = conv.probe_plan(slice_desc, direction, id)) {
        const detail::Workspace workspace =
            detail::state_of(context).workspace(plan->algo().workspace_bytes);
        slice = time_plan(backend, [&] { plan->execute(slice_args, workspace); });
      }
      line.add("slice_first_ms", slice.first_ms)
          .add("slice_first_wall_ms", slice.first_wall_ms)
          .add("slice_ms", slice.warm_ms)
          .raw("slice_queuing_ms", json_numbers(slice.queuing_ms));
      Timed full;
      if (slice.warm_ms < 0 || slice.warm_ms <= 4 * best) {
        auto plan = conv.plan(desc, direction, id);
        const detail::Workspace workspace =
            detail::state_of(context).workspace(plan->algo().workspace_bytes);
        full = time_plan(backend, [&] { plan->execute(full_args, workspace); });
        best = std::min(best, full.warm_ms);
      }
      line.add("full_first_ms", full.first_ms)
          .add("full_first_wall_ms", full.first_wall_ms)
          .add("full_ms", full.warm_ms)
          .raw("full_queuing_ms", json_numbers(full.queuing_ms));
    } catch (const std::exception& error) {
      line.add("error", error.what());
    }
    out << line.str() << std::endl;
  }
}

void host_overhead(std::ostream& out) {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  const ConvDesc desc = ConvDesc::from_shapes(Dims{1, 8, 8, 8}, Dims{8, 8, 3, 3}, {1}, {1}, {1}, 1,
                                              DType::f32, Layout::channels_first);
  Operands t{device_random(desc.src_dims(), desc.dtype, desc.layout, context, 1),
             device_random(desc.weights_dims(), desc.dtype, desc.layout, context, 2),
             device_random(desc.dst_dims(), desc.dtype, desc.layout, context, 3)};
  detail::Backend& backend = detail::state_of(context).backend();
  const auto [floor_graph_us, floor_memset_us] = cuda_floor_us();
  out << JsonLine()
             .add("kind", "cuda_floor")
             .add("graph_launch_us", floor_graph_us)
             .add("memset_async_us", floor_memset_us)
             .str()
      << '\n';
  const char* legacy_ids[] = {"cudnn:legacy:fwd:implicit_gemm:fma",
                              "cudnn:legacy:bwd_data:algo_1:fma",
                              "cudnn:legacy:bwd_weights:algo_1:fma"};
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    const auto choice = call(context, desc, direction, t);
    const double op_us = host_us(backend, [&] { call(context, desc, direction, t); });
    const double gpu_us = kernel_ms(context, desc, direction, t, 200) * 1000.0;
    // The same candidate's plan executed directly: what the op layer adds is the difference.
    const auto plan = backend.conv().plan(desc, direction, choice->algo.id);
    const detail::Workspace workspace = detail::state_of(context).workspace(plan->algo().workspace_bytes);
    const detail::ConvArgs args = conv_args(direction, t);
    const double plan_us = host_us(backend, [&] { plan->execute(args, workspace); });
    // A legacy algorithm through the op layer (cudnnConvolution* instead of the graph API).
    const char* legacy = legacy_ids[static_cast<int>(direction)];
    context.tune().policy(direction) = AlgoPolicy::fixed(legacy);
    call(context, desc, direction, t);
    const double legacy_us = host_us(backend, [&] { call(context, desc, direction, t); });
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    out << JsonLine()
               .add("kind", "overhead")
               .add("direction", std::string(to_string(direction)))
               .add("algo", choice->algo.id)
               .add("host_us_per_call", op_us)
               .add("plan_execute_us", plan_us)
               .add("legacy_algo", legacy)
               .add("legacy_host_us_per_call", legacy_us)
               .add("gpu_us_per_call", gpu_us)
               .str()
        << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) try {
  install_crash_report();  // Note [crash report]
  // On every return from main, before exit begins: the background compiles a search left
  // running are stopped and joined (dnnx::stop_background_work()).
  struct StopBackgroundWork {
    ~StopBackgroundWork() { dnnx::stop_background_work(); }
  } stop_background_work_at_return;
  const Options options = parse(argc, argv);
  // The plans saved with the choices go next to the file (Note [saved plans]) unless
  // DNNX_PLAN_DIR says otherwise; read when the backend is made, so before the first context.
  if (!options.choices_file.empty())
    ::setenv("DNNX_PLAN_DIR", (options.choices_file + ".plans").c_str(), /*overwrite=*/0);
  // The shapes file first: a bad field is reported before any GPU work.
  ShapesFile file = read_shapes(options.shapes, options.layers.empty() ? options.tag : "all");
  if (!options.layers.empty()) {
    std::vector<Shape> picked;
    for (const std::string& name : options.layers) {
      const auto found = std::find_if(file.shapes.begin(), file.shapes.end(),
                                      [&](const Shape& s) { return s.name == name; });
      if (found == file.shapes.end())
        throw std::runtime_error(options.shapes + " has no layer '" + name + "'");
      picked.push_back(*found);
    }
    file.shapes = std::move(picked);
  }
  std::cout << std::setprecision(6);
  {
    Context probe(BackendKind::cudnn);
    std::cout << JsonLine()
                     .add("kind", "device")
                     .add("describe", probe.describe())
                     .add("fingerprint", probe.fingerprint())
                     .str()
              << '\n';
  }
  if (!options.study && options.profile_loop == 0) host_overhead(std::cout);
  if (options.overhead_only) return 0;
  std::vector<Shape> shapes = file.shapes;
  if (options.max_layers > 0 && shapes.size() > static_cast<std::size_t>(options.max_layers))
    shapes.resize(static_cast<std::size_t>(options.max_layers));
  const std::int64_t batch = options.batch > 0 ? options.batch : (file.batch > 0 ? file.batch : 64);
  std::cout << JsonLine()
                   .add("kind", "suite")
                   .add("shapes", options.shapes)
                   .add("batch", static_cast<double>(batch))
                   .add("layers", static_cast<double>(shapes.size()))
                   .add("file_layers", static_cast<double>(file.shapes.size()))
                   .str()
            << std::endl;
  const auto suite_start = Clock::now();
  std::vector<std::string> skipped;  // layer/config pairs the budget left out
  const std::shared_ptr<ChoiceCache> reused_cache =
      options.reuse ? file_cache(options.choices_file) : nullptr;
  // Note [the program's next step]: the searched cases, in order, with their caches.
  struct Searched {
    std::string name;
    ConvDesc desc;
    Direction direction;
    std::shared_ptr<ChoiceCache> cache;
  };
  std::vector<Searched> searched;
  const bool next_step =
      options.next_step && !options.reuse && !options.choices_file.empty() && !options.study;
  for (const std::string& config : options.configs) {
    const DType dtype = config.rfind("f16", 0) == 0    ? DType::f16
                        : config.rfind("bf16", 0) == 0 ? DType::bf16
                                                       : DType::f32;
    const Layout layout =
        config.find("nhwc") != std::string::npos ? Layout::channels_last : Layout::channels_first;
    for (const Shape& s : shapes) {
      if (options.budget_s > 0 && ms_since(suite_start) > options.budget_s * 1e3) {
        skipped.push_back(s.name + "/" + config);
        continue;
      }
      const ConvDesc desc = s.desc(batch, dtype, layout);
      for (Direction direction : options.directions) {
        // A fresh context and cache per case: the first call pays the whole search (or, with
        // --reuse, reads its choice from the file through the run's one cache, as a later
        // process would: Note [choices across processes]).
        Context context(BackendKind::cudnn);
        std::shared_ptr<ChoiceCache> cache =
            options.reuse ? reused_cache : file_cache(options.choices_file);
        const std::size_t applied_before = cache->file_stats().applied;
        context.set_choice_cache(cache);
        const bool scratch = options.scratch_fill;
        Operands t{device_random(desc.src_dims(), dtype, layout, context, 1, scratch),
                   device_random(desc.weights_dims(), dtype, layout, context, 2, scratch),
                   device_random(desc.dst_dims(), dtype, layout, context, 3, scratch)};
        detail::state_of(context).backend().synchronize();
        const std::string direction_name(to_string(direction));
        std::string case_name = s.name;
        case_name.append("/").append(direction_name).append("/").append(config);
        {
          std::ostringstream what;
          what << case_name << ' ' << desc;
          set_current_case(what.str());
        }
        if (options.study) {
          study_case(std::cout, context, desc, direction, t, case_name);
          continue;
        }
        // The search first, in a process that has not seen this desc: its first call pays the
        // listing, the plan builds and the timing of every candidate, as a program's does (the
        // compile budget counts from the listing's start: Note [compile budget] in
        // src/ops/dispatch.cpp).
        // The tuning variables (DNNX_VERBOSE, DNNX_HOST_TIE, ...) apply as in any program
        // built on Context::from_env; the policy is exhaustive whatever they say.
        apply_tune_env(context.tune());
        context.tune().policy(direction) = AlgoPolicy::exhaustive();
        const auto start = Clock::now();
        const auto choice = call(context, desc, direction, t);
        detail::state_of(context).backend().synchronize();
        const double first_call_ms = ms_since(start);
        // A file entry that answered and stayed valid: no search in this process.
        const bool from_file = cache->file_stats().applied > applied_before;
        // The search alone: the selection's wall time (listing, plan builds and the timing of
        // every candidate), without the chosen candidate's first run. A choice from the file
        // made no search here; one that was not in the file (or failed its re-validation)
        // searched inside the first call.
        const double list_ms = from_file ? 0 : choice->search.list_ms;
        const double search_ms = from_file ? 0 : options.reuse ? first_call_ms : choice->tuning_ms;
        const double kernel = kernel_ms(context, desc, direction, t, options.loop);
        const double per_call = per_call_ms(context, desc, direction, t, options.calls);
        if (options.profile_loop > 0)
          profiled_loop(context, desc, direction, t, options.profile_loop);
        // The heuristic pick (no timing), for the speedup of the search.
        std::shared_ptr<const Choice> heuristic;
        double heuristic_ms = 0;
        if (options.heuristic) {
          context.tune().policy(direction) = AlgoPolicy::heuristic();
          heuristic = call(context, desc, direction, t);
          heuristic_ms = kernel_ms(context, desc, direction, t, options.loop);
        }
        JsonLine line;
        line.add("kind", "case")
            .add("case", case_name)
            .add("layer", s.name)
            .add("direction", direction_name)
            .add("config", config)
            .add("desc", detail_desc(desc))
            .add("batch", static_cast<double>(batch))
            .add("kernel_ms", kernel)
            .add("call_ms", per_call)
            .add("first_call_ms", first_call_ms)
            .add("search_s", search_ms / 1e3)
            .raw("from_file", from_file ? "true" : "false")
            .add("list_ms", list_ms)
            .add("tuning_ms", choice->tuning_ms)
            .add("search_build_ms", choice->search.build_ms)
            .add("search_time_ms", choice->search.time_ms)
            .add("plans_skipped", choice->search.plans_skipped)
            // Note [late plans]: those still listed after this process's first call.
            .add("late_plans", static_cast<double>(choice->late_plans.size()))
            .add("search_full_runs", choice->search.full_runs)
            .add("search_full_run_ms", choice->search.full_run_ms)
            .add("search_probes", choice->search.probes)
            .add("search_probe_ms", choice->search.probe_ms)
            .add("search_final_ms", choice->search.final_ms)
            .add("search_costliest", choice->search.costliest)
            .add("candidates_timed", choice->candidates_timed)
            .add("candidates", static_cast<double>(choice->timings.size()))
            .add("algo", choice->algo.id)
            .add("workspace", static_cast<double>(choice->algo.workspace_bytes))
            .add("runner_up", choice->runner_up)
            .add("tflops", 2.0 * desc.macs() / (kernel * 1e9))
            // Where the operands lie (device addresses): two runs of one candidate that time
            // differently may differ in how their buffers share L2's sets and partitions.
            .add("addresses", device_addresses(t));
        if (heuristic) {
          line.add("heuristic_algo", heuristic->algo.id).add("heuristic_kernel_ms", heuristic_ms);
        }
        if (!from_file && !choice->timings.empty()) {
          line.raw("search_rows",
                   search_rows_json(*choice, heuristic ? heuristic->algo.id : std::string(),
                                    static_cast<std::size_t>(options.search_rows)));
          line.raw("search_costliest_rows", costliest_rows_json(*choice));
          if (options.loop_rows > 0)
            line.raw("loop_rows",
                     loop_rows_json(context, desc, direction, t, *choice,
                                    static_cast<std::size_t>(options.loop_rows), options.loop));
        }
        std::cout << line.str() << std::endl;
        if (next_step && !from_file) searched.push_back({case_name, desc, direction, cache});
      }
    }
  }
  for (const Searched& c : searched) {
    set_current_case(c.name + " (next step)");
    Context context(BackendKind::cudnn);
    context.set_choice_cache(c.cache);
    apply_tune_env(context.tune());
    context.tune().policy(c.direction) = AlgoPolicy::exhaustive();
    const auto start = Clock::now();
    std::shared_ptr<const Choice> choice;
    try {
      choice = conv_select(context, c.desc, c.direction);
      detail::state_of(context).backend().synchronize();
    } catch (const std::exception& error) {
      // The case's search stands (its record is out); the others still take their step.
      std::cout << JsonLine()
                       .add("kind", "next_step")
                       .add("case", c.name)
                       .add("ms", ms_since(start))
                       .add("error", error.what())
                       .str()
                << std::endl;
      continue;
    }
    std::cout << JsonLine()
                     .add("kind", "next_step")
                     .add("case", c.name)
                     .add("ms", ms_since(start))
                     .add("algo", choice->algo.id)
                     .add("late_plans", static_cast<double>(choice->late_plans.size()))
                     // The choice's search figures after the step (a settling adds its own to
                     // the search's): less the case record's, where the step's time went.
                     .add("tuning_ms", choice->tuning_ms)
                     .add("search_full_runs", choice->search.full_runs)
                     .add("search_full_run_ms", choice->search.full_run_ms)
                     .add("search_probes", choice->search.probes)
                     .add("search_probe_ms", choice->search.probe_ms)
                     .add("search_final_ms", choice->search.final_ms)
                     .str()
              << std::endl;
  }
  if (!skipped.empty()) {
    std::string left_out;
    for (const std::string& name : skipped) left_out += (left_out.empty() ? "" : ",") + name;
    std::cout << JsonLine()
                     .add("kind", "budget")
                     .add("budget_s", options.budget_s)
                     .add("skipped", static_cast<double>(skipped.size()))
                     .add("left_out", left_out)
                     .str()
              << std::endl;
  }
  return 0;
} catch (const std::exception& error) {
  std::cerr << "cudnn_conv_bench: " << error.what() << '\n';
  return 1;
}
