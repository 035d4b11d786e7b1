#pragma once
/// \file
/// Tensors: a dtype, up to 5 logical dimensions with element strides, and storage that is either
/// owned (allocated through an Allocator) or borrowed (a view over user memory, never copied).

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// Element types. f16 and bf16 are storage types: backends compute in f32 (or wider). The integer
/// types hold indices such as class labels; ops that compute on values reject them.
enum class DType : std::uint8_t {
  f32,   ///< IEEE binary32
  f16,   ///< IEEE binary16
  bf16,  ///< bfloat16 (8-bit exponent, 7-bit mantissa)
  i32,   ///< 32-bit signed integer (labels)
  i64,   ///< 64-bit signed integer (labels, PyTorch's default index type)
};

/// True for f32, f16 and bf16.
constexpr bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

/// Bytes per element of `dtype`.
std::size_t size_of(DType dtype);
/// "f32", "f16", "bf16", "i32", "i64".
std::string_view to_string(DType dtype);
/// Parses "f32"/"float"/"float32", "f16"/"half"/"float16", "bf16"/"bfloat16", "i32"/"int32",
/// "i64"/"int64"; throws InvalidArgument.
DType parse_dtype(std::string_view text);

/// Dense memory orders of activation and weight tensors. Logical dimensions are always
/// N, C, [D,] [H,] W (weights: O, I/groups, [KD,] [KH,] KW); the layout only decides the strides.
enum class Layout : std::uint8_t {
  channels_first,  ///< NCW / NCHW / NCDHW (weights OIW / OIHW / OIDHW)
  channels_last,   ///< NWC / NHWC / NDHWC (weights OWI / OHWI / ODHWI)
};

/// "nchw" or "nhwc" (the names are used for every rank).
std::string_view to_string(Layout layout);
/// Parses "nchw"/"ncw"/"ncdhw"/"channels_first" and "nhwc"/"nwc"/"ndhwc"/"channels_last".
Layout parse_layout(std::string_view text);

/// Where memory lives.
struct Device {
  enum class Kind : std::uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;  ///< host or CUDA device
  int index = 0;          ///< CUDA device ordinal; 0 for the host

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {Kind::cuda, index}; }
  bool operator==(const Device&) const = default;
};
/// "cpu" or "cuda:N".
std::string to_string(Device device);

/// Dimensions or strides of a tensor: at most 5 entries, no heap allocation.
class Dims {
 public:
  static constexpr int max_rank = 5;

  Dims() = default;
  Dims(std::initializer_list<std::int64_t> values);
  explicit Dims(std::span<const std::int64_t> values);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return values_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return values_[static_cast<std::size_t>(i)]; }
  const std::int64_t* begin() const { return values_.data(); }
  const std::int64_t* end() const { return values_.data() + rank_; }
  /// Product of all entries (1 for rank 0); throws InvalidArgument when it does not fit in 64 bits.
  std::int64_t product() const;
  /// "2x3x224x224".
  std::string to_string() const;
  /// Parses "2x3x224x224" (also ',' separated): decimal integers with an optional '-', no '+' and
  /// no spaces; throws InvalidArgument naming `what`, the text and the bad entry.
  static Dims parse(std::string_view text, std::string_view what = "dims");

  bool operator==(const Dims& other) const;

 private:
  std::array<std::int64_t, max_rank> values_{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& out, const Dims& dims);

/// Dense element strides of `dims` in `layout` (rank 1 and 2 are always row-major); throws
/// InvalidArgument when a stride does not fit in 64 bits.
Dims dense_strides(const Dims& dims, Layout layout);

/// A source of raw memory for one device. Device allocators (caching, CUDA) implement the same.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// At least `bytes` bytes, aligned to 64; throws Error(OutOfMemory) on failure.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Returns memory obtained from allocate() with the same size.
  virtual void deallocate(void* pointer, std::size_t bytes) noexcept = 0;
  /// The device the memory belongs to.
  virtual Device device() const = 0;
};

/// The process-wide 64-byte aligned host allocator.
Allocator& host_allocator();

/// Bytes plus who frees them. Shared between a tensor and its views.
class Storage {
 public:
  /// Allocates `bytes` through `allocator` (which must outlive the storage).
  Storage(Allocator& allocator, std::size_t bytes);
  /// Borrows user memory; nothing is freed.
  Storage(void* data, std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool owning() const { return allocator_ != nullptr; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
};

/// A typed, shaped, strided window on a Storage. Copying a Tensor copies the window, not the bytes.
class Tensor {
 public:
  /// An empty tensor (rank 0, no storage); data() is null.
  Tensor() = default;

  /// Allocates a dense tensor in `layout` on `allocator`'s device (contents uninitialised).
  /// Throws InvalidArgument for a negative size or more than 2^60 elements (sizes of 0 counted
  /// as 1, which also bounds the strides).
  static Tensor empty(const Dims& dims, DType dtype, Layout layout = Layout::channels_first,
                      Allocator& allocator = host_allocator());
  /// Like empty(), filled with zeros; on a device, through its backend (Tensor::fill).
  static Tensor zeros(const Dims& dims, DType dtype, Layout layout = Layout::channels_first,
                      Allocator& allocator = host_allocator());
  /// A non-owning view of user memory with explicit element strides. The memory must outlive
  /// every use of the view; nothing is copied. Throws InvalidArgument for dims as empty() does,
  /// for negative strides, and for a span (first element to last) of more than 2^60 elements.
  static Tensor view(void* data, const Dims& dims, DType dtype, const Dims& strides,
                     Device device = Device::cpu());
  /// A non-owning dense view of user memory in `layout`.
  static Tensor view(void* data, const Dims& dims, DType dtype,
                     Layout layout = Layout::channels_first, Device device = Device::cpu());

  /// A tensor over the same storage (kept alive by both) with dims `dims` of the same element
  /// count, dense row-major (channels_first): PyTorch's view() of a contiguous tensor, e.g. the
  /// N x C x H x W -> N x CHW of a flatten. Throws InvalidArgument when this tensor is not dense
  /// channels_first or the element counts differ.
  Tensor reshape(const Dims& dims) const;

  const Dims& dims() const { return dims_; }
  const Dims& strides() const { return strides_; }
  int rank() const { return dims_.rank(); }
  DType dtype() const { return dtype_; }
  Device device() const;
  /// Number of elements.
  std::int64_t numel() const { return dims_.product(); }
  /// First element; null for an empty tensor or a view of null memory.
  void* data() const;
  /// True when the tensor has no storage.
  bool is_null() const { return data() == nullptr; }
  /// True when this tensor holds memory dnnx allocated that no other Tensor (view, copy,
  /// reshape) shares: writing it changes nothing anyone else can read. False for views of user
  /// memory. Not thread-safe against another thread copying the same Tensor object.
  bool sole_owner() const;
  /// The dense layout the strides match, if any (rank <= 2: channels_first).
  std::optional<Layout> layout() const;
  /// True when the strides are the dense strides of `layout`.
  bool is_dense(Layout layout) const;
  /// Bytes spanned from the first to one past the last element (empty() and view() bound it to
  /// 2^60 elements, so it never overflows).
  std::size_t span_bytes() const;

  /// Host tensors only: every element converted to f32, in logical (row-major N,C,...) order.
  std::vector<float> to_f32() const;
  /// Host tensors only: writes `values` (logical row-major order, numel entries) converted to
  /// dtype().
  void copy_from_f32(std::span<const float> values);
  /// Sets every element to `value` converted to dtype() (round to nearest even). Host tensors of
  /// any strides; device tensors dense in some layout, filled on the device's backend stream
  /// after every op queued there, returning once done (as copy()). Throws Unsupported when no
  /// backend on that device exists (create a Context on it first).
  void fill(float value);

 private:
  std::shared_ptr<Storage> storage_;
  std::size_t offset_bytes_ = 0;
  Dims dims_;
  Dims strides_;
  DType dtype_ = DType::f32;
};

/// "f32[2x3x8x8 nchw]" style description for messages.
std::string describe(const Tensor& tensor);

/// Copies the elements of `src` into `dst`: host to host, host to device, device to host or device
/// to device. Both must have the same dims and dtype; host tensors may have any strides, device
/// tensors must be dense (channels_first or channels_last; two device tensors in the same layout).
/// Returns when the copy has finished and is ordered after every op queued before it on the
/// device's backend. Device memory needs a backend on that device (a Context on cuda:N) to exist;
/// otherwise throws Error(Unsupported). Bad arguments throw InvalidArgument, among them a dst whose
/// memory overlaps src's (judged on the bytes each spans from its first element to its last): no
/// memmove semantics. Copying a tensor onto itself (the same memory, dims and strides) is a no-op.
void copy(const Tensor& src, Tensor& dst);

}  // namespace dnnx
