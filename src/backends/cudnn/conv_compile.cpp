#include "backends/cudnn/conv_compile.hpp"

#include <dnnx/version.hpp>

#include "backends/cudnn/conv_engine.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <exception>

namespace dnnx::cudnn {
namespace {

// NVRTC compiles are CPU-bound, and the main thread keeps timing meanwhile: a few threads, at
// most one fewer than the host has.
std::size_t build_threads() {
  const unsigned hardware = detail::hardware_threads();
  return std::clamp<std::size_t>(hardware > 1 ? hardware - 1 : 1, 1, 8);
}

}  // namespace

BackgroundBuilds::BackgroundBuilds(std::shared_ptr<Runtime> runtime)
    : runtime_(std::move(runtime)) {}

BackgroundBuilds::~BackgroundBuilds() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& job : queue_) job->state = State::cancelled;
    queue_.clear();
  }
  changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void BackgroundBuilds::submit(const std::vector<Request>& requests, Clock::time_point deadline) {
  if (requests.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (const Request& request : requests) {
      auto found = jobs_.find(request.key);
      if (found != jobs_.end()) {
        Job& job = *found->second;
        if (job.state == State::queued) job.deadline = deadline;
        if (job.state == State::cancelled) {
          job.state = State::queued;
          job.deadline = deadline;
          queue_.push_back(found->second);
        }
        continue;
      }
      auto job = std::make_shared<Job>();
      job->request = request;
      job->deadline = deadline;
      jobs_.emplace(request.key, job);
      queue_.push_back(std::move(job));
    }
    if (threads_.empty()) {
      const std::size_t count = build_threads();
      for (std::size_t slot = 0; slot < count; ++slot)
        threads_.emplace_back([this, slot] { work(slot); });
    }
  }
  changed_.notify_all();
}

void BackgroundBuilds::work(std::size_t slot) {
  cudnnHandle_t handle = nullptr;
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    if (job->state != State::queued) continue;
    // Its search's budget ran out before its turn: starting now would only take the CPU from
    // what comes next (a later plan() builds it if it is ever needed).
    if (Clock::now() >= job->deadline) {
      job->state = State::cancelled;
      changed_.notify_all();
      continue;
    }
    job->state = State::running;
    const Request request = job->request;
    lock.unlock();
    std::shared_ptr<detail::ConvPlan> plan;
    std::string error;
    try {
      if (handle == nullptr) handle = runtime_->build_handle(slot);
      std::shared_ptr<OperationGraph> graph =
          operation_graph(*runtime_, request.key.desc, request.key.direction, handle);
      if (!graph) {
        error = "cuDNN's graph API rejects the desc";
      } else {
        plan = make_engine_plan(runtime_, std::move(graph), request.key.desc, request.key.direction,
                                request.info, request.config, handle);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    job->plan = std::move(plan);
    job->error = std::move(error);
    job->state = job->plan ? State::ready : State::failed;
    changed_.notify_all();
  }
}

BackgroundBuilds::Outcome BackgroundBuilds::hand_over_locked(const detail::ConvPlanKey& key,
                                                             Job& job) {
  Outcome outcome;
  outcome.state = job.state;
  if (job.state == State::ready || job.state == State::failed) {
    outcome.plan = std::move(job.plan);
    outcome.error = std::move(job.error);
    jobs_.erase(key);  // `job` dies here
  }
  return outcome;
}

BackgroundBuilds::Outcome BackgroundBuilds::await(const detail::ConvPlanKey& key) {
  std::unique_lock lock(mutex_);
  const auto found = jobs_.find(key);
  if (found == jobs_.end()) return {};
  const std::shared_ptr<Job> job = found->second;
  changed_.wait_until(lock, job->deadline, [&] {
    return job->state == State::ready || job->state == State::failed ||
           job->state == State::cancelled;
  });
  if (job->state == State::queued) {
    Outcome outcome;
    outcome.state = State::queued;
    for (const auto& queued : queue_) {
      if (queued == job) break;
      if (queued->state == State::queued) ++outcome.queued_ahead;
    }
    job->state = State::cancelled;
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    return outcome;
  }
  return hand_over_locked(key, *job);
}

BackgroundBuilds::Outcome BackgroundBuilds::take(const detail::ConvPlanKey& key) {
  std::unique_lock lock(mutex_);
  const auto found = jobs_.find(key);
  if (found == jobs_.end()) return {};
  const std::shared_ptr<Job> job = found->second;
  if (job->state == State::queued || job->state == State::cancelled) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    jobs_.erase(found);
    return {};
  }
  changed_.wait(lock, [&] { return job->state != State::running; });
  return hand_over_locked(key, *job);
}

std::string saved_plan_key(const DeviceFacts& facts, const ConvDesc& desc, Direction direction,
                           const std::string& id) {
  return detail::cat("cuDNN ", cudnn_version_text(facts.cudnn_version), " | ", facts.name, " sm_",
                     facts.major, facts.minor, " SMs=", facts.sm_count, " | driver ",
                     cuda_version_text(facts.driver_version), " CUDA ",
                     cuda_version_text(facts.runtime_version), " | dnnx ", dnnx::version(),
                     " | conv ", to_string(direction), " | ", desc.key(), " | ", id);
}

}  // namespace dnnx::cudnn
