#pragma once
// What layers_bench and matmul_bench share, the benchmarks that print one JSON object per line
// for a compare_*.py script: their list flags, the median, JSON string quoting, and the two
// timings of Note [layer timing method] (bench/layers_bench.cpp). Header-only: each benchmark
// stays one source file.

#include <dnnx/context.hpp>

#include "ops/context_state.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

namespace dnnx::bench {

/// `text` split at every `sep` ("a,b" -> {"a", "b"}).
inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

/// The median (the mean of the middle two for an even count); `values` must not be empty.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// `text` as a JSON string literal.
inline std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

/// Kernel time per call: the backend's timer (CUDA events on the stream; host clock and a wait on
/// the cpu) around `loop` back-to-back calls of `call`, divided by `loop`; the median of five such
/// loops, after three calls not timed.
template <typename Call>
double kernel_ms(Context& context, int loop, Call&& call) {
  detail::Backend& backend = detail::state_of(context).backend();
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) {
    samples.push_back(backend.time_ms([&] {
      for (int i = 0; i < loop; ++i) call();
    }) / loop);
  }
  return median(samples);
}

/// Per-call time: the median over `calls` calls of the host wall time from the call to the end
/// of a synchronization, what a synchronous caller waits.
template <typename Call>
double per_call_ms(Context& context, int calls, Call&& call) {
  detail::Backend& backend = detail::state_of(context).backend();
  std::vector<double> samples;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    backend.synchronize();
    samples.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return median(samples);
}

}  // namespace dnnx::bench
