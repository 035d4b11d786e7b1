#pragma once
// The oneDNN objects one cpu backend instance owns, shared with the plans it hands out (a plan may
// outlive the backend that built it).

#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>
#include <string>

namespace dnnx::onednn {

// Note [one stream]
// Each backend instance has one engine and one stream. Every execution on the stream (conv plans,
// bias primitives, the wait at the end of time_ms) holds `mutex`: plans rebind their cached
// dnnl::memory objects to the caller's pointers before each run (set_data_handle), so two threads
// must not run the same plan at once, and the primitives use every OpenMP thread anyway, so
// running two of them side by side would only make both slower.
struct Runtime {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  std::string isa;  ///< the ISA oneDNN dispatches to here, e.g. "avx512_core_amx"
};

}  // namespace dnnx::onednn
