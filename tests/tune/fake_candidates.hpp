#pragma once
// Fake candidates for the selection engine: each has scripted per-call times, workspace,
// determinism and support, and every run is counted, so policy tests are exact and never
// depend on real timing.

#include <dnnx/algo.hpp>

#include "core/op_backend.hpp"
#include <dnnx/error.hpp>

#include "tune/select.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::testing_fakes {

/// Builds an AlgoInfo fluently: Algo("a").workspace(64).nondeterministic().family("winograd").
class Algo {
 public:
  explicit Algo(std::string id) {
    info_.id = id;
    info_.name = std::move(id);
    info_.supported = true;
  }
  Algo& workspace(std::size_t bytes) {
    info_.workspace_bytes = bytes;
    return *this;
  }
  Algo& nondeterministic() {
    info_.deterministic = false;
    return *this;
  }
  Algo& unsupported(std::string reason) {
    info_.supported = false;
    info_.reason = std::move(reason);
    return *this;
  }
  Algo& note(std::string text) {
    info_.notes.push_back(std::move(text));
    return *this;
  }
  /// A naive reference loop (AlgoInfo::naive), as detail::mark_naive marks one.
  Algo& naive() {
    detail::mark_naive(info_);
    return *this;
  }
  /// Correct only for bounded inputs (AlgoInfo::overflow_risk).
  Algo& overflow_risk() {
    detail::mark_overflow_risk(info_);
    return *this;
  }
  /// A variant of the candidate `seed` (AlgoInfo::variant_of).
  Algo& variant_of(std::string seed) {
    info_.variant_of = std::move(seed);
    return *this;
  }
  Algo& family(std::string name) {
    info_.families.push_back(std::move(name));
    return *this;
  }
  const AlgoInfo& info() const { return info_; }

 private:
  AlgoInfo info_;
};

/// A list of fake candidates in priority order with scripted run times.
class FakeBench {
 public:
  /// `times` gives the milliseconds of successive runs (warm-up runs included); the last value
  /// repeats. `fails_after` >= 0: the run with that index (0-based) throws BackendFailure.
  FakeBench& add(const Algo& algo, std::vector<double> times = {1.0}, int fails_after = -1) {
    AlgoInfo info = algo.info();
    info.priority = static_cast<int>(candidates_.size());
    candidates_.push_back(info);
    scripts_[info.id] = Script{std::move(times), fails_after};
    return *this;
  }

  const std::vector<AlgoInfo>& candidates() const { return candidates_; }

  tune::RunOnce run() {
    return [this](const AlgoInfo& algo) -> double {
      const int call = calls_[algo.id]++;
      ++total_calls_;
      Script& script = scripts_.at(algo.id);
      if (script.fails_after >= 0 && call >= script.fails_after) {
        throw Error(ErrorKind::BackendFailure, "scripted failure of " + algo.id);
      }
      const std::size_t i = std::min(static_cast<std::size_t>(call), script.times.size() - 1);
      return script.times[i];
    };
  }

  int calls(const std::string& id) const {
    const auto it = calls_.find(id);
    return it == calls_.end() ? 0 : it->second;
  }
  int total_calls() const { return total_calls_; }

 private:
  struct Script {
    std::vector<double> times;
    int fails_after = -1;
  };
  std::vector<AlgoInfo> candidates_;
  std::map<std::string, Script> scripts_;
  std::map<std::string, int> calls_;
  int total_calls_ = 0;
};

inline tune::Request fake_request(Direction direction = Direction::fwd) {
  tune::Request request;
  request.op = "conv";
  request.direction = direction;
  request.desc = "fake-desc";
  request.repro = "dnnx profile conv --fake";
  request.backend = "fakebackend";
  request.key = "fake-key";
  return request;
}

/// Options with `policy` on every direction and otherwise the defaults.
inline TuneOptions options_with(const AlgoPolicy& policy) {
  TuneOptions options;
  options.fwd = options.bwd_data = options.bwd_weights = policy;
  return options;
}

}  // namespace dnnx::testing_fakes
