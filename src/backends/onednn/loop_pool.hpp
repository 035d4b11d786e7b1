#pragma once
// The threads of the cpu backend's own layer kernels (batch-norm and activations).
//
// Note [loop threads]
// The kernels run on OpenMP's threads when the process has an OpenMP runtime, which it has
// whenever oneDNN is built on one (the wheel this backend uses is built on GCC's libgomp): the
// same threads, as many as oneDNN's primitives use (omp_get_max_threads, which OMP_NUM_THREADS
// sets and Backend::fingerprint() records). A pool of the kernels' own would compete with them
// for the cores: after a oneDNN primitive, OpenMP's threads spin for a while waiting for the
// next region, so kernels on a pool of their own ran slower on the 2-core benchmark VM
// (docs/benchmarks.md, "Kernel design measurements"). Without an
// OpenMP runtime they run on a pool started once per process, as many threads as the hardware
// has. A call splits its items into one contiguous range per thread; the caller runs the first
// range and waits for the others. What a kernel computes never depends on how its items were
// split (each item's result is formed alone, and reductions over items run in item order), so
// results do not depend on the thread count.

#include <cstdint>
#include <functional>

namespace dnnx::onednn::threads {

/// Which threads run_ranges uses.
enum class Runner : std::uint8_t {
  automatic,  ///< OpenMP's when the process has an OpenMP runtime, else the backend's own pool
  pool,       ///< the backend's own pool (what runs without OpenMP; the tests run it here too)
};

/// Threads run_ranges may use, the calling one included.
int count(Runner runner = Runner::automatic);

/// Runs body(first, last) over [0, items) in contiguous ranges, one per thread when the work
/// (`elements` values touched in all) is worth waking threads for (about 64K values per thread),
/// at most one range per item; the calling thread runs the first range.
void run_ranges(std::int64_t items, std::int64_t elements,
                const std::function<void(std::int64_t, std::int64_t)>& body,
                Runner runner = Runner::automatic);

}  // namespace dnnx::onednn::threads
