#pragma once
// Energy per call of a candidate, read from the device's cumulative energy counter (NVML's on a
// GPU) over loops of back-to-back runs: Note [energy per call] in energy.cpp.

#include <dnnx/algo.hpp>

#include "core/energy_counter.hpp"

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace dnnx::tune {

using detail::EnergyCounter;

/// How a meter tells time and waits: the steady clock and the thread's sleep, or a test's
/// simulation of both.
struct MeterClock {
  std::function<double()> now_s;
  std::function<void(double seconds)> sleep_s;
  static MeterClock steady();
};

/// One candidate's energy (Note [energy per call]).
struct EnergyReading {
  double joules_per_call = std::numeric_limits<double>::quiet_NaN();  ///< median of the repeats
  double spread_joules = std::numeric_limits<double>::quiet_NaN();    ///< max - min of them
  double power_w = std::numeric_limits<double>::quiet_NaN();          ///< mean power while it ran
  double idle_w = std::numeric_limits<double>::quiet_NaN();           ///< the baseline subtracted
  double clock_mhz = std::numeric_limits<double>::quiet_NaN();  ///< at the end of the last loop
  long calls = 0;                                               ///< runs in all the loops
};

/// Idle baselines kept for the meters of one counter, by its name (Note [energy per call]): a
/// baseline measured less than `max_age_s` ago is used again instead of measuring another.
class IdleBaselines {
 public:
  explicit IdleBaselines(double max_age_s) : max_age_s_(max_age_s) {}
  /// The watts measured on `counter` at most max_age_s before `now_s`, if any.
  std::optional<double> fresh(const std::string& counter, double now_s) const;
  void store(const std::string& counter, double watts, double now_s);
  /// The process's, for the op layer's meters (on the steady clock): 30 s.
  static IdleBaselines& process();

 private:
  struct Baseline {
    double watts;
    double at_s;
  };
  mutable std::mutex mutex_;
  double max_age_s_;
  std::map<std::string, Baseline> baselines_;
};

/// Measures energy per call on one counter: the idle baseline once, then each candidate's loops.
class EnergyMeter {
 public:
  /// `window_ms`: each loop runs at least this long (TuneOptions::energy_window_ms); `repeats`:
  /// loops per candidate (TuneOptions::energy_repeats).
  /// `shared`: baselines to use again and to add to (of the same clock), or none.
  EnergyMeter(std::shared_ptr<EnergyCounter> counter, double window_ms, int repeats,
              MeterClock clock = MeterClock::steady(), IdleBaselines* shared = nullptr);

  const EnergyCounter& counter() const { return *counter_; }
  /// The idle power, watts: a fresh one of the shared baselines, else measured over one window
  /// the first time it is asked for (and shared).
  double idle_w();
  /// The energy of a candidate whose `run(n)` runs it n times back to back and returns once they
  /// have finished; `call_ms` is its time per call (how many runs a loop's step holds). Throws
  /// dnnx::Error when the counter fails or stops changing.
  EnergyReading measure(const std::function<void(long runs)>& run, double call_ms);

 private:
  struct Edge {
    double seconds;
    double joules;
  };
  // The moment the counter next changes (polled), and its value then.
  Edge next_update(double after_joules, double limit_s);

  std::shared_ptr<EnergyCounter> counter_;
  double window_s_;
  int repeats_;
  MeterClock clock_;
  IdleBaselines* shared_;
  std::optional<double> idle_w_;
};

/// Fills the energy columns of `row` from `reading`.
void record_energy(ProfileRow& row, const EnergyReading& reading);

/// Measures one candidate (energy policies and `profile --energy`): the meter's measure() on the
/// backend's loop of runs of `algo`.
using EnergyOnce = std::function<EnergyReading(const AlgoInfo& algo, double call_ms)>;

}  // namespace dnnx::tune
