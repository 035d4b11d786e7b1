// A program whose own statics hold dnnx objects: tensors, contexts on every available backend, a
// convolution layer, and a context whose choice cache has a file. The statics that main() fills are
// constructed before the library's own statics and so destroyed after them, which is the order Note
// [static destruction] (src/ops/context_state.hpp) makes safe; one of them even runs an op from its
// destructor. The program must exit with status 0 (in the sanitizer build: with no report), and the
// choice cache, held until the very end, must still write its file when it is destroyed.
//
//   static_lifetime_test FOLDER   (a scratch folder of its own is made in FOLDER and removed)

#include <dnnx/dnnx.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace dnnx;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "static_lifetime_test: FAILED: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// 0 when `path` does not exist.
ino_t inode_of(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

const ConvDesc& conv_desc() {
  static const ConvDesc desc = ConvDesc::from_shapes({1, 2, 5, 5}, {3, 2, 3, 3}, {1}, {1});
  return desc;
}

// `host` itself on a host context; a copy in the context's device memory otherwise.
Tensor on_device(Context& context, const Tensor& host) {
  if (context.device() == Device::cpu()) return host;
  Tensor tensor =
      Tensor::empty(host.dims(), host.dtype(), Layout::channels_first, context.allocator());
  copy(host, tensor);
  return tensor;
}

// One forward convolution on tensors from the context's allocator.
void run_conv(Context& context) {
  const ConvDesc& desc = conv_desc();
  Tensor src = Tensor::empty(desc.src_dims(), desc.dtype);
  Tensor weights = Tensor::empty(desc.weights_dims(), desc.dtype);
  src.fill(0.5F);
  weights.fill(0.25F);
  Tensor dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout, context.allocator());
  conv_fwd(context, desc, on_device(context, src), on_device(context, weights), dst);
  Tensor result = Tensor::empty(desc.dst_dims(), desc.dtype);
  copy(dst, result);
  // Every output sees at least the 2x2x2 corner of the kernel: 8 x 0.5 x 0.25.
  for (const float value : result.to_f32()) {
    if (!(value >= 1.0F))
      fail("conv on " + context.describe() + " computed " + std::to_string(value));
  }
}

// Constructed first, destroyed last: by then the cache below has been destroyed, and its
// destructor must have written the file (a new file replaces the old one: another inode).
struct CacheFileCheck {
  std::string folder;
  std::string path;
  ino_t inode_before_exit = 0;
  ~CacheFileCheck() {
    if (path.empty()) return;
    const ino_t now = inode_of(path);
    std::error_code ignored;
    fs::remove_all(folder, ignored);
    if (now == 0 || now == inode_before_exit)
      fail("the choice cache of a static Context did not write " + path + " when destroyed");
  }
};
CacheFileCheck cache_file_check;

// Empty until main() fills them. The tensors are destroyed after the contexts whose allocators
// they came from.
std::vector<Tensor> tensors;            // one from each context's allocator, one from the host's
std::optional<Context> cached_context;  // its choice cache has a last-use time to write
std::vector<Context> contexts;          // one per available backend
std::optional<Convolution> layer;

// Initialised before main(), so this is the library's first use of the host allocator: the
// opposite order, the allocator constructed first and destroyed after.
Tensor early = Tensor::zeros({2, 3}, DType::f32);

// Destroyed first of this file's statics but after every static the library made in main():
// tensors are allocated, copied and freed, and an op runs, through what outlives them.
struct UseAtExit {
  ~UseAtExit() {
    Tensor a = Tensor::zeros({4, 4}, DType::f32);
    Tensor b = Tensor::empty({4, 4}, DType::f32);
    copy(a, b);
    if (cached_context) run_conv(*cached_context);
  }
};
UseAtExit use_at_exit;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) fail("usage: static_lifetime_test FOLDER");
  try {
    const fs::path folder = fs::path(argv[1]) / ("static-lifetime-" + std::to_string(::getpid()));
    fs::remove_all(folder);
    fs::create_directories(folder);
    const std::string path = (folder / "tune.json").string();
    const CacheFileOptions options{CacheMode::readwrite, path, 64};
    {
      // The heuristic choice goes to the file ...
      Context writer(BackendKind::reference);
      writer.set_choice_cache(std::make_shared<ChoiceCache>(options));
      run_conv(writer);
    }
    // ... and answers this context's lookup, which leaves a last-use time to be written when its
    // cache is destroyed.
    cached_context.emplace(BackendKind::reference);
    auto cache = std::make_shared<ChoiceCache>(options);
    cached_context->set_choice_cache(cache);
    run_conv(*cached_context);
    if (cache->file_stats().applied == 0) fail("the cache file did not answer the second lookup");
    cache_file_check.folder = folder.string();
    cache_file_check.path = path;
    cache_file_check.inode_before_exit = inode_of(path);
    if (cache_file_check.inode_before_exit == 0) fail("the choice cache wrote no file " + path);

    for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
      if (!backend_available(kind)) continue;
      contexts.emplace_back(kind);
      run_conv(contexts.back());
      tensors.push_back(
          Tensor::empty({3, 5}, DType::f32, Layout::channels_first, contexts.back().allocator()));
    }
    tensors.push_back(Tensor::zeros({7}, DType::f32));
    layer.emplace(contexts.back());
    const ConvDesc& desc = conv_desc();
    const Tensor src = on_device(layer->context(), Tensor::zeros(desc.src_dims(), desc.dtype));
    const Tensor weights =
        on_device(layer->context(), Tensor::zeros(desc.weights_dims(), desc.dtype));
    Tensor dst =
        Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout, layer->context().allocator());
    layer->fwd(desc, src, weights, dst);
  } catch (const std::exception& error) {
    fail(error.what());
  }
  return 0;
}
