// The threads of Note [loop threads]: OpenMP's, else a pool of the backend's own.

#include "backends/onednn/loop_pool.hpp"

#include "core/threads.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace dnnx::onednn::threads {
namespace {

// Note [pool wake-ups]
// Waking a thread blocked on a condition variable costs a futex call and a reschedule, tens of
// microseconds on a VM: a tenth of a 0.3 ms normalisation. So a worker that has finished a task
// spins (a pause loop) for up to spin_time watching for the next call before it blocks, and the
// caller spins the same way for the workers to finish; back-to-back calls (a network's layers)
// then never sleep. The OpenMP runtime oneDNN uses does the same (GOMP_SPINCOUNT). A spin of
// ~17 us gained nothing on a small batch-norm, ~85 us did (docs/benchmarks.md,
// "Kernel design measurements").
class LoopPool {
 public:
  static LoopPool& instance() {
    // Never destroyed: its threads may still wait for work when the process exits.
    static auto* pool = new LoopPool(thread_count());
    return *pool;
  }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(t) for t in [0, tasks) (2 <= tasks <= threads()), task 0 on the caller.
  void run(int tasks, const std::function<void(int)>& body) {
    std::lock_guard turn(turn_);
    body_ = &body;
    pending_.store(tasks - 1, std::memory_order_relaxed);
    {
      // Under the mutex, so that a worker about to block sees the new call or gets the notify.
      std::lock_guard lock(mutex_);
      const std::uint64_t generation = (state_.load(std::memory_order_relaxed) >> 16) + 1;
      state_.store(generation << 16 | static_cast<std::uint64_t>(tasks), std::memory_order_release);
    }
    wake_.notify_all();
    body(0);
    if (spin([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }

 private:
  static constexpr std::chrono::microseconds spin_time{100};  // Note [pool wake-ups]

  // Polls ready() with pauses in between for up to spin_time; whether it became true.
  template <typename Ready>
  static bool spin(Ready&& ready) {
    const auto until = std::chrono::steady_clock::now() + spin_time;
    for (unsigned round = 1;; ++round) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (round % 64 == 0 && std::chrono::steady_clock::now() > until) return false;
    }
  }

  explicit LoopPool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }

  static int thread_count() {
    using Query = int (*)();
    auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    const int omp = query != nullptr ? query() : 0;
    const int hardware = static_cast<int>(detail::hardware_threads());
    return std::clamp(omp > 0 ? omp : hardware, 1, 256);
  }

  // The state of the next call after generation `seen`: spins, then blocks.
  std::uint64_t next_call(std::uint64_t seen) {
    std::uint64_t state = 0;
    if (spin([&] {
          state = state_.load(std::memory_order_acquire);
          return state >> 16 != seen;
        }))
      return state;
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] {
      state = state_.load(std::memory_order_acquire);
      return state >> 16 != seen;
    });
    return state;
  }

  void work(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::uint64_t state = next_call(seen);
      seen = state >> 16;
      // Not a task of this call: the caller does not wait for this thread, so body_ may already
      // belong to the next call.
      if (index >= static_cast<int>(state & 0xffff)) continue;
      (*body_)(index);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::mutex turn_;   // one call at a time
  std::mutex mutex_;  // for blocking: wake_ and done_
  std::condition_variable wake_, done_;
  // generation << 16 | tasks of the latest call; body_ and pending_ are set before it changes.
  std::atomic<std::uint64_t> state_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int)>* body_ = nullptr;
  std::vector<std::thread> workers_;
};

// libgomp's entry points, when the process has them: the parallel region GCC emits for
// `#pragma omp parallel` (GOMP_parallel, libgomp's ABI since GCC 4.9, also exported by LLVM's
// libomp) and the queries, looked up rather than linked so that the backend builds and runs
// without an OpenMP runtime (Note [loop threads]).
struct OpenMp {
  using Parallel = void (*)(void (*)(void*), void*, unsigned, unsigned);
  using Query = int (*)();
  Parallel parallel = nullptr;
  Query thread_num = nullptr;
  Query num_threads = nullptr;
  Query max_threads = nullptr;

  bool present() const { return parallel != nullptr; }

  static const OpenMp& get() {
    static const OpenMp runtime = [] {
      OpenMp r;
      r.parallel = reinterpret_cast<Parallel>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
      r.thread_num = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
      r.num_threads = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
      r.max_threads = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
      if (r.parallel == nullptr || r.thread_num == nullptr || r.num_threads == nullptr ||
          r.max_threads == nullptr)
        r = {};
      return r;
    }();
    return runtime;
  }
};

// One OpenMP region: tasks [0, tasks) spread over the team it gets (a region opened inside
// another one gets a team of one thread).
struct Region {
  const std::function<void(int)>* body;
  const OpenMp* omp;
  int tasks;
};

void run_region(void* data) {
  const auto* r = static_cast<const Region*>(data);
  const int team = r->omp->num_threads();
  for (int t = r->omp->thread_num(); t < r->tasks; t += team) (*r->body)(t);
}

}  // namespace

int count(Runner runner) {
  const OpenMp& omp = OpenMp::get();
  if (runner == Runner::automatic && omp.present()) return std::clamp(omp.max_threads(), 1, 256);
  return LoopPool::instance().threads();
}

void run_ranges(std::int64_t items, std::int64_t elements,
                const std::function<void(std::int64_t, std::int64_t)>& body, Runner runner) {
  // Waking a thread costs a few microseconds: below ~64K values one thread is faster.
  constexpr std::int64_t min_elements_per_thread = 1 << 16;
  if (items <= 0) return;
  if (elements < 2 * min_elements_per_thread || items < 2) {
    body(0, items);
    return;
  }
  const std::int64_t tasks = std::clamp<std::int64_t>(
      std::min<std::int64_t>(count(runner), elements / min_elements_per_thread), 1, items);
  if (tasks <= 1) {
    body(0, items);
    return;
  }
  const std::function<void(int)> task = [&](int t) {
    body(items * t / tasks, items * (t + 1) / tasks);
  };
  const OpenMp& omp = OpenMp::get();
  if (runner == Runner::automatic && omp.present()) {
    Region region{&task, &omp, static_cast<int>(tasks)};
    omp.parallel(&run_region, &region, static_cast<unsigned>(tasks), 0);
    return;
  }
  LoopPool::instance().run(static_cast<int>(tasks), task);
}

}  // namespace dnnx::onednn::threads
