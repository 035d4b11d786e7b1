#pragma once
/// \file
/// The safetensors format (Hugging Face's): an 8-byte little-endian header length N, N bytes of a
/// JSON object {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
/// "__metadata__": {"key": "value"}} padded with spaces, then the tensors' bytes, row-major and
/// little-endian, offsets relative to the end of the header, covering the data without holes.
/// dnnx writes what the reference implementation writes: tensors ordered by dtype alignment
/// (largest first) and then by name, the header padded to a multiple of 8 bytes.

#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::safetensors {

/// One tensor as the file holds it: any safetensors dtype, any rank.
struct Entry {
  std::string dtype;                ///< "F32", "F16", "BF16", "F64", "I64", "I32", "U8", ...
  std::vector<std::int64_t> shape;  ///< sizes, outermost first (empty: a scalar)
  std::vector<std::byte> data;      ///< product(shape) * element size bytes, little-endian
};

/// The dtypes of the format: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32,
/// F64, I64, U64. Returns the element size in bytes; throws Unsupported for any other name.
std::size_t dtype_size(std::string_view dtype);
/// The safetensors name of a dnnx dtype: F32, F16, BF16, I32, I64.
std::string_view dtype_name(DType dtype);

/// A whole file in memory: metadata and tensors by name.
class File {
 public:
  File() = default;

  /// Reads and validates `path`. Every malformed file is an InvalidArgument naming the path and
  /// what is wrong: too short, a header length past the end of the file or above 100 MB, a header
  /// that is not a JSON object, an entry without dtype / shape / data_offsets or with values of
  /// the wrong type, a duplicate name, a size mismatch between shape, dtype and offsets, offsets
  /// that overlap, leave holes or do not end where the file does, metadata that is not an object
  /// of strings. An unknown dtype is Unsupported.
  static File read(const std::string& path);
  /// The same from bytes in memory; `what` names them in messages.
  static File parse(std::span<const std::byte> bytes, std::string_view what = "safetensors data");

  /// The file's bytes, as write() stores them.
  std::vector<std::byte> serialize() const;
  /// Writes serialize() to `path` (through a temporary file renamed into place). Throws
  /// InvalidArgument naming the path when it cannot be written.
  void write(const std::string& path) const;

  /// Adds or replaces `name`. Throws InvalidArgument when the name is "__metadata__", the dtype is
  /// unknown (Unsupported) or the data size does not match dtype and shape.
  void set(const std::string& name, Entry entry);
  /// Adds or replaces `name` with a host copy of `tensor` (a device tensor is copied to the host
  /// first) in logical row-major order, whatever its strides or layout: what PyTorch's
  /// state_dict tensors look like.
  void set(const std::string& name, const Tensor& tensor);

  /// Names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  /// The entry `name`; throws InvalidArgument naming it (and the file) when absent.
  const Entry& entry(const std::string& name) const;
  /// A new dense host tensor (channels_first) holding entry `name`. Throws InvalidArgument when
  /// absent, Unsupported when its dtype has no dnnx DType (only F32, F16, BF16, I32, I64 do) or
  /// its rank is above 5.
  Tensor tensor(const std::string& name) const;
  /// Copies entry `name` into `dst` (host or device, any dense layout): dims and dtype must match
  /// exactly, else InvalidArgument naming both.
  void copy_to(const std::string& name, Tensor& dst) const;

  /// The __metadata__ object (string to string).
  std::map<std::string, std::string>& metadata() { return metadata_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// Where the file came from, for messages ("" for one built in memory).
  const std::string& source() const { return source_; }

 private:
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::string source_;
};

/// Writes `tensors` (host or device) and `metadata` to `path`.
void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const std::map<std::string, std::string>& metadata = {});
/// Reads `path` (File::read).
File load(const std::string& path);

}  // namespace dnnx::safetensors
