// IDX files (the MNIST format), read through zlib's gz* interface, which inflates a gzip stream
// and passes any other file through unchanged.

#include <dnnx/data.hpp>

#include "core/check.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace dnnx::data {
namespace {

using detail::cat;
using detail::raise;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    raise(ErrorKind::InvalidArgument,
          cat("cannot open '", path, "': ", errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  std::vector<std::uint8_t> bytes;
  constexpr std::size_t chunk = std::size_t{1} << 20;
  for (;;) {
    const std::size_t used = bytes.size();
    bytes.resize(used + chunk);
    const int got = gzread(file.get(), bytes.data() + used, static_cast<unsigned>(chunk));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      raise(ErrorKind::InvalidArgument, cat("cannot read '", path, "': gzip error: ",
                                            code == Z_ERRNO ? std::strerror(errno) : message));
    }
    bytes.resize(used + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  // gzread reports a gzip stream cut short only through gzerror once it stops.
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    raise(ErrorKind::InvalidArgument, cat("cannot read '", path, "': gzip error: ", message));
  }
  return bytes;
}

std::string hex(std::uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "%0*x", digits, value);
  return text;
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_all(path);
  if (bytes.size() < 4) {
    raise(ErrorKind::InvalidArgument,
          cat("'", path, "' is not an IDX file: ", bytes.size(), " bytes, shorter than the magic"));
  }
  const std::uint32_t magic = big_endian_u32(bytes.data());
  const unsigned type = (magic >> 8) & 0xff;
  const unsigned rank = magic & 0xff;
  if ((magic >> 16) != 0 || rank == 0) {
    raise(ErrorKind::InvalidArgument,
          cat("'", path, "' is not an IDX file: bad magic 0x", hex(magic, 8),
              " (expected 0x0000TTRR with element type TT and rank RR >= 1)"));
  }
  if (type != 0x08) {
    raise(ErrorKind::Unsupported, cat("'", path, "': IDX element type 0x", hex(type, 2),
                                      " is not read; only 0x08 (unsigned byte) is"));
  }
  const std::size_t header = 4 + 4 * std::size_t{rank};
  if (bytes.size() < header) {
    raise(ErrorKind::InvalidArgument, cat("'", path, "' is truncated: ", bytes.size(),
                                          " bytes, its header of rank ", rank, " needs ", header));
  }
  IdxArray array;
  std::int64_t count = 1;
  for (unsigned i = 0; i < rank; ++i) {
    const std::int64_t size = big_endian_u32(bytes.data() + 4 + 4 * i);
    array.dims.push_back(size);
    const auto next = detail::checked_mul(count, size);
    if (!next || *next > detail::max_elements) {
      raise(ErrorKind::InvalidArgument,
            cat("'", path, "': IDX dimensions ", detail::join(array.dims, "x"),
                " have too many elements"));
    }
    count = *next;
  }
  const std::size_t payload = bytes.size() - header;
  if (payload != static_cast<std::size_t>(count)) {
    raise(ErrorKind::InvalidArgument,
          cat("'", path, "': dimensions ", detail::join(array.dims, "x"), " need ", count,
              " bytes of data, the file has ", payload,
              payload < static_cast<std::size_t>(count) ? " (truncated)" : " (trailing bytes)"));
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace dnnx::data
