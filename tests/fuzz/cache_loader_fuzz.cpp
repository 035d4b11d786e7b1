// libFuzzer target for the tune-cache file loader (tune::parse). Any input must either parse or
// raise dnnx::Error(InvalidArgument); what parses must survive serialize -> parse unchanged.

#include <dnnx/error.hpp>

#include "tune/cache_file.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dnnx::tune::FileRecords records;
  try {
    records = dnnx::tune::parse(text);
  } catch (const dnnx::Error& error) {
    if (error.kind() != dnnx::ErrorKind::InvalidArgument) std::abort();
    return 0;
  }
  const dnnx::tune::FileRecords again = dnnx::tune::parse(dnnx::tune::serialize(records));
  if (again.size() != records.size()) std::abort();
  for (const auto& [key, record] : records) {
    const auto it = again.find(key);
    if (it == again.end() || it->second.choice->algo.id != record.choice->algo.id ||
        it->second.choice->measured_at != record.choice->measured_at ||
        it->second.last_used != record.last_used)
      std::abort();
  }
  return 0;
}
