// safetensors files: parsing with every check of the reference implementation, and writing what
// it writes (Note [safetensors layout]).

#include <dnnx/safetensors.hpp>

#include "core/check.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace dnnx::safetensors {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and copied as is");

using detail::cat;
using detail::raise;

// Note [safetensors layout]
// The reference implementation (the Rust crate behind Python's `safetensors`) orders the tensors
// of a file by dtype, largest alignment first in the order of its Dtype enum (listed below), then
// by name, so that every tensor's data starts at a multiple of its element size; the header is
// compact JSON, "__metadata__" first when present, then the tensors in data order, padded with
// spaces to a multiple of 8 bytes. Readers accept any order and padding, and require the offsets
// to tile the data exactly: sorted by start, each starting where the previous ended, the last
// ending at the end of the file. Headers above 100 MB are refused (MAX_HEADER_SIZE).
struct DtypeInfo {
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DtypeInfo, 15> dtypes{{
    {"BOOL", 1},
    {"U8", 1},
    {"I8", 1},
    {"F8_E5M2", 1},
    {"F8_E4M3", 1},
    {"I16", 2},
    {"U16", 2},
    {"F16", 2},
    {"BF16", 2},
    {"I32", 4},
    {"U32", 4},
    {"F32", 4},
    {"F64", 8},
    {"I64", 8},
    {"U64", 8},
}};
constexpr std::size_t max_header_bytes = 100'000'000;

std::size_t dtype_rank(std::string_view name) {
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (dtypes[i].name == name) return i;
  }
  return dtypes.size();
}

std::string accepted_dtypes() {
  std::vector<std::string_view> names;
  for (const DtypeInfo& info : dtypes) names.push_back(info.name);
  return detail::join(names, ", ");
}

std::optional<DType> dnnx_dtype(std::string_view name) {
  if (name == "F32") return DType::f32;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  return std::nullopt;
}

// The byte count of `shape` elements of `size` bytes, or nullopt when a size is negative or the
// count passes 2^60 elements (Note [size limits]).
std::optional<std::int64_t> byte_count(const std::vector<std::int64_t>& shape, std::size_t size) {
  std::int64_t count = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto next = detail::checked_mul(count, d);
    if (!next || *next > detail::max_elements) return std::nullopt;
    count = *next;
  }
  return count * static_cast<std::int64_t>(size);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return "[" + detail::join(shape, ", ") + "]";
}

void check_entry(std::string_view what, const std::string& name, const Entry& entry) {
  const std::size_t size = dtype_size(entry.dtype);
  const auto bytes = byte_count(entry.shape, size);
  if (!bytes) {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": tensor '", name, "' has shape ", shape_text(entry.shape),
              "; sizes must be >= 0 with at most 2^60 elements"));
  }
  if (static_cast<std::uint64_t>(*bytes) != entry.data.size()) {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": tensor '", name, "' (", entry.dtype, " ", shape_text(entry.shape),
              ") needs ", *bytes, " bytes, its data has ", entry.data.size()));
  }
}

// A non-negative JSON integer, else InvalidArgument naming `field` of tensor `name`.
std::uint64_t json_size(const nlohmann::json& value, std::string_view what, const std::string& name,
                        std::string_view field) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  }
  raise(ErrorKind::InvalidArgument, cat(what, ": tensor '", name, "': ", field, " holds ",
                                        value.dump(), "; expected non-negative integers"));
}

Tensor host_copy(const Tensor& tensor) {
  Tensor host = Tensor::empty(tensor.dims(), tensor.dtype(), Layout::channels_first);
  if (tensor.numel() > 0) copy(tensor, host);
  return host;
}

}  // namespace

std::size_t dtype_size(std::string_view dtype) {
  const std::size_t rank = dtype_rank(dtype);
  if (rank == dtypes.size()) {
    raise(ErrorKind::Unsupported,
          cat("safetensors dtype '", dtype, "' is not known; known: ", accepted_dtypes()));
  }
  return dtypes[rank].size;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  raise(ErrorKind::InvalidArgument, cat("dtype ", static_cast<int>(dtype), " is not a dnnx DType"));
}

File File::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    raise(ErrorKind::InvalidArgument, cat("cannot open '", path, "': ", std::strerror(errno)));
  }
  in.seekg(0, std::ios::end);
  const std::streamoff length = in.tellg();
  in.seekg(0);
  if (length < 0) raise(ErrorKind::InvalidArgument, cat("cannot read '", path, "'"));
  std::vector<std::byte> bytes(static_cast<std::size_t>(length));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), length)) {
    raise(ErrorKind::InvalidArgument, cat("cannot read '", path, "': ", std::strerror(errno)));
  }
  File file = parse(bytes, "'" + path + "'");
  file.source_ = path;
  return file;
}

File File::parse(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() < 8) {
    raise(ErrorKind::InvalidArgument, cat(what, " is not a safetensors file: ", bytes.size(),
                                          " bytes, fewer than the 8 of the header length"));
  }
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  if (header_length > max_header_bytes) {
    raise(ErrorKind::InvalidArgument, cat(what, ": header length ", header_length,
                                          " is above the limit of ", max_header_bytes, " bytes"));
  }
  if (header_length > bytes.size() - 8) {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": header length ", header_length, " runs past the end of the data (",
              bytes.size() - 8, " bytes follow the length)"));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8, header_length);
  if (header.empty() || header.front() != '{') {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": the header does not start with '{' (not a safetensors file?)"));
  }
  std::set<std::string> seen;
  std::string duplicate;
  const nlohmann::json::parser_callback_t check_duplicates =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1 &&
            !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        return true;
      };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(header, check_duplicates);
  } catch (const nlohmann::json::exception& error) {
    raise(ErrorKind::InvalidArgument, cat(what, ": the header is not valid JSON: ", error.what()));
  }
  if (!json.is_object()) {
    raise(ErrorKind::InvalidArgument, cat(what, ": the header is not a JSON object"));
  }
  if (!duplicate.empty()) {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": the header names '", duplicate, "' more than once"));
  }
  const std::span<const std::byte> data = bytes.subspan(8 + header_length);
  File file;
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        raise(ErrorKind::InvalidArgument,
              cat(what, ": __metadata__ is ", value.type_name(), ", not an object of strings"));
      }
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          raise(ErrorKind::InvalidArgument, cat(what, ": __metadata__ entry '", key, "' is ",
                                                text.type_name(), ", not a string"));
        }
        file.metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) {
      raise(ErrorKind::InvalidArgument, cat(what, ": tensor '", name, "' is described by a ",
                                            value.type_name(), ", not an object"));
    }
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) {
        raise(ErrorKind::InvalidArgument, cat(what, ": tensor '", name, "' has no ", field));
      }
    }
    const nlohmann::json& dtype = value["dtype"];
    const nlohmann::json& shape = value["shape"];
    const nlohmann::json& offsets = value["data_offsets"];
    if (!dtype.is_string()) {
      raise(ErrorKind::InvalidArgument,
            cat(what, ": tensor '", name, "': dtype is ", dtype.dump(), ", not a string"));
    }
    if (!shape.is_array()) {
      raise(ErrorKind::InvalidArgument,
            cat(what, ": tensor '", name, "': shape is ", shape.dump(), ", not an array"));
    }
    if (!offsets.is_array() || offsets.size() != 2) {
      raise(ErrorKind::InvalidArgument, cat(what, ": tensor '", name, "': data_offsets is ",
                                            offsets.dump(), ", not [begin, end]"));
    }
    Entry entry;
    entry.dtype = dtype.get<std::string>();
    if (dtype_rank(entry.dtype) == dtypes.size()) {
      raise(ErrorKind::Unsupported, cat(what, ": tensor '", name, "' has dtype '", entry.dtype,
                                        "', not known; known: ", accepted_dtypes()));
    }
    const std::size_t size = dtype_size(entry.dtype);
    for (const nlohmann::json& d : shape) {
      const std::uint64_t extent = json_size(d, what, name, "shape");
      if (extent > static_cast<std::uint64_t>(detail::max_elements)) {
        raise(ErrorKind::InvalidArgument, cat(what, ": tensor '", name, "': shape ", shape.dump(),
                                              " has more than 2^60 elements"));
      }
      entry.shape.push_back(static_cast<std::int64_t>(extent));
    }
    const std::uint64_t begin = json_size(offsets[0], what, name, "data_offsets");
    const std::uint64_t end = json_size(offsets[1], what, name, "data_offsets");
    if (end < begin || end > data.size()) {
      raise(ErrorKind::InvalidArgument,
            cat(what, ": tensor '", name, "': data_offsets [", begin, ", ", end,
                "] are not within the ", data.size(), " bytes of data"));
    }
    const auto needed = byte_count(entry.shape, size);
    if (!needed || static_cast<std::uint64_t>(*needed) != end - begin) {
      raise(ErrorKind::InvalidArgument,
            cat(what, ": tensor '", name, "' (", entry.dtype, " ", shape.dump(), ") needs ",
                needed ? cat(*needed) : std::string("more than 2^60 elements' of"),
                " bytes; data_offsets [", begin, ", ", end, "] hold ", end - begin));
    }
    const auto first = data.begin() + static_cast<std::ptrdiff_t>(begin);
    entry.data.assign(first, first + static_cast<std::ptrdiff_t>(end - begin));
    spans.push_back({begin, end, name});
    file.entries_.emplace(name, std::move(entry));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (const Span& span : spans) {
    if (span.begin != covered) {
      raise(ErrorKind::InvalidArgument,
            cat(what, ": tensor '", span.name, "' starts at byte ", span.begin, " of the data, ",
                span.begin < covered ? "inside the previous tensor" : "leaving a hole", " (",
                covered, " bytes covered before it)"));
    }
    covered = span.end;
  }
  if (covered != data.size()) {
    raise(ErrorKind::InvalidArgument,
          cat(what, ": the tensors cover ", covered, " bytes of data, the file has ", data.size()));
  }
  return file;
}

std::vector<std::byte> File::serialize() const {
  std::vector<const std::pair<const std::string, Entry>*> order;
  for (const auto& item : entries_) order.push_back(&item);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_rank(a->second.dtype) > dtype_rank(b->second.dtype);
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata_) metadata[key] = value;
    header["__metadata__"] = std::move(metadata);
  }
  std::uint64_t offset = 0;
  for (const auto* item : order) {
    const Entry& entry = item->second;
    nlohmann::ordered_json description = nlohmann::ordered_json::object();
    description["dtype"] = entry.dtype;
    description["shape"] = entry.shape;
    description["data_offsets"] = {offset, offset + entry.data.size()};
    header[item->first] = std::move(description);
    offset += entry.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> bytes(8 + text.size() + offset);
  const std::uint64_t length = text.size();
  std::memcpy(bytes.data(), &length, 8);
  std::memcpy(bytes.data() + 8, text.data(), text.size());
  std::byte* data = bytes.data() + 8 + text.size();
  for (const auto* item : order) {
    const std::vector<std::byte>& source = item->second.data;
    if (!source.empty()) std::memcpy(data, source.data(), source.size());
    data += source.size();
  }
  return bytes;
}

void File::write(const std::string& path) const {
  const std::vector<std::byte> bytes = serialize();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      raise(ErrorKind::InvalidArgument,
            cat("cannot write '", temporary, "': ", std::strerror(errno)));
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      raise(ErrorKind::InvalidArgument,
            cat("cannot write '", temporary, "': ", std::strerror(errno)));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary);
    raise(ErrorKind::InvalidArgument,
          cat("cannot move '", temporary, "' to '", path, "': ", error.message()));
  }
}

void File::set(const std::string& name, Entry entry) {
  if (name == "__metadata__") {
    raise(ErrorKind::InvalidArgument,
          "tensor name '__metadata__' is reserved for the file's metadata");
  }
  check_entry("safetensors", name, entry);
  entries_[name] = std::move(entry);
}

void File::set(const std::string& name, const Tensor& tensor) {
  if (tensor.is_null() && tensor.numel() != 0) {
    raise(ErrorKind::InvalidArgument, cat("tensor '", name, "' has no storage"));
  }
  Entry entry;
  entry.dtype = std::string(dtype_name(tensor.dtype()));
  entry.shape.assign(tensor.dims().begin(), tensor.dims().end());
  const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * size_of(tensor.dtype());
  entry.data.resize(bytes);
  if (bytes > 0) {
    const Tensor host = host_copy(tensor);
    std::memcpy(entry.data.data(), host.data(), bytes);
  }
  set(name, std::move(entry));
}

std::vector<std::string> File::names() const {
  std::vector<std::string> names;
  for (const auto& item : entries_) names.push_back(item.first);
  return names;
}

const Entry& File::entry(const std::string& name) const {
  const auto found = entries_.find(name);
  if (found == entries_.end()) {
    raise(ErrorKind::InvalidArgument,
          cat(source_.empty() ? std::string("safetensors data") : "'" + source_ + "'",
              " has no tensor '", name, "' (it holds ", entries_.size(), " tensors)"));
  }
  return found->second;
}

Tensor File::tensor(const std::string& name) const {
  const Entry& found = entry(name);
  const auto dtype = dnnx_dtype(found.dtype);
  if (!dtype) {
    raise(ErrorKind::Unsupported, cat("tensor '", name, "' is ", found.dtype,
                                      "; dnnx tensors are F32, F16, BF16, I32 or I64"));
  }
  if (found.shape.size() > static_cast<std::size_t>(Dims::max_rank)) {
    raise(ErrorKind::Unsupported, cat("tensor '", name, "' has rank ", found.shape.size(),
                                      "; dnnx tensors have at most ", Dims::max_rank));
  }
  Tensor tensor = Tensor::empty(Dims(std::span<const std::int64_t>(found.shape)), *dtype);
  if (!found.data.empty()) std::memcpy(tensor.data(), found.data.data(), found.data.size());
  return tensor;
}

void File::copy_to(const std::string& name, Tensor& dst) const {
  const Entry& found = entry(name);
  const bool fits = found.shape.size() <= static_cast<std::size_t>(Dims::max_rank);
  const Dims dims = fits ? Dims(std::span<const std::int64_t>(found.shape)) : Dims{};
  if (!fits || dims != dst.dims() || dnnx_dtype(found.dtype) != dst.dtype()) {
    raise(ErrorKind::InvalidArgument,
          cat("tensor '", name, "' is ", found.dtype, " ", shape_text(found.shape),
              "; the destination is ", describe(dst)));
  }
  if (found.data.empty()) return;
  const Tensor source = Tensor::view(const_cast<std::byte*>(found.data.data()), dims, dst.dtype());
  copy(source, dst);
}

void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const std::map<std::string, std::string>& metadata) {
  File file;
  for (const auto& [name, tensor] : tensors) {
    if (file.contains(name)) {
      raise(ErrorKind::InvalidArgument, cat("tensor name '", name, "' is given twice"));
    }
    file.set(name, tensor);
  }
  file.metadata() = metadata;
  file.write(path);
}

File load(const std::string& path) { return File::read(path); }

}  // namespace dnnx::safetensors
