#include <dnnx/algo.hpp>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace dnnx {

struct ChoiceCache::Impl {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Choice>> entries;
  mutable std::atomic<std::uint64_t> hits{0};
  mutable std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> generation{0};
};

ChoiceCache::ChoiceCache() : impl_(std::make_unique<Impl>()) {}
ChoiceCache::~ChoiceCache() = default;

std::shared_ptr<ChoiceCache> ChoiceCache::global() {
  static const auto cache = std::make_shared<ChoiceCache>();
  return cache;
}

std::shared_ptr<const Choice> ChoiceCache::find(const std::string& key) const {
  std::shared_lock lock(impl_->mutex);
  const auto it = impl_->entries.find(key);
  if (it == impl_->entries.end()) {
    ++impl_->misses;
    return nullptr;
  }
  ++impl_->hits;
  return it->second;
}

void ChoiceCache::insert(const std::string& key, std::shared_ptr<const Choice> choice) {
  std::unique_lock lock(impl_->mutex);
  impl_->entries[key] = std::move(choice);
  ++impl_->generation;
}

void ChoiceCache::clear() {
  std::unique_lock lock(impl_->mutex);
  impl_->entries.clear();
  impl_->hits = 0;
  impl_->misses = 0;
  ++impl_->generation;
}

std::size_t ChoiceCache::size() const {
  std::shared_lock lock(impl_->mutex);
  return impl_->entries.size();
}

std::uint64_t ChoiceCache::hits() const { return impl_->hits; }
std::uint64_t ChoiceCache::misses() const { return impl_->misses; }
std::uint64_t ChoiceCache::generation() const { return impl_->generation; }

std::vector<std::pair<std::string, std::shared_ptr<const Choice>>> ChoiceCache::entries() const {
  std::shared_lock lock(impl_->mutex);
  return {impl_->entries.begin(), impl_->entries.end()};
}

}  // namespace dnnx
