#pragma once
// What layers_bench and matmul_bench share, the benchmarks that print one JSON object per line
// for a compare_*.py script: their list flags, the median, JSON string quoting, and the two
// timings of Note [layer timing method] (bench/layers_bench.cpp), whose timed loop the GPU
// convolution benchmarks use too. Header-only: each benchmark stays one source file.

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

// Note [held timing loops]
// A timed loop of back-to-back calls is queued while the cudnn backend's gate holds the GPU (Note
// [gated timing] in src/backends/cudnn/backend.cpp), so that its reading is the GPU's time alone.
// The search's gate gives up after 0.25 ms, which a loop of 50 calls outlasts once a call takes
// more than 5 us of host time to queue: the reading then counts the host's time where the GPU
// waited for it. On an H200, cuBLASLt's split-K candidates of MobileNetV2's 1x1 bwd_weights rows
// (direct calls before their plans replayed a graph) read 11-12 us per call in loops of 50 and 8
// in loops of 10 (docs/benchmarks.md, the shape suite's "The timing loops' gate"). So the
// benchmarks hold the gate for as long as the loop takes to queue (Backend::time_queued_ms), up
// to detail::loop_queue_ms_per_call a call, a hundred times what a replayed call takes. The
// search's deep loops hold it the same way (Note [texture reads in long loops] in
// src/tune/select.cpp).

/// Device time of `loop` back-to-back calls of `call`, behind the backend's gate held while they
/// are queued (Note [held timing loops]), per call.
template <typename Call>
double held_loop_ms(detail::Backend& backend, int loop, Call&& call) {
  return backend.time_queued_ms(
             [&] {
               for (int i = 0; i < loop; ++i) call();
             },
             loop * detail::loop_queue_ms_per_call) /
         loop;
}

/// Kernel time per call: the backend's timer (CUDA events on the stream; host clock and a wait on
/// the cpu) around `loop` back-to-back calls of `call` (held_loop_ms), divided by `loop`; the
/// median of five such loops, after three calls not timed.
template <typename Call>
double kernel_ms(Context& context, int loop, Call&& call) {
  detail::Backend& backend = detail::state_of(context).backend();
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) samples.push_back(held_loop_ms(backend, loop, call));
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
