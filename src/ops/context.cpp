#include <dnnx/context.hpp>
#include <dnnx/version.hpp>

#include "backends/reference/reference.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"
#include "ops/context_state.hpp"
#if DNNX_HAVE_ONEDNN
#include "backends/onednn/onednn.hpp"
#endif
#if DNNX_HAVE_CUDNN
#include "backends/cudnn/cudnn.hpp"
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <tuple>

namespace dnnx {
namespace detail {

ContextState::~ContextState() {
  if (workspace_ != nullptr) backend_->allocator().deallocate(workspace_, workspace_bytes_);
}

// Note [search workspace]
// The workspace is one buffer per backend instance that grows to the largest request and stays,
// so that calls never allocate. An exhaustive search times candidates whose workspace can be far
// larger than the one it picks (tens of GB for some convolution algorithms at ResNet-50's first
// layer), and a buffer grown for them would stay allocated for the rest of the process. So the
// timing runs ask through search_workspace(), which grows the same buffer without counting
// towards what calls need, and end_search() returns the buffer to the allocator when it is
// larger than the largest request of a call's plan; the next call allocates what it needs (from
// the allocator's cache on the cudnn backend).
Workspace ContextState::workspace(std::size_t bytes) {
  call_bytes_ = std::max(call_bytes_, bytes);
  return search_workspace(bytes);
}

void ContextState::end_search() {
  if (workspace_ != nullptr && workspace_bytes_ > call_bytes_) {
    backend_->allocator().deallocate(workspace_, workspace_bytes_);
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
}

Workspace ContextState::search_workspace(std::size_t bytes) {
  if (bytes > workspace_bytes_) {
    if (workspace_ != nullptr) {
      backend_->allocator().deallocate(workspace_, workspace_bytes_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    }
    workspace_ = backend_->allocator().allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return {workspace_, workspace_bytes_};
}

namespace {

std::unique_ptr<Backend> make_backend(BackendKind kind, int device, void* stream) {
  DNNX_CHECK_ARG(stream == nullptr || kind == BackendKind::cudnn,
                 "a CUDA stream was given for the ", to_string(kind),
                 " backend, which runs on the host; only cudnn accepts one");
  switch (kind) {
    case BackendKind::reference:
      DNNX_CHECK_ARG(device == 0, "the reference backend runs on the host: device must be 0, got ",
                     device);
      return reference::make_backend();
    case BackendKind::cpu:
#if DNNX_HAVE_ONEDNN
      DNNX_CHECK_ARG(device == 0, "the cpu backend runs on the host: device must be 0, got ",
                     device);
      return onednn::make_backend(device);
#else
      break;
#endif
    case BackendKind::cudnn:
#if DNNX_HAVE_CUDNN
      return cudnn::make_backend(device, stream);
#else
      break;
#endif
    case BackendKind::automatic: break;
  }
  std::string why;
  backend_available(kind, &why);
  raise(ErrorKind::Unsupported, cat("backend '", to_string(kind), "' is not available: ", why));
}

}  // namespace

std::shared_ptr<ContextState> shared_state(BackendKind backend, int device, void* stream) {
  // Never destroyed, nor is any state in it: Note [static destruction].
  struct States {
    std::mutex mutex;
    std::map<std::tuple<BackendKind, int, void*>, std::shared_ptr<ContextState>> by_key;
  };
  static auto* states = new States;
  std::lock_guard lock(states->mutex);
  auto& state = states->by_key[{backend, device, stream}];
  if (!state) state = std::make_shared<ContextState>(make_backend(backend, device, stream));
  return state;
}

}  // namespace detail

void stop_background_work() noexcept {
#if DNNX_HAVE_CUDNN
  cudnn::stop_background_builds();
#endif
}

bool backend_available(BackendKind kind, std::string* why) {
  auto say = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  switch (kind) {
    case BackendKind::reference:
    case BackendKind::automatic: return true;
    case BackendKind::cpu:
#if DNNX_HAVE_ONEDNN
      return onednn::available(why);
#else
      return say("dnnx was built without oneDNN (DNNX_WITH_ONEDNN=OFF or oneDNN 3.x not found)");
#endif
    case BackendKind::cudnn:
#if DNNX_HAVE_CUDNN
      return cudnn::available(why);
#else
      return say(
          "dnnx was built without the cudnn backend (DNNX_WITH_CUDNN=OFF or cuDNN not found)");
#endif
  }
  return say("unknown backend");
}

BackendKind resolve_backend(BackendKind kind) {
  if (kind != BackendKind::automatic) return kind;
  for (BackendKind candidate : {BackendKind::cudnn, BackendKind::cpu}) {
    if (backend_available(candidate)) return candidate;
  }
  return BackendKind::reference;
}

std::string backend_version(BackendKind kind) {
  switch (resolve_backend(kind)) {
    case BackendKind::reference: return "reference (dnnx " + std::string(version()) + ")";
    case BackendKind::cpu:
#if DNNX_HAVE_ONEDNN
      return onednn::version();
#else
      return "unavailable";
#endif
    case BackendKind::cudnn:
#if DNNX_HAVE_CUDNN
      return cudnn::version();
#else
      return "unavailable";
#endif
    case BackendKind::automatic: return "unavailable";
  }
  return "unavailable";
}

Context::Context(BackendKind backend, int device, TypeConfig type_config)
    : requested_(backend),
      backend_(resolve_backend(backend)),
      device_(device),
      type_config_(type_config),
      cache_(ChoiceCache::global()) {
  DNNX_CHECK_ARG(device >= 0, "device id must be >= 0, got ", device);
  std::string why;
  if (!backend_available(backend_, &why)) {
    std::vector<std::string> available;
    for (BackendKind kind : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
      if (backend_available(kind)) available.emplace_back(to_string(kind));
    }
    detail::raise(
        ErrorKind::Unsupported,
        detail::cat("backend '", to_string(backend), "' was requested but is not available: ", why,
                    "; available: ", detail::join(available, ", ")));
  }
  state_ = detail::shared_state(backend_, device_);
}

namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

template <typename Parse>
auto parse_env(const char* name, const char* value, Parse parse) {
  try {
    return parse(value);
  } catch (const Error& error) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", name, ": ", error.message()));
  }
}

}  // namespace

Context Context::from_env() {
  BackendKind backend = BackendKind::automatic;
  int device = 0;
  TypeConfig type_config = TypeConfig::float32;
  if (const char* value = env("DNNX_BACKEND"))
    backend = parse_env("DNNX_BACKEND", value, parse_backend);
  if (const char* value = env("DNNX_TYPE"))
    type_config = parse_env("DNNX_TYPE", value, parse_type_config);
  if (const char* value = env("DNNX_DEVICE")) {
    errno = 0;
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    DNNX_CHECK_ARG(errno == 0 && end != value && *end == '\0' && parsed >= 0 && parsed < 1 << 16,
                   "environment variable DNNX_DEVICE='", value,
                   "' is not a device ordinal (an integer >= 0)");
    device = static_cast<int>(parsed);
  }
  const BackendKind resolved = resolve_backend(backend);
  DNNX_CHECK_ARG(device == 0 || resolved == BackendKind::cudnn,
                 "environment variable DNNX_DEVICE=", device, " names a device, but backend '",
                 to_string(resolved), "' runs on the host (device must be 0)");
  Context context(backend, device, type_config);
  apply_tune_env(context.tune());
  return context;
}

Device Context::device() const {
  return backend_ == BackendKind::cudnn ? Device::cuda(device_) : Device::cpu();
}

Allocator& Context::allocator() const { return state_->backend().allocator(); }

Tensor Context::empty(const Dims& dims, Layout layout) const {
  return Tensor::empty(dims, dtype(), layout, allocator());
}

Context Context::with_stream(void* stream) const {
  DNNX_CHECK_ARG(stream == nullptr || backend_ == BackendKind::cudnn,
                 "with_stream: a CUDA stream was given for a context on the ", to_string(backend_),
                 " backend, which runs on the host; only cudnn contexts accept one");
  Context copy = *this;
  copy.stream_ = stream;
  copy.state_ = detail::shared_state(backend_, device_, stream);
  return copy;
}

void Context::set_choice_cache(std::shared_ptr<ChoiceCache> cache) {
  DNNX_CHECK_ARG(cache != nullptr, "set_choice_cache needs a cache, got null");
  cache_ = std::move(cache);
}

namespace detail {
ContextState& state_of(const Context& context) { return *context.state_; }
}  // namespace detail

std::string Context::fingerprint() const { return state_->backend().fingerprint(); }

void Context::synchronize() const {
  detail::ContextState& state = *state_;
  std::lock_guard lock(state.mutex());
  state.backend().synchronize();
}

std::string Context::describe() const {
  return detail::cat(to_string(backend_), " (", backend_version(backend_), ") device ", device_,
                     " type ", to_string(type_config_),
                     stream_ != nullptr ? " on the caller's stream" : "");
}

}  // namespace dnnx
