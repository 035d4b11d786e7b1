#include <dnnx/tensor.hpp>

#include "core/check.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>

namespace dnnx {

// ---- Dims -------------------------------------------------------------------------------------

Dims::Dims(std::initializer_list<std::int64_t> values)
    : Dims(std::span<const std::int64_t>(values.begin(), values.size())) {}

Dims::Dims(std::span<const std::int64_t> values) {
  DNNX_CHECK_ARG(values.size() <= static_cast<std::size_t>(max_rank), "rank ", values.size(),
                 " exceeds the maximum rank ", max_rank);
  rank_ = static_cast<int>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) values_[i] = values[i];
}

std::int64_t Dims::product() const {
  std::int64_t p = 1;
  for (const std::int64_t v : *this) {
    const auto next = detail::checked_mul(p, v);
    DNNX_CHECK_ARG(next.has_value(), "the product of the entries of ", *this,
                   " does not fit in 64 bits");
    p = *next;
  }
  return p;
}

std::string Dims::to_string() const { return detail::join(*this, "x"); }

Dims Dims::parse(std::string_view text, std::string_view what) {
  const char separator = text.find(',') != std::string_view::npos ? ',' : 'x';
  std::vector<std::int64_t> values;
  for (const std::string& part : detail::split(text, separator)) {
    // from_chars takes an optional '-' and digits only: no '+', no spaces, nothing after.
    std::int64_t value = 0;
    const char* end = part.data() + part.size();
    const auto [next, error] = std::from_chars(part.data(), end, value);
    if (!part.empty() && next == end && error == std::errc::result_out_of_range) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat(what, " '", text, "' is malformed: entry '", part,
                                "' does not fit in 64 bits"));
    }
    if (part.empty() || error != std::errc() || next != end) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat(what, " '", text, "' is malformed: entry '", part,
                                "' is not a decimal integer; expected integers (digits, no sign "
                                "or spaces) separated by 'x' or ',' (e.g. 32x64x56x56)"));
    }
    values.push_back(value);
  }
  DNNX_CHECK_ARG(values.size() <= static_cast<std::size_t>(max_rank), what, " '", text, "' has ",
                 values.size(), " entries; at most ", max_rank, " are accepted");
  return Dims(std::span<const std::int64_t>(values));
}

bool Dims::operator==(const Dims& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if ((*this)[i] != other[i]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& out, const Dims& dims) { return out << dims.to_string(); }

Dims dense_strides(const Dims& dims, Layout layout) {
  const int rank = dims.rank();
  Dims strides = dims;
  if (rank == 0) return strides;
  // Order of dims from outermost to innermost.
  std::array<int, Dims::max_rank> order{};
  for (int i = 0; i < rank; ++i) order[static_cast<std::size_t>(i)] = i;
  if (layout == Layout::channels_last && rank >= 3) {
    // N, spatial..., C
    for (int i = 1; i < rank - 1; ++i) order[static_cast<std::size_t>(i)] = i + 1;
    order[static_cast<std::size_t>(rank - 1)] = 1;
  }
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    const int d = order[static_cast<std::size_t>(i)];
    strides[d] = stride;
    if (i == 0) break;
    const auto next = detail::checked_mul(stride, std::max<std::int64_t>(dims[d], 1));
    DNNX_CHECK_ARG(next.has_value(), "dense strides of dims ", dims, " do not fit in 64 bits");
    stride = *next;
  }
  return strides;
}

// ---- Allocation -------------------------------------------------------------------------------

namespace {

class HostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; near SIZE_MAX the rounding would wrap to a
    // small size, so such a request fails as what it is, out of memory.
    constexpr std::size_t alignment = 64;
    const std::size_t wanted = std::max<std::size_t>(bytes, 1);
    void* p = wanted > std::numeric_limits<std::size_t>::max() - (alignment - 1)
                  ? nullptr
                  : std::aligned_alloc(alignment, (wanted + alignment - 1) / alignment * alignment);
    if (p == nullptr) {
      detail::raise(ErrorKind::OutOfMemory,
                    detail::cat("host allocation of ", bytes, " bytes (",
                                detail::format_bytes(static_cast<double>(bytes)), ") failed"));
    }
    return p;
  }
  void deallocate(void* pointer, std::size_t) noexcept override { std::free(pointer); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& host_allocator() {
  static auto* allocator = new HostAllocator;  // never destroyed: Note [static destruction]
  return *allocator;
}

Storage::Storage(Allocator& allocator, std::size_t bytes)
    : data_(allocator.allocate(bytes)),
      bytes_(bytes),
      device_(allocator.device()),
      allocator_(&allocator) {}

Storage::Storage(void* data, std::size_t bytes, Device device)
    : data_(data), bytes_(bytes), device_(device) {}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_);
}

// ---- Tensor -----------------------------------------------------------------------------------

namespace {

// Elements from the first to the last one of a view of `dims` with `strides` (0 when empty), or
// nullopt when that is more than max_elements (Note [size limits] in core/check.hpp).
std::optional<std::int64_t> span_elements(const Dims& dims, const Dims& strides) {
  std::int64_t last = 0;
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] == 0) return 0;
  }
  for (int i = 0; i < dims.rank(); ++i) {
    const auto step = detail::checked_mul(dims[i] - 1, strides[i]);
    const auto next = step ? detail::checked_add(last, *step) : std::nullopt;
    if (!next || *next >= detail::max_elements) return std::nullopt;
    last = *next;
  }
  return last + 1;
}

// Calls f(offset, count, stride) for every row of the innermost dim in logical row-major order:
// the row's elements are at element offsets offset, offset + stride, ... (count of them). A
// rank-0 tensor is one row of one element. Rows rather than elements, so that the callers'
// loops run over a row without a call per element (the host conversions of the reference
// backend and of the tests go through here, in unoptimised sanitizer builds too).
template <typename F>
void for_each_row(const Dims& dims, const Dims& strides, F&& f) {
  const int rank = dims.rank();
  if (dims.product() == 0) return;
  if (rank == 0) {
    f(std::int64_t{0}, std::int64_t{1}, std::int64_t{1});
    return;
  }
  const std::int64_t count = dims[rank - 1];
  const std::int64_t stride = strides[rank - 1];
  std::array<std::int64_t, Dims::max_rank> index{};
  std::int64_t offset = 0;
  while (true) {
    f(offset, count, stride);
    int d = rank - 2;
    for (; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      if (++index[i] < dims[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (dims[d] - 1);
      index[i] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace

Tensor Tensor::empty(const Dims& dims, DType dtype, Layout layout, Allocator& allocator) {
  detail::checked_count(dims, "tensor dims");
  Tensor t;
  t.dims_ = dims;
  t.strides_ = dense_strides(dims, layout);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(allocator,
                                         static_cast<std::size_t>(dims.product()) * size_of(dtype));
  return t;
}

Tensor Tensor::zeros(const Dims& dims, DType dtype, Layout layout, Allocator& allocator) {
  Tensor t = empty(dims, dtype, layout, allocator);
  t.fill(0.0f);
  return t;
}

bool Tensor::sole_owner() const {
  return storage_ != nullptr && storage_->owning() && storage_.use_count() == 1;
}

Tensor Tensor::view(void* data, const Dims& dims, DType dtype, const Dims& strides, Device device) {
  detail::checked_count(dims, "view dims");
  DNNX_CHECK_ARG(strides.rank() == dims.rank(), "view strides ", strides, " have rank ",
                 strides.rank(), " but dims ", dims, " have rank ", dims.rank());
  for (int i = 0; i < strides.rank(); ++i) {
    DNNX_CHECK_ARG(strides[i] >= 0, "view strides ", strides, " have a negative stride ",
                   strides[i], " at position ", i);
  }
  DNNX_CHECK_ARG(span_elements(dims, strides).has_value(), "a view of dims ", dims,
                 " with strides ", strides,
                 " spans more elements than can be addressed (from the first element to the last "
                 "must be at most 2^60 elements)");
  Tensor t;
  t.dims_ = dims;
  t.strides_ = strides;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(data, t.span_bytes(), device);
  return t;
}

Tensor Tensor::view(void* data, const Dims& dims, DType dtype, Layout layout, Device device) {
  detail::checked_count(dims, "view dims");
  return view(data, dims, dtype, dense_strides(dims, layout), device);
}

Tensor Tensor::reshape(const Dims& dims) const {
  detail::checked_count(dims, "reshape dims");
  DNNX_CHECK_ARG(is_dense(Layout::channels_first),
                 "reshape needs a dense channels_first (row-major) ", "tensor; got dims ", dims_,
                 " strides ", strides_);
  DNNX_CHECK_ARG(dims.product() == numel(), "reshape dims ", dims, " hold ", dims.product(),
                 " elements but the tensor ", dims_, " holds ", numel());
  Tensor t = *this;
  t.dims_ = dims;
  t.strides_ = dense_strides(dims, Layout::channels_first);
  return t;
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

void* Tensor::data() const {
  if (!storage_ || storage_->data() == nullptr) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

std::optional<Layout> Tensor::layout() const {
  if (is_dense(Layout::channels_first)) return Layout::channels_first;
  if (is_dense(Layout::channels_last)) return Layout::channels_last;
  return std::nullopt;
}

bool Tensor::is_dense(Layout layout) const {
  const Dims expected = dense_strides(dims_, layout);
  for (int i = 0; i < dims_.rank(); ++i) {
    // A size-1 dimension's stride never matters.
    if (dims_[i] != 1 && strides_[i] != expected[i]) return false;
  }
  return true;
}

std::size_t Tensor::span_bytes() const {
  // empty() and view() bound the span (Note [size limits] in core/check.hpp).
  const auto elements = span_elements(dims_, strides_);
  DNNX_ASSERT(elements.has_value(), "tensor dims ", dims_, " strides ", strides_);
  return static_cast<std::size_t>(*elements) * size_of(dtype_);
}

namespace {

void require_host(const Tensor& t, std::string_view what) {
  DNNX_CHECK_ARG(t.device().kind == Device::Kind::cpu, what, " needs a host tensor, got one on ",
                 to_string(t.device()));
  DNNX_CHECK_ARG(t.numel() == 0 || t.data() != nullptr, what, " on a tensor with null data");
}

}  // namespace

std::vector<float> Tensor::to_f32() const {
  require_host(*this, "Tensor::to_f32");
  std::vector<float> out(static_cast<std::size_t>(numel()));
  const char* base = static_cast<const char*>(data());
  const auto element = static_cast<std::int64_t>(size_of(dtype_));
  float* next = out.data();
  for_each_row(dims_, strides_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
    const char* p = base + offset * element;
    const std::int64_t step = stride * element;
    if (dtype_ == DType::f32 && stride == 1) {
      std::memcpy(next, p, static_cast<std::size_t>(count) * sizeof(float));
    } else {
      for (std::int64_t i = 0; i < count; ++i) next[i] = detail::load_f32(p + i * step, dtype_);
    }
    next += count;
  });
  return out;
}

void Tensor::copy_from_f32(std::span<const float> values) {
  require_host(*this, "Tensor::copy_from_f32");
  DNNX_CHECK_ARG(values.size() == static_cast<std::size_t>(numel()), "Tensor::copy_from_f32 got ",
                 values.size(), " values for a tensor of ", numel(), " elements (dims ", dims_,
                 ")");
  char* base = static_cast<char*>(data());
  const auto element = static_cast<std::int64_t>(size_of(dtype_));
  const float* next = values.data();
  for_each_row(dims_, strides_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
    char* p = base + offset * element;
    const std::int64_t step = stride * element;
    if (dtype_ == DType::f32 && stride == 1) {
      // memmove: `values` may be this tensor's own data.
      std::memmove(p, next, static_cast<std::size_t>(count) * sizeof(float));
    } else {
      for (std::int64_t i = 0; i < count; ++i) detail::store_f32(p + i * step, dtype_, next[i]);
    }
    next += count;
  });
}

namespace {

// The bits of one element of `dtype` holding `value`, converted as the host path converts it
// (detail::store_f32).
std::uint64_t element_bits(DType dtype, float value) {
  switch (dtype) {
    case DType::f32: {
      std::uint32_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      return bits;
    }
    case DType::f16: return detail::float_to_half(value);
    case DType::bf16: return detail::float_to_bf16(value);

    case DType::i32: {
      std::int32_t i = 0;
      detail::store_f32(&i, DType::i32, value);
      return static_cast<std::uint32_t>(i);
    }
    case DType::i64: {
      std::int64_t i = 0;
      detail::store_f32(&i, DType::i64, value);
      return static_cast<std::uint64_t>(i);
    }
  }
  return 0;
}

// Tensor::fill of a device tensor: one pattern fill on the device's backend stream.
void device_fill(const Tensor& tensor, float value) {
  DNNX_CHECK_ARG(tensor.layout().has_value(),
                 "Tensor::fill of a device tensor needs a dense one "
                 "(channels_first or channels_last), got ",
                 describe(tensor));
  if (tensor.numel() == 0) return;
  DNNX_CHECK_ARG(tensor.data() != nullptr, "Tensor::fill on a tensor with null data");
  detail::DeviceRuntime* runtime = detail::device_runtime(tensor.device());
  if (runtime == nullptr) {
    detail::raise(ErrorKind::Unsupported,
                  detail::cat("Tensor::fill: the tensor is on ", to_string(tensor.device()),
                              ", which has no backend in this process; create a Context on that "
                              "device (BackendKind::cudnn, device ",
                              tensor.device().index, ") first"));
  }
  runtime->fill(tensor.data(), static_cast<std::size_t>(tensor.numel()), size_of(tensor.dtype()),
                element_bits(tensor.dtype(), value));
}

}  // namespace

void Tensor::fill(float value) {
  if (device().kind != Device::Kind::cpu) {
    device_fill(*this, value);
    return;
  }
  require_host(*this, "Tensor::fill");
  char* base = static_cast<char*>(data());
  const auto element = static_cast<std::int64_t>(size_of(dtype_));
  for_each_row(dims_, strides_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
    char* p = base + offset * element;
    const std::int64_t step = stride * element;
    for (std::int64_t i = 0; i < count; ++i) detail::store_f32(p + i * step, dtype_, value);
  });
}

std::string describe(const Tensor& tensor) {
  const auto layout = tensor.layout();
  return detail::cat(
      to_string(tensor.dtype()), "[", tensor.dims(), " ",
      layout ? std::string(to_string(*layout)) : "strides " + tensor.strides().to_string(),
      tensor.device().kind == Device::Kind::cpu ? "" : " " + to_string(tensor.device()), "]");
}

}  // namespace dnnx
