#include "backends/cudnn/conv_compile.hpp"

#include <dnnx/version.hpp>

#include "backends/cudnn/conv_engine.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <vector>

namespace dnnx::cudnn {
namespace {

// NVRTC compiles are CPU-bound, and the main thread keeps timing meanwhile: a few threads, at
// most one fewer than the host has, unless DNNX_CUDNN_BUILD_THREADS (`asked`) says how many.
std::size_t build_threads(int asked) {
  if (asked > 0) return static_cast<std::size_t>(asked);
  const unsigned hardware = detail::hardware_threads();
  return std::clamp<std::size_t>(hardware > 1 ? hardware - 1 : 1, 1, 8);
}

// Note [background builds at exit]
// A build still running when its search ends goes on (it is kept for whoever asks next), so a
// process may reach exit() with a thread inside nvrtcCompileProgram or saving a plan. The
// backends that own the builders are never destroyed (Note [static destruction] in
// src/ops/context_state.hpp), so nothing would join that thread: exit would run the libraries'
// static destructors (NVRTC's, cuDNN's) under it. So every builder is listed here, and an exit
// handler stops them all: queued builds are dropped, running ones finish without saving their
// plan, the threads are joined, and only then do the destructors run.
// exit() calls handlers and destructors in the reverse order of their registration, and cuDNN
// and NVRTC register theirs lazily, when a feature is first used: NVRTC's when cuDNN first loads
// it, cuDNN's serializer's at its first save (on any thread), and more we cannot see. The stop
// handler must run before all of them, so it is registered again whenever a builder thread is
// about to call into cuDNN (a build, a save) and once that call has returned: then it is later
// than whatever cuDNN set up before or during the call. With the handler registered only when
// the first threads started and after the first build, cudnn_conv_describe_test died with
// SIGSEGV once and hung once after its last test had passed: its first plan saves (Note [late
// plans] in src/ops/dispatch.cpp) came after those registrations, so a builder thread could
// still be compiling or saving while exit destroyed what cuDNN set up for them. The
// registrations are at most four per build, each a few bytes (a build happens once per
// runtime-compiled candidate of a new shape), and the repeated handler only finds the builders
// stopped.
// The riskiest first use is NVRTC's: cuDNN loads it on the first builder thread's first build,
// and its compiler creates its own static state during that first compile, so a process that
// exits while the first compiles run (a `dnnx profile` of one layer does, as soon as its search
// has ended) would destroy NVRTC under them (taken to be why such a run died with SIGSEGV at
// exit on an H200; no stack was read, and five runs after this change exited cleanly).
// So before the first builder thread starts, the submitting thread loads NVRTC itself (the
// library cuDNN loads, libnvrtc.so.<CUDA major>) and compiles an empty kernel with it, once per
// process (tens of milliseconds): NVRTC's exit handlers are then registered before the stop
// handler. What stays exposed is an exit during the first use on a builder thread of state
// cuDNN creates lazily itself, and NVRTC's own lazily made state: a one-layer `dnnx profile`
// of this build still died with SIGSEGV at exit now and then on an H200 (3 of about 40 runs),
// a builder thread inside nvrtcCompileProgram (a signal handler's backtrace), and once hung.
// So a program can stop the builders itself before exit begins, while nothing is destroyed
// yet: dnnx::stop_background_work(), which the dnnx CLI calls at the end of main(), the
// benchmark and the GPU tests before they return, and the Python module at interpreter exit.
std::mutex& builders_mutex() {
  static auto* mutex = new std::mutex;  // never destroyed: the exit handler may run last
  return *mutex;
}
std::vector<BackgroundBuilds*>& builders() {
  static auto* list = new std::vector<BackgroundBuilds*>;
  return *list;
}
void stop_every_builder() {
  std::lock_guard lock(builders_mutex());
  for (BackgroundBuilds* builder : builders()) builder->stop();
}
}  // namespace

void stop_background_builds() noexcept { stop_every_builder(); }

namespace {

// Registers stop_every_builder to run before every exit handler registered so far (Note
// [background builds at exit]); once exit has run the handlers, registering fails, harmlessly.
void stop_builders_first_at_exit() { std::atexit(stop_every_builder); }

// Loads NVRTC as cuDNN will and compiles an empty kernel, on the calling thread, once per process
// (Note [background builds at exit]). Where NVRTC cannot be loaded nothing is done: cuDNN's own
// build then fails and says so.
void warm_nvrtc() {
  static std::once_flag once;
  std::call_once(once, [] {
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess || runtime <= 0) return;
    const std::string name = detail::cat("libnvrtc.so.", runtime / 1000);
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
    if (library == nullptr) return;
    using Create = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                   const char* const*);
    using Compile = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
    using Destroy = nvrtcResult (*)(nvrtcProgram*);
    const auto create = reinterpret_cast<Create>(dlsym(library, "nvrtcCreateProgram"));
    const auto compile = reinterpret_cast<Compile>(dlsym(library, "nvrtcCompileProgram"));
    const auto destroy = reinterpret_cast<Destroy>(dlsym(library, "nvrtcDestroyProgram"));
    if (create == nullptr || compile == nullptr || destroy == nullptr) return;
    nvrtcProgram program = nullptr;
    if (create(&program, "extern \"C\" __global__ void dnnx_nvrtc_warm_up() {}",
               "dnnx_nvrtc_warm_up.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
      return;
    compile(program, 0, nullptr);  // its result does not matter: the state it creates does
    destroy(&program);
  });
}

// Verbose: what became of one background compile.
void report(const BackgroundBuilds::Request& request, const std::string& what,
            const std::string& error) {
  std::cerr << "dnnx: cudnn: conv " << to_string(request.key.direction) << ' ' << request.key.desc
            << ": runtime-compiled " << request.key.id << ' ' << what
            << (error.empty() ? std::string() : ": " + error) << '\n';
}

}  // namespace

BackgroundBuilds::BackgroundBuilds(std::shared_ptr<Runtime> runtime)
    : runtime_(std::move(runtime)) {
  std::lock_guard lock(builders_mutex());
  builders().push_back(this);
}

BackgroundBuilds::~BackgroundBuilds() {
  std::lock_guard lock(builders_mutex());
  auto& list = builders();
  list.erase(std::remove(list.begin(), list.end(), this), list.end());
  stop();
}

void BackgroundBuilds::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& job : queue_) job->state = State::cancelled;
    for (const auto& job : late_queue_) job->state = State::cancelled;
    queue_.clear();
    late_queue_.clear();
  }
  changed_.notify_all();
  // threads_ changes only under mutex_ while not stopping_: no longer from here on. A builder
  // thread that calls exit() itself is not joined (it would be joining itself).
  for (std::thread& thread : threads_) {
    if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) thread.join();
  }
}

void BackgroundBuilds::submit(const std::vector<Request>& requests, Clock::time_point deadline) {
  if (requests.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (const Request& request : requests) {
      auto found = jobs_.find(request.key);
      if (found != jobs_.end()) {
        Job& job = *found->second;
        if (job.state == State::queued && job.late) {  // a search wants it now: its queue
          unqueue_locked(found->second);
          job.late = false;
          queue_.push_back(found->second);
        }
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
      job->submitted = Clock::now();
      jobs_.emplace(request.key, job);
      queue_.push_back(std::move(job));
    }
    if (threads_.empty() && !stopping_) {
      warm_nvrtc();
      stop_builders_first_at_exit();
      const std::size_t count = build_threads(runtime_->settings().build_threads);
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
    changed_.wait(lock, [this] {
      return stopping_ || !queue_.empty() || (!late_running_ && !late_queue_.empty());
    });
    if (stopping_) return;
    std::shared_ptr<Job> job = next_job_locked();
    if (!job || job->state != State::queued) continue;
    const bool late = job->late;
    // Its search's budget ran out before its turn: starting now would only take the CPU from
    // what comes next (a later plan() builds it if it is ever needed, or build_late() queues it
    // again once no search waits).
    if (!late && Clock::now() >= job->deadline) {
      job->state = State::cancelled;
      changed_.notify_all();
      if (runtime_->verbose())
        report(job->request, "not compiled: its search's budget ran out first", {});
      continue;
    }
    job->state = State::running;
    late_running_ = late_running_ || late;
    const Request request = job->request;
    const Clock::time_point began = Clock::now();
    lock.unlock();
    stop_builders_first_at_exit();
    std::shared_ptr<detail::ConvPlan> plan;
    std::string error;
    double handle_ms = 0;
    try {
      if (handle == nullptr) {
        handle = runtime_->build_handle(slot);
        handle_ms = std::chrono::duration<double, std::milli>(Clock::now() - began).count();
      }
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
    stop_builders_first_at_exit();
    if (runtime_->verbose()) {
      const auto ms = [](Clock::duration d) {
        return std::chrono::duration<double, std::milli>(d).count();
      };
      report(job->request,
             detail::cat(plan ? "compiled" : "failed", " in ", ms(Clock::now() - began),
                         " ms on thread ", slot, " (queued ", ms(began - job->submitted), " ms",
                         handle_ms > 0 ? detail::cat(", its handle made in ", handle_ms, " ms")
                                       : std::string(),
                         ")",
                         late                           ? ", a late build"
                         : Clock::now() > job->deadline ? ", after its search's budget"
                                                        : ""),
             error);
    }
    lock.lock();
    // when_built(): the plan is saved before anyone can take it (its state is still running);
    // not once stop() has begun, at process exit, where what saving uses (cuDNN's serializer,
    // the file system's view of a test's temporary folder) may be gone already.
    if (auto save = std::move(job->on_built); save && plan && !stopping_) {
      lock.unlock();
      stop_builders_first_at_exit();
      save(*plan);
      stop_builders_first_at_exit();
      lock.lock();
    }
    job->plan = std::move(plan);
    job->error = std::move(error);
    job->state = job->plan ? State::ready : State::failed;
    if (late) late_running_ = false;
    changed_.notify_all();
  }
}

std::shared_ptr<BackgroundBuilds::Job> BackgroundBuilds::next_job_locked() {
  std::deque<std::shared_ptr<Job>>* from = !queue_.empty()                          ? &queue_
                                           : !late_running_ && !late_queue_.empty() ? &late_queue_
                                                                                    : nullptr;
  if (from == nullptr) return nullptr;
  std::shared_ptr<Job> job = std::move(from->front());
  from->pop_front();
  return job;
}

void BackgroundBuilds::unqueue_locked(const std::shared_ptr<Job>& job) {
  queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
  late_queue_.erase(std::remove(late_queue_.begin(), late_queue_.end(), job), late_queue_.end());
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
  // A late build has no deadline to wait for (Note [late builds]): queued, it is not waited for.
  if (!(job->late && job->state == State::queued)) {
    changed_.wait_until(lock, job->deadline, [&] {
      return job->state == State::ready || job->state == State::failed ||
             job->state == State::cancelled;
    });
  }
  if (job->state == State::queued) {
    Outcome outcome;
    outcome.state = State::queued;
    for (const auto& queued : queue_) {
      if (queued == job) break;
      if (queued->state == State::queued) ++outcome.queued_ahead;
    }
    job->state = State::cancelled;
    job->late = false;
    job->on_built = nullptr;
    unqueue_locked(job);
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
    unqueue_locked(job);
    jobs_.erase(found);
    return {};
  }
  changed_.wait(lock, [&] { return job->state != State::running; });
  return hand_over_locked(key, *job);
}

bool BackgroundBuilds::built(const detail::ConvPlanKey& key) {
  std::lock_guard lock(mutex_);
  const auto found = jobs_.find(key);
  return found != jobs_.end() && found->second->state == State::ready;
}

bool BackgroundBuilds::building(const detail::ConvPlanKey& key) {
  std::lock_guard lock(mutex_);
  const auto found = jobs_.find(key);
  return found != jobs_.end() &&
         (found->second->state == State::queued || found->second->state == State::running);
}

bool BackgroundBuilds::when_built(const detail::ConvPlanKey& key,
                                  std::function<void(const detail::ConvPlan&)> save) {
  std::unique_lock lock(mutex_);
  const auto found = jobs_.find(key);
  if (found == jobs_.end()) return false;
  Job& job = *found->second;
  switch (job.state) {
    case State::ready: {
      const std::shared_ptr<detail::ConvPlan> plan = job.plan;
      lock.unlock();
      save(*plan);
      return true;
    }
    case State::running: job.on_built = std::move(save); return true;
    case State::queued:  // may yet be cancelled at its deadline, unless it is a late build
      if (!job.late) return false;
      job.on_built = std::move(save);
      return true;
    case State::none:
    case State::failed:
    case State::cancelled: return false;
  }
  return false;
}

// Note [late builds]
// A search's runtime-compiled candidates are queued for the builders in its listing's order, and
// those whose turn has not come when the search's compile budget runs out are cancelled (a
// later search's compiles should not wait behind them). Which candidates that leaves out depends
// on how fast the builds before them went: on an H200, of MobileNetV2's fp16 layer-directions,
// a search kept 3 late plans for b7.dw fwd in one process, cuDNN's engine 5 among them, which the
// next process settled on at 0.0136 ms against the kept 0.0194 ms; in another process the same
// search had its three cancelled while queued and kept none, and every later process ran the
// slower choice (docs/benchmarks.md, "Late builds"). So where the choice goes to a file, a
// skipped candidate whose build was cancelled is built anyway, as a late build: queued behind
// every build a search waits for, with no deadline, one at a time (the other builders stay free
// for the searches), and saved once built, as a build still running at the deadline is. It is
// then a late plan like those (Note [late plans] in src/ops/dispatch.cpp). A search of the same
// desc that wants it again moves it back to its own queue with its own deadline.
bool BackgroundBuilds::build_late(const detail::ConvPlanKey& key,
                                  std::function<void(const detail::ConvPlan&)> save) {
  {
    std::lock_guard lock(mutex_);
    const auto found = jobs_.find(key);
    if (stopping_ || found == jobs_.end()) return false;
    Job& job = *found->second;
    // Cancelled, or still queued past its deadline (a builder would cancel it when its turn came).
    const bool missed = job.state == State::cancelled ||
                        (job.state == State::queued && !job.late && Clock::now() >= job.deadline);
    if (!missed) return false;
    unqueue_locked(found->second);
    job.state = State::queued;
    job.late = true;
    job.submitted = Clock::now();
    job.on_built = std::move(save);
    late_queue_.push_back(found->second);
  }
  changed_.notify_all();
  return true;
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
