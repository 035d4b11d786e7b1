#pragma once
/// \file
/// Whole-model tools: report() (per layer and direction, what ran and how it compares with the
/// heuristic choice) and convert() (cudnn.torch's convert: another backend, device or dtype, with
/// an exclusion predicate).

#include <dnnx/nn/module.hpp>

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::nn {

/// One layer-direction of a report.
struct ReportRow {
  std::string module;  ///< dotted name ("layer1.0.conv1"; "" for the model itself)
  std::string type;    ///< "Conv2d"
  std::string op;      ///< "conv"
  Direction direction = Direction::fwd;
  std::string policy;  ///< the layer's policy for the direction (AlgoPolicy::to_string)
  std::string id;      ///< the candidate that ran last
  double time_ms = 0;  ///< its median time, ms (NaN when not timed)
  std::size_t workspace_bytes = 0;  ///< its workspace, bytes
  std::string heuristic_id;         ///< what a heuristic policy picks for the same desc
  double heuristic_ms = 0;          ///< its median time, ms (NaN when not timed)
  double speedup = 0;               ///< heuristic_ms / time_ms (NaN when either is unknown)
  /// The chosen candidate's energy per call, joules, where it was measured: by an energy policy
  /// (min_energy, energy_delay) or, with ReportOptions::profile, by a profile with
  /// TuneOptions::profile_energy (NaN otherwise).
  double energy_j = std::numeric_limits<double>::quiet_NaN();
  /// Where energy was asked for: the counter read, or why none was (Choice::energy_meter,
  /// ProfileResult::energy_meter); empty otherwise.
  std::string energy_meter;
};

/// What report() measures.
struct ReportOptions {
  /// Profile every layer-direction (times every candidate: slow) so that every time and speedup
  /// is known; otherwise times come from the choices (exhaustive policies time their
  /// candidates, heuristic and fixed ones do not).
  bool profile = false;
};

/// A report of every module that has run an op, in named_modules() order and direction order.
struct Report {
  std::vector<ReportRow> rows;
  /// Fixed-width text table of the rows; with an `mJ/call` column where some row's energy was
  /// measured, and an `energy: <meter>` line per distinct meter where energy was asked for.
  std::string table() const;
};

/// The report of `model` after at least one forward (and backward, for the backward rows).
Report report(Module& model, const ReportOptions& options = {});

/// Moves every module of `model` (named_modules(), the model itself included) for which
/// `exclude(name, module)` is false to `context` (Module::to): backend, device and the type
/// config's dtype; f16 / bf16 weights keep f32 master copies. E.g. everything to f16 but the
/// batch norms: exclude = [](auto&, const Module& m) { return
/// m.type_name().starts_with("BatchNorm"); } (batch norm weights are f32 anyway; its data dtype
/// follows its input). Optimizers built before must be built again.
void convert(
    Module& model, const Context& context,
    const std::function<bool(const std::string& name, const Module& module)>& exclude = {});

/// Module::to_layout on every module of `model`: every parameter of rank 3 or more (the
/// convolution weights: value, f32 master copy and gradient) is stored dense in `layout`, and
/// the convolutions run in it, as after PyTorch's model.to(memory_format=...) (Note [nn
/// layouts]); parameters already in it are left alone. The values are unchanged (a copy through
/// the host on a GPU: call it once, not per step). Optimizers built before must be built again.
void to_layout(Module& model, Layout layout);

}  // namespace dnnx::nn
