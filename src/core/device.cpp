#include "core/device.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace dnnx {
namespace detail {
namespace {

// Never destroyed: runtimes unregister from the destructors of process-wide backends, which may
// run after function-local statics created later than them are gone.
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

// Every runtime of a device (one per backend instance: the default one and one per caller's
// stream, Context::with_stream), in creation order.
std::map<int, std::vector<DeviceRuntime*>>& registry() {
  static auto* runtimes = new std::map<int, std::vector<DeviceRuntime*>>;
  return *runtimes;
}

}  // namespace

void register_device_runtime(Device device, DeviceRuntime& runtime) {
  DNNX_ASSERT(device.kind == Device::Kind::cuda, "a runtime is registered for a device, got ",
              to_string(device));
  std::lock_guard lock(registry_mutex());
  std::vector<DeviceRuntime*>& runtimes = registry()[device.index];
  DNNX_ASSERT(std::find(runtimes.begin(), runtimes.end(), &runtime) == runtimes.end(),
              "a runtime registered twice for ", to_string(device));
  runtimes.push_back(&runtime);
}

void unregister_device_runtime(Device device, const DeviceRuntime& runtime) noexcept {
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(device.index);
  if (it == registry().end()) return;
  std::erase(it->second, &runtime);
  if (it->second.empty()) registry().erase(it);
}

DeviceRuntime* device_runtime(Device device) {
  if (device.kind != Device::Kind::cuda) return nullptr;
  DeviceRuntime* first = nullptr;
  bool several = false;
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(device.index);
    if (it == registry().end()) return nullptr;
    first = it->second.front();
    several = it->second.size() > 1;
  }
  // A copy runs after everything dnnx queued on the device: the first runtime's copy waits for
  // its own stream; work on callers' streams (Context::with_stream) is waited for device-wide,
  // which stays safe after a caller has destroyed such a stream.
  if (several) first->synchronize_device();
  return first;
}

}  // namespace detail

namespace {

using detail::DeviceRuntime;

// Copies element by element between two host tensors of equal dims and dtype, any strides.
void host_copy(const Tensor& src, Tensor& dst) {
  const Dims& dims = src.dims();
  const int rank = dims.rank();
  const auto element = static_cast<std::int64_t>(size_of(src.dtype()));
  const char* from = static_cast<const char*>(src.data());
  char* to = static_cast<char*>(dst.data());
  std::array<std::int64_t, Dims::max_rank> index{};
  std::int64_t src_offset = 0;
  std::int64_t dst_offset = 0;
  while (true) {
    std::memcpy(to + dst_offset * element, from + src_offset * element,
                static_cast<std::size_t>(element));
    int d = rank - 1;
    for (; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      if (++index[i] < dims[d]) {
        src_offset += src.strides()[d];
        dst_offset += dst.strides()[d];
        break;
      }
      src_offset -= src.strides()[d] * (dims[d] - 1);
      dst_offset -= dst.strides()[d] * (dims[d] - 1);
      index[i] = 0;
    }
    if (d < 0) return;
  }
}

DeviceRuntime& runtime_of(const Tensor& tensor, const char* role) {
  DeviceRuntime* runtime = detail::device_runtime(tensor.device());
  if (runtime == nullptr) {
    detail::raise(ErrorKind::Unsupported,
                  detail::cat("copy: ", role, " is on ", to_string(tensor.device()),
                              ", which has no backend in this process; create a Context on that "
                              "device (BackendKind::cudnn, device ",
                              tensor.device().index, ") before copying to or from it"));
  }
  return *runtime;
}

Layout device_layout(const Tensor& tensor, const char* role) {
  const auto layout = tensor.layout();
  DNNX_CHECK_ARG(layout.has_value(), "copy: ", role, " is on ", to_string(tensor.device()),
                 " with strides ", tensor.strides(),
                 "; device tensors must be dense channels_first or channels_last");
  return *layout;
}

std::size_t dense_bytes(const Tensor& tensor) {
  return static_cast<std::size_t>(tensor.numel()) * size_of(tensor.dtype());
}

// Note [overlapping copy]
// copy() writes dst element by element (host) or as one block (device), so if dst's memory
// overlapped src's, some elements would be read after a write landed on them and the result would
// depend on the order of the copy. Such a copy is an InvalidArgument rather than a memmove: a
// strided memmove would need a staging buffer, and an overlapping copy is almost always a mistake.
// The one exception is a tensor copied onto itself (the same memory, dims and strides), which
// changes nothing and returns at once. Overlap is judged on the byte spans (first element to one
// past the last) on the same device, as the ops judge it, so two interleaved views whose spans
// cross are rejected even when they share no element.
bool same_window(const Tensor& a, const Tensor& b) {
  if (a.data() != b.data() || a.device() != b.device()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (a.dims()[i] != 1 && a.strides()[i] != b.strides()[i]) return false;
  }
  return true;
}

bool spans_overlap(const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) return false;
  const char* a0 = static_cast<const char*>(a.data());
  const char* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.span_bytes() && b0 < a0 + a.span_bytes();
}

}  // namespace

void copy(const Tensor& src, Tensor& dst) {
  DNNX_CHECK_ARG(src.dims() == dst.dims(), "copy: src dims ", src.dims(), " differ from dst dims ",
                 dst.dims(), "; both must be equal");
  DNNX_CHECK_ARG(src.dtype() == dst.dtype(), "copy: src dtype ", to_string(src.dtype()),
                 " differs from dst dtype ", to_string(dst.dtype()),
                 "; copy does not convert (both must be equal)");
  if (src.numel() == 0) return;
  DNNX_CHECK_ARG(src.data() != nullptr, "copy: src has null data");
  DNNX_CHECK_ARG(dst.data() != nullptr, "copy: dst has null data");
  // Note [overlapping copy].
  if (same_window(src, dst)) return;
  DNNX_CHECK_ARG(!spans_overlap(src, dst), "copy: dst ", describe(dst), " at ", dst.data(),
                 " overlaps src ", describe(src), " at ", src.data(),
                 " in memory; copy needs separate buffers (or dst identical to src, a no-op)");
  const bool src_host = src.device().kind == Device::Kind::cpu;
  const bool dst_host = dst.device().kind == Device::Kind::cpu;
  using Kind = DeviceRuntime::CopyKind;

  if (src_host && dst_host) {
    host_copy(src, dst);
    return;
  }
  if (src_host) {
    const Layout layout = device_layout(dst, "dst");
    DeviceRuntime& runtime = runtime_of(dst, "dst");
    if (src.is_dense(layout)) {
      runtime.memcpy(dst.data(), src.data(), dense_bytes(dst), Kind::host_to_device);
      return;
    }
    // A strided host tensor is packed first: the device side only takes dense bytes.
    Tensor packed = Tensor::empty(src.dims(), src.dtype(), layout);
    host_copy(src, packed);
    runtime.memcpy(dst.data(), packed.data(), dense_bytes(dst), Kind::host_to_device);
    return;
  }
  if (dst_host) {
    const Layout layout = device_layout(src, "src");
    DeviceRuntime& runtime = runtime_of(src, "src");
    if (dst.is_dense(layout)) {
      runtime.memcpy(dst.data(), src.data(), dense_bytes(src), Kind::device_to_host);
      return;
    }
    Tensor packed = Tensor::empty(src.dims(), src.dtype(), layout);
    runtime.memcpy(packed.data(), src.data(), dense_bytes(src), Kind::device_to_host);
    host_copy(packed, dst);
    return;
  }
  const Layout src_layout = device_layout(src, "src");
  const Layout dst_layout = device_layout(dst, "dst");
  if (src.device() == dst.device()) {
    if (src_layout != dst_layout) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("copy: device-to-device copy from ", to_string(src_layout), " to ",
                                to_string(dst_layout),
                                " would need a transpose; copy through a host tensor instead"));
    }
    runtime_of(src, "src").memcpy(dst.data(), src.data(), dense_bytes(src), Kind::device_to_device);
    return;
  }
  // Between two devices: through the host, in the destination's layout.
  Tensor staged = Tensor::empty(src.dims(), src.dtype(), src_layout);
  runtime_of(src, "src").memcpy(staged.data(), src.data(), dense_bytes(src), Kind::device_to_host);
  Tensor packed = staged;
  if (src_layout != dst_layout) {
    packed = Tensor::empty(src.dims(), src.dtype(), dst_layout);
    host_copy(staged, packed);
  }
  runtime_of(dst, "dst").memcpy(dst.data(), packed.data(), dense_bytes(dst), Kind::host_to_device);
}

}  // namespace dnnx
