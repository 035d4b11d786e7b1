#pragma once
// The threads of the cpu backend's own layer kernels (batch-norm and activations).
//
// Note [loop threads]
// The kernels run on a pool of threads started once per process (a thread start costs tens of
// microseconds, as much as a whole small normalisation), as many as oneDNN's OpenMP runtime uses
// (omp_get_max_threads, which OMP_NUM_THREADS sets and Backend::fingerprint() records), else the
// hardware's. A call splits its items into one contiguous range per thread; the caller runs the
// first range and waits for the others. Calls from several threads take turns. What a kernel
// computes never depends on how its items were split (each item's result is formed alone, and
// reductions over items run in item order), so results do not depend on the thread count.

#include <cstdint>
#include <functional>

namespace dnnx::onednn::threads {

/// Threads of the pool, the calling one included.
int count();

/// Runs body(first, last) over [0, items) in contiguous ranges, one per pool thread when the work
/// (`elements` values touched in all) is worth waking threads for (about 64K values per thread),
/// at most one range per item; the calling thread runs the first range.
void run_ranges(std::int64_t items, std::int64_t elements,
                const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace dnnx::onednn::threads
