// The pool of Note [loop threads].

#include "backends/onednn/loop_pool.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dnnx::onednn::threads {
namespace {

class LoopPool {
 public:
  static LoopPool& instance() {
    // Never destroyed: its threads may still wait for work when the process exits.
    static auto* pool = new LoopPool(thread_count());
    return *pool;
  }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(t) for t in [0, tasks) (tasks <= threads()), task 0 on the caller.
  void run(int tasks, const std::function<void(int)>& body) {
    std::lock_guard turn(turn_);
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      tasks_ = tasks;
      pending_ = tasks - 1;
      ++generation_;
    }
    wake_.notify_all();
    body(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
  }

 private:
  explicit LoopPool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }

  static int thread_count() {
    using Query = int (*)();
    auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    const int omp = query != nullptr ? query() : 0;
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::clamp(omp > 0 ? omp : hardware, 1, 256);
  }

  void work(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= tasks_) continue;
      const std::function<void(int)>* body = body_;
      lock.unlock();
      (*body)(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex turn_;   // one call at a time
  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_, done_;
  const std::function<void(int)>* body_ = nullptr;
  int tasks_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace

int count() { return LoopPool::instance().threads(); }

void run_ranges(std::int64_t items, std::int64_t elements,
                const std::function<void(std::int64_t, std::int64_t)>& body) {
  // Waking a thread costs a few microseconds: below ~64K values one thread is faster.
  constexpr std::int64_t min_elements_per_thread = 1 << 16;
  if (items <= 0) return;
  if (elements < 2 * min_elements_per_thread || items < 2) {
    body(0, items);
    return;
  }
  LoopPool& pool = LoopPool::instance();
  const std::int64_t tasks = std::clamp<std::int64_t>(
      std::min<std::int64_t>(pool.threads(), elements / min_elements_per_thread), 1, items);
  if (tasks <= 1) {
    body(0, items);
    return;
  }
  pool.run(static_cast<int>(tasks),
           [&](int t) { body(items * t / tasks, items * (t + 1) / tasks); });
}

}  // namespace dnnx::onednn::threads
