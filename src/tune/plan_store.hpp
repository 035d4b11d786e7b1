#pragma once
// Saved plans: a folder of files, one per plan, next to the persistent choice cache, that a
// backend whose plans are costly to build (the cudnn convolution's runtime-compiled engines)
// fills with the serialized plans of its chosen candidates, so that another process with the
// same cache loads them instead of compiling them again (Note [saved plans]).

#include <dnnx/algo.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dnnx::tune {

// Note [saved plans]
// A plan file holds one serialized plan (the backend's own text: cuDNN's JSON for an execution
// plan) under a key that names everything the plan depends on: the backend's identity (library
// version, device model and compute capability, driver), the op, desc, direction and candidate
// id. The file name is a hash of the key; the file repeats the key, so a hash collision, a file
// renamed or copied from another machine is never applied:
//
//   dnnx-plan 1\n
//   key <bytes>\n<key>\n
//   payload <bytes> <fnv-1a 64 of the payload, 16 hex digits>\n<payload>
//
// A file that does not parse, whose key is another's or whose checksum fails (truncated by a
// crash, edited) is removed and reported, never applied; so is one the backend then cannot load
// (a stale plan): the caller builds the plan again and may save it anew. Files are written to a
// temporary name in the folder and renamed into place, so readers see whole files only, and
// concurrent writers of one key leave one of their (equal) files. The folder holds nothing else
// of dnnx's: `dnnx cache` lists and clears it (summarize, clear).
class PlanStore {
 public:
  /// A store in `folder` (created on the first save); an empty folder stores nothing.
  explicit PlanStore(std::string folder) : folder_(std::move(folder)) {}

  const std::string& folder() const { return folder_; }
  bool enabled() const { return !folder_.empty(); }

  /// The file `key`'s plan is saved in.
  std::string path_of(std::string_view key) const;

  /// The payload saved under `key`; nullopt when there is none, or when the file is not a whole
  /// plan file of `key`: that file is then removed and `problem` (when given) says why, naming it.
  std::optional<std::string> load(std::string_view key, std::string* problem = nullptr) const;

  /// Saves `payload` under `key` (replacing any earlier file); false, with `problem` naming the
  /// path and the reason, when it cannot be written.
  bool save(std::string_view key, std::string_view payload, std::string* problem = nullptr) const;

  /// Removes `key`'s file; whether there was one.
  bool remove(std::string_view key) const;

  /// The plan file text of (key, payload), and its parse: the payload of a whole plan file of
  /// `key`, else nullopt with `problem` saying what is wrong.
  static std::string encode(std::string_view key, std::string_view payload);
  static std::optional<std::string> decode(std::string_view text, std::string_view key,
                                           std::string* problem = nullptr);

  struct Summary {
    std::size_t files = 0;  ///< plan files
    std::size_t bytes = 0;  ///< their total size
  };
  /// The plan files in `folder` (none when it does not exist).
  static Summary summarize(const std::string& folder);
  /// Removes every plan file in `folder` (and leftover temporary files); returns how many plan
  /// files there were. Other files are left alone.
  static std::size_t clear(const std::string& folder);

  /// The folder next to a choice-cache file: "<cache path>.plans"; empty for a cache without a
  /// file (mode off or no path).
  static std::string folder_for(const CacheFileOptions& cache);
  /// The folder backends save plans in: DNNX_PLAN_DIR when set ("off", "0" or "none": no
  /// folder, saving nothing), else folder_for(cache).
  static std::string folder_from_env(const CacheFileOptions& cache);

 private:
  std::string folder_;
};

}  // namespace dnnx::tune
