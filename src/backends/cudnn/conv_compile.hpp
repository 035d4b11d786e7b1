#pragma once
// The cudnn convolution's runtime-compiled plans: built on background threads while a search
// times the other candidates, under the search's compile budget (Note [runtime-compiled
// engines] in conv_engine.cpp, Note [compile budget] in src/ops/dispatch.cpp), and saved across
// processes (Note [saved plans] in src/tune/plan_store.hpp).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/graph_util.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"
#include "tune/plan_store.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dnnx::cudnn {

/// Engine plans built on a few background threads, each with a cuDNN handle of its own
/// (Runtime::build_handle: a handle may not be used on two threads at once, and the main thread
/// keeps executing on the runtime's). A build that has not started by its deadline is never
/// started; one that is running finishes and is kept for whoever asks next. At process exit
/// every instance stops and joins its threads (Note [background builds at exit]).
class BackgroundBuilds {
 public:
  using Clock = std::chrono::steady_clock;

  /// What one build needs: the plan's key, its listing entry and its engine config.
  struct Request {
    detail::ConvPlanKey key;
    AlgoInfo info;
    ConfigKey config;
  };

  enum class State { none, queued, running, ready, failed, cancelled };

  /// Where a build stands after await() or take().
  struct Outcome {
    State state = State::none;
    std::shared_ptr<detail::ConvPlan> plan;  ///< ready
    std::string error;                       ///< failed: the build's error message
    std::size_t queued_ahead = 0;            ///< queued: builds queued before it
  };

  explicit BackgroundBuilds(std::shared_ptr<Runtime> runtime);
  /// Drops the queued builds and waits for the running ones (stop()).
  ~BackgroundBuilds();
  BackgroundBuilds(const BackgroundBuilds&) = delete;
  BackgroundBuilds& operator=(const BackgroundBuilds&) = delete;

  /// Queues the builds not already known, in order, with `deadline`; a known build that is
  /// still queued or was cancelled gets the new deadline (a new search, a new budget).
  void submit(const std::vector<Request>& requests, Clock::time_point deadline);

  /// Waits until the build of `key` has finished or its deadline has passed; a build still
  /// queued then is cancelled. A finished build (ready or failed) is handed over and forgotten.
  Outcome await(const detail::ConvPlanKey& key);

  /// For a plan needed now (not within a search): a finished build is handed over, a running
  /// one waited for; a queued one is cancelled and reported as none (the caller builds it
  /// itself, sooner than the queue would).
  Outcome take(const detail::ConvPlanKey& key);

  /// Calls `save` with the plan of `key` once its build has finished (on the builder's thread,
  /// before the plan is handed over; not when it finishes after stop() began), or now when it
  /// has already; the plan stays for await() or take(). False when there is no such build or it is
  /// not running or built (failed, cancelled, still queued). `save` must not throw.
  bool when_built(const detail::ConvPlanKey& key,
                  std::function<void(const detail::ConvPlan&)> save);

  /// Note [late builds]: queues the build of `key` again when its search cancelled it (its turn
  /// did not come before its deadline), behind every build with a deadline and with none of its
  /// own, and calls `save` with its plan once built (on the builder's thread, as when_built()).
  /// Such builds run one at a time. False when there is no build of `key` cancelled or queued
  /// past its deadline.
  bool build_late(const detail::ConvPlanKey& key,
                  std::function<void(const detail::ConvPlan&)> save);

  /// Whether the build of `key` has finished with a plan that await() or take() would hand over.
  bool built(const detail::ConvPlanKey& key);

  /// Whether the build of `key` is queued or running.
  bool building(const detail::ConvPlanKey& key);

  /// How many threads build.
  std::size_t threads() const { return threads_.size(); }

  /// Cancels the queued builds, lets the running ones finish and joins the threads; later
  /// submissions queue but start no thread (await() reports them queued). Idempotent.
  void stop() noexcept;

 private:
  struct Job {
    Request request;
    State state = State::queued;
    Clock::time_point deadline;
    Clock::time_point submitted;  // for the verbose report of its wait and compile
    std::shared_ptr<detail::ConvPlan> plan;
    std::string error;
    std::function<void(const detail::ConvPlan&)> on_built;  // when_built(), build_late()
    bool late = false;  // build_late(): in late_queue_, no deadline
  };

  void work(std::size_t slot);
  /// The next job a free builder takes: the searches' first, then a late one while none runs.
  std::shared_ptr<Job> next_job_locked();
  /// Takes `job` out of either queue.
  void unqueue_locked(const std::shared_ptr<Job>& job);
  Outcome hand_over_locked(const detail::ConvPlanKey& key, Job& job);

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::unordered_map<detail::ConvPlanKey, std::shared_ptr<Job>, detail::ConvKeyHash> jobs_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::shared_ptr<Job>> late_queue_;  // Note [late builds]
  bool late_running_ = false;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

/// The key a plan is saved under (Note [saved plans]): the device and library facts a plan
/// depends on, then the op, direction, desc and candidate id.
std::string saved_plan_key(const DeviceFacts& facts, const ConvDesc& desc, Direction direction,
                           const std::string& id);

}  // namespace dnnx::cudnn
