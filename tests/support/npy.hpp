#pragma once
// Minimal .npy reader and writer for what the PyTorch oracle exchanges: little-endian float32
// ('<f4'), C order, any rank. Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
// Anything else is rejected with a message naming the file and the field.

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dnnx::test {

static_assert(std::endian::native == std::endian::little, "npy.hpp reads and writes '<f4' only");

/// A float32 array in C order.
struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  ///< product(shape) values, row-major
};

namespace npy_detail {

inline std::runtime_error error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what);
}

/// The text after `'key':` in the header dict, up to the next top-level ',' or '}'.
inline std::string field(const std::string& header, const std::string& key,
                         const std::string& path) {
  const std::string quoted = "'" + key + "'";
  const auto at = header.find(quoted);
  if (at == std::string::npos) throw error(path, "npy header has no " + quoted + ": " + header);
  auto pos = header.find(':', at + quoted.size());
  if (pos == std::string::npos) throw error(path, "npy header malformed near " + quoted);
  ++pos;
  int depth = 0;
  std::string value;
  for (; pos < header.size(); ++pos) {
    const char c = header[pos];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    value += c;
  }
  const auto first = value.find_first_not_of(' ');
  const auto last = value.find_last_not_of(' ');
  return first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
}

}  // namespace npy_detail

/// Reads a '<f4' C-order .npy file; throws std::runtime_error naming the file and the problem.
inline NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw npy_detail::error(path, "cannot open for reading");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    throw npy_detail::error(path, "not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_length = 0;
  if (major == 1) {
    unsigned char bytes[2];
    in.read(reinterpret_cast<char*>(bytes), 2);
    header_length = bytes[0] | (bytes[1] << 8u);
  } else if (major == 2 || major == 3) {
    unsigned char bytes[4];
    in.read(reinterpret_cast<char*>(bytes), 4);
    header_length = bytes[0] | (bytes[1] << 8u) | (bytes[2] << 16u) | (std::uint32_t{bytes[3]} << 24u);
  } else {
    throw npy_detail::error(path, "unsupported .npy version " + std::to_string(major) +
                                      " (accepted: 1, 2, 3)");
  }
  std::string header(header_length, '\0');
  if (!in.read(header.data(), header_length)) throw npy_detail::error(path, "truncated header");

  const std::string descr = npy_detail::field(header, "descr", path);
  if (descr != "'<f4'") {
    throw npy_detail::error(path, "dtype " + descr + " is not supported (accepted: '<f4')");
  }
  const std::string order = npy_detail::field(header, "fortran_order", path);
  if (order != "False") {
    throw npy_detail::error(path, "fortran_order " + order + " is not supported (accepted: False)");
  }
  const std::string shape_text = npy_detail::field(header, "shape", path);
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')') {
    throw npy_detail::error(path, "malformed shape " + shape_text);
  }
  NpyArray array;
  std::int64_t count = 1;
  std::string number;
  for (std::size_t i = 1; i < shape_text.size(); ++i) {
    const char c = shape_text[i];
    if (c >= '0' && c <= '9') {
      number += c;
    } else if (c == ',' || c == ')') {
      if (!number.empty()) {
        array.shape.push_back(std::stoll(number));
        count *= array.shape.back();
        number.clear();
      }
    } else if (c != ' ' && c != 'L') {
      throw npy_detail::error(path, "malformed shape " + shape_text);
    }
  }
  array.data.resize(static_cast<std::size_t>(count));
  if (!in.read(reinterpret_cast<char*>(array.data.data()),
               static_cast<std::streamsize>(array.data.size() * sizeof(float)))) {
    throw npy_detail::error(path, "truncated data: expected " + std::to_string(count) +
                                      " float32 values for shape " + shape_text);
  }
  return array;
}

/// Writes `data` (row-major, product(shape) values) as a version 1.0 '<f4' C-order .npy file.
inline void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
                      const std::vector<float>& data) {
  std::int64_t count = 1;
  std::string shape_text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    count *= shape[i];
    shape_text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  }
  shape_text += ")";
  if (count != static_cast<std::int64_t>(data.size())) {
    throw npy_detail::error(path, "shape " + shape_text + " holds " + std::to_string(count) +
                                      " values, got " + std::to_string(data.size()));
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::ofstream out(path, std::ios::binary);
  if (!out) throw npy_detail::error(path, "cannot open for writing");
  const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                      static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(preamble), sizeof preamble);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) throw npy_detail::error(path, "write failed");
}

}  // namespace dnnx::test
