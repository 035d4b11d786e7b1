// libFuzzer target for the tune-cache file loader (tune::parse_document, tune::owner_of). Any
// input must either load or raise dnnx::Error(InvalidArgument); what loads (bad entries skipped)
// must survive serialize -> parse unchanged, with nothing skipped the second time, and what dnnx
// writes must be recognised as its own.

#include <dnnx/error.hpp>

#include "tune/cache_file.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)dnnx::tune::owner_of(text);
  dnnx::tune::Parsed parsed;
  try {
    parsed = dnnx::tune::parse_document(text);
  } catch (const dnnx::Error& error) {
    if (error.kind() != dnnx::ErrorKind::InvalidArgument) std::abort();
    return 0;
  }
  const std::string written = dnnx::tune::serialize(parsed.records);
  if (dnnx::tune::owner_of(written) != dnnx::tune::Owner::ours) std::abort();
  const dnnx::tune::Parsed again = dnnx::tune::parse_document(written);
  if (!again.dropped.empty() || again.records.size() != parsed.records.size()) std::abort();
  for (const auto& [key, record] : parsed.records) {
    const auto it = again.records.find(key);
    if (it == again.records.end() || it->second.choice->algo.id != record.choice->algo.id ||
        it->second.choice->algo.workspace_bytes != record.choice->algo.workspace_bytes ||
        it->second.choice->measured_at != record.choice->measured_at ||
        it->second.last_used != record.last_used)
      std::abort();
  }
  return 0;
}
