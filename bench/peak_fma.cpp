// The machine's arithmetic peak, measured rather than computed from a guessed clock: each thread
// (pinned to its own CPU) runs a loop of independent AVX-512 multiply-adds that never touches
// memory, so the rate it reaches is what the FMA units deliver at the clock the cores really
// sustain under AVX-512 load (turbo, licence down-clocking and the hypervisor included).
// % of peak in docs/benchmarks.md is relative to these figures.
//   fp32: vfmadd231ps zmm   = 16 lanes x 2 flops
//   bf16: vdpbf16ps zmm     = 16 lanes x 2 bf16 pairs x 2 flops (AVX512_BF16, if the CPU has it)
// The peak is threads x the one-thread rate (fastest repetition), i.e. the textbook
// "cores x 2 FMA units x 16 lanes x 2 flops x clock" with the clock measured instead of guessed.
// All threads at once are measured too: on a virtual machine the host may run the vCPUs on
// shared physical cores, and then that rate is lower than the sum. Both go in the results, since
// the convolutions were timed under whatever the host did.
// --probe measures only the all-threads fp32 rate, once: compare_cpu.py runs it before every case
// to record the capacity the host gave the machine while that case was timed.
// Usage: peak_fma [--threads N] [--seconds S] [--repetitions R] [--json] [--probe]

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// Enough independent chains to cover latency x ports (4 cycles x 2 FMA units = 8 in flight on
// current Intel cores); 24 leaves slack and still fits in the 32 zmm registers.
constexpr int chains = 24;
constexpr std::int64_t inner = 256;  // iterations between clock reads, each `chains` instructions

volatile float sink;

// Makes the accumulators observable so the loop cannot be dropped.
__attribute__((target("avx512f"))) void keep(__m512 total) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  sink = sum;
}

__attribute__((target("avx512f"))) std::int64_t fp32_loop(std::int64_t blocks) {
  // Values chosen so the accumulators converge (x -> x * 0.999999 + 1e-6) and never overflow or
  // go denormal, whatever the loop count.
  const __m512 a = _mm512_set1_ps(0.999999f + static_cast<float>(blocks == -1));
  const __m512 b = _mm512_set1_ps(1e-6f);
  __m512 acc[chains];
  for (int c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (std::int64_t i = 0; i < blocks * inner; ++i) {
#pragma GCC unroll 24
    for (__m512& value : acc) value = _mm512_fmadd_ps(value, a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < chains; ++c) total = _mm512_add_ps(total, acc[c]);
  keep(total);
  return blocks * inner * chains * 16 * 2;  // flops
}

__attribute__((target("avx512f,avx512bf16"))) std::int64_t bf16_loop(std::int64_t blocks) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b =
      _mm512_cvtne2ps_pbh(_mm512_set1_ps(static_cast<float>(blocks == -1)), _mm512_set1_ps(1e-3f));
  __m512 acc[chains];
  for (int c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (std::int64_t i = 0; i < blocks * inner; ++i) {
#pragma GCC unroll 24
    for (__m512& value : acc) value = _mm512_dpbf16_ps(value, a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < chains; ++c) total = _mm512_add_ps(total, acc[c]);
  keep(total);
  return blocks * inner * chains * 16 * 2 * 2;  // flops
}

using Loop = std::int64_t (*)(std::int64_t);

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Runs `loop` on `threads` threads at once for about `seconds`; returns GFLOP/s of all of them.
// Thread t is pinned to the t-th allowed CPU: left to the scheduler, two fresh threads can share
// one CPU for the whole (short) measurement.
double measure(Loop loop, int threads, double seconds) {
  // Size the work from a short calibration run so that every thread gets the same count.
  const auto t0 = std::chrono::steady_clock::now();
  loop(64);
  const double calibration =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto blocks = static_cast<std::int64_t>(64 * seconds / std::max(calibration, 1e-9)) + 1;

  std::barrier start(threads + 1);
  std::atomic<std::int64_t> flops{0};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  const std::vector<int> cpus = allowed_cpus();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      if (static_cast<std::size_t>(t) < cpus.size()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[static_cast<std::size_t>(t)], &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
      start.arrive_and_wait();
      flops += loop(blocks);
    });
  }
  start.arrive_and_wait();
  const auto begin = std::chrono::steady_clock::now();
  for (std::thread& worker : workers) worker.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return static_cast<double>(flops.load()) / elapsed * 1e-9;
}

struct Rate {
  double peak = 0;    // fastest repetition, GFLOP/s
  double median = 0;  // GFLOP/s
};

Rate rate_of(Loop loop, int threads, double seconds, int repetitions) {
  measure(loop, threads, seconds / 4);  // warm-up: lets the clock settle at its AVX-512 level
  std::vector<double> rates;
  rates.reserve(static_cast<std::size_t>(repetitions));
  for (int r = 0; r < repetitions; ++r) rates.push_back(measure(loop, threads, seconds));
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2]};
}

bool parse_number(const char* text, double& value) {
  const std::string_view view = text;
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  return error == std::errc{} && end == view.data() + view.size() && value > 0;
}

}  // namespace

int main(int argc, char** argv) {
  double threads = 2, seconds = 0.5, repetitions = 5;
  bool json = false;
  bool probe = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    double* target = arg == "--threads"       ? &threads
                     : arg == "--seconds"     ? &seconds
                     : arg == "--repetitions" ? &repetitions
                                              : nullptr;
    if (arg == "--json") {
      json = true;
    } else if (arg == "--probe") {
      probe = true;
    } else if (arg == "--help") {
      std::printf(
          "usage: %s [--threads N (2)] [--seconds S per repetition (0.5)] "
          "[--repetitions R (5)] [--json] [--probe]\n",
          argv[0]);
      return 0;
    } else if (target == nullptr || i + 1 >= argc || !parse_number(argv[i + 1], *target)) {
      std::fprintf(stderr,
                   "%s: bad argument '%s'%s%s (accepted: --threads N, --seconds S, "
                   "--repetitions R with positive values, --json, --probe)\n",
                   argv[0], argv[i], i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
      return 2;
    } else {
      ++i;
    }
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "%s: this CPU has no AVX-512; the peak it measures does not apply\n",
                 argv[0]);
    return 1;
  }
  const int thread_count = static_cast<int>(threads);
  const int reps = static_cast<int>(repetitions);
  if (static_cast<std::size_t>(thread_count) > allowed_cpus().size()) {
    std::fprintf(stderr,
                 "%s: note: %d threads on %zu allowed CPUs; threads are not pinned past "
                 "the last one\n",
                 argv[0], thread_count, allowed_cpus().size());
  }
  if (probe) {
    measure(fp32_loop, thread_count, seconds / 4);  // warm-up, as in rate_of
    const double all = measure(fp32_loop, thread_count, seconds);
    if (json) {
      std::printf("{\"threads\": %d, \"fp32_gflops_all_threads\": %.2f}\n", thread_count, all);
    } else {
      std::printf("fp32 FMA, %d threads at once: %.1f GFLOP/s\n", thread_count, all);
    }
    return 0;
  }
  const Rate fp32_one = rate_of(fp32_loop, 1, seconds, reps);
  const Rate fp32_all = rate_of(fp32_loop, thread_count, seconds, reps);
  const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
  const Rate bf16_one = has_bf16 ? rate_of(bf16_loop, 1, seconds, reps) : Rate{};
  const Rate bf16_all = has_bf16 ? rate_of(bf16_loop, thread_count, seconds, reps) : Rate{};
  // A core with 2 FMA units does 2 x 16 x 2 = 64 fp32 flops per cycle.
  const double implied_ghz = fp32_one.peak / 64.0;
  if (json) {
    std::printf(
        "{\"threads\": %d, \"fp32_peak_gflops\": %.2f, \"fp32_gflops_one_thread\": %.2f, "
        "\"fp32_gflops_all_threads\": %.2f, \"fp32_gflops_all_threads_median\": %.2f, "
        "\"bf16_peak_gflops\": %.2f, \"bf16_gflops_one_thread\": %.2f, "
        "\"bf16_gflops_all_threads\": %.2f, \"implied_ghz_at_2_fma_units\": %.3f}\n",
        thread_count, thread_count * fp32_one.peak, fp32_one.peak, fp32_all.peak, fp32_all.median,
        thread_count * bf16_one.peak, bf16_one.peak, bf16_all.peak, implied_ghz);
  } else {
    std::printf(
        "fp32 FMA: one thread %.1f GFLOP/s (%.2f GHz if the core has 2 FMA units); peak "
        "%d x that = %.1f GFLOP/s; %d threads at once: %.1f (median %.1f)\n",
        fp32_one.peak, implied_ghz, thread_count, thread_count * fp32_one.peak, thread_count,
        fp32_all.peak, fp32_all.median);
    if (has_bf16) {
      std::printf(
          "bf16 dot product (vdpbf16ps): one thread %.1f GFLOP/s; %d x that = %.1f GFLOP/s;"
          " %d threads at once: %.1f (median %.1f)\n",
          bf16_one.peak, thread_count, thread_count * bf16_one.peak, thread_count, bf16_all.peak,
          bf16_all.median);
    } else {
      std::printf("bf16 dot product: the CPU has no AVX512_BF16\n");
    }
  }
  return 0;
}
