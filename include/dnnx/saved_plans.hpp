#pragma once
// Saved plans: the folder next to the persistent choice cache where backends keep the plans of
// chosen candidates that are costly to build (the cudnn convolution's runtime-compiled engines),
// so that another process with the same cache loads them instead of compiling them again
// (docs/tuning-cache.md, "Saved plans").

#include <dnnx/algo.hpp>

#include <cstddef>
#include <string>

namespace dnnx {

/// What the saved-plan folder of a choice cache holds.
struct SavedPlans {
  std::string folder;     ///< DNNX_PLAN_DIR, else "<cache file>.plans"; empty when there is none
  std::size_t files = 0;  ///< saved plans
  std::size_t bytes = 0;  ///< their total size
};

/// The saved plans that go with the cache file `cache` (CacheFileOptions::from_env() for the
/// library's own).
SavedPlans saved_plans(const CacheFileOptions& cache);

/// Removes the saved plans that go with `cache`; returns how many there were.
std::size_t clear_saved_plans(const CacheFileOptions& cache);

}  // namespace dnnx
