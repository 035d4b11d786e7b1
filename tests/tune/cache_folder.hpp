#pragma once
// What the tests of the persistent choice cache share: a fresh folder per test, file helpers, fake
// choices, and child processes (run as the unprivileged user when the tests run as root, which
// ignores file permissions).

#include <dnnx/algo.hpp>

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

namespace dnnx::testing_cache {

namespace fs = std::filesystem;

/// A fresh folder per test, removed afterwards.
class CacheFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    folder_ = fs::temp_directory_path() / ("dnnx-" + std::string(info->test_suite_name()) + "-" +
                                           std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    // Other users may enter it (the unprivileged child processes), not write it.
    fs::permissions(folder_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  }
  void TearDown() override { fs::remove_all(folder_); }

  std::string file(const std::string& name = "tune.json") const {
    return (folder_ / name).string();
  }

  CacheFileOptions options(CacheMode mode = CacheMode::readwrite, std::size_t max_entries = 4096) {
    return {mode, file(), max_entries};
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  /// The names in `folder`, sorted, joined by spaces.
  static std::string listing(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    std::string out;
    for (const std::string& name : names) out += (out.empty() ? "" : " ") + name;
    return out;
  }

  fs::path folder_;
};

/// A persisted-looking exhaustive choice of `id` for `key`, with `rows` rows of timings.
inline std::shared_ptr<Choice> fake_choice(const std::string& key, const std::string& id,
                                           std::int64_t measured_at, int rows = 0) {
  auto choice = std::make_shared<Choice>();
  choice->key = key;
  choice->op = "conv";
  choice->policy = AlgoPolicy::exhaustive();
  choice->algo.id = id;
  choice->algo.name = id;
  choice->algo.supported = true;
  choice->time_ms = 1.0;
  choice->backend = "fake";
  choice->fingerprint = "fake-fp";
  choice->environment = R"({"device":"test"})";
  choice->measured_at = measured_at;
  for (int i = 0; i < rows; ++i) {
    ProfileRow row;
    row.algo.id = id + ":variant" + std::to_string(i);
    row.status = CandidateStatus::ok;
    row.median_ms = 1.0 + i;
    row.min_ms = 0.5 + i;
    row.runs = 5;
    choice->timings.push_back(std::move(row));
  }
  return choice;
}

/// Who runs a child process.
enum class As { this_user, unprivileged };

/// How a child process ended: `failure` holds what its body reported.
struct ChildResult {
  enum class Outcome { passed, failed, no_unprivileged_user, timed_out } outcome;
  std::string failure;
};

/// Runs `body` in a child process, which returns "" on success or what went wrong. With
/// As::unprivileged and this process root, the child first becomes the user and group nobody
/// (65534), so file permissions apply. A child that runs past `seconds` (blocked on a FIFO, say)
/// is killed.
inline ChildResult in_child(const std::function<std::string()>& body, As as, int seconds = 30) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {ChildResult::Outcome::failed, "pipe() failed"};
  const pid_t pid = ::fork();
  if (pid < 0) return {ChildResult::Outcome::failed, "fork() failed"};
  if (pid == 0) {
    ::close(pipe_fds[0]);
    auto say = [&](const std::string& text) {
      if (!text.empty() && ::write(pipe_fds[1], text.data(), text.size()) < 0) ::_exit(3);
    };
    if (as == As::unprivileged && ::geteuid() == 0) {
      const gid_t nobody = 65534;
      if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
          ::setresuid(nobody, nobody, nobody) != 0) {
        say("cannot become uid/gid 65534");
        ::_exit(77);
      }
      if (::access(fs::temp_directory_path().c_str(), R_OK | X_OK) != 0) {
        say("uid 65534 cannot enter the temporary folder " + fs::temp_directory_path().string());
        ::_exit(77);
      }
    }
    std::string failure;
    try {
      failure = body();
    } catch (const std::exception& error) {
      failure = std::string("threw: ") + error.what();
    }
    say(failure);
    ::_exit(failure.empty() ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string failure;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd wait{pipe_fds[0], POLLIN, 0};
    if (::poll(&wait, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[512];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    failure.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out)
    return {ChildResult::Outcome::timed_out, "timed out after " + std::to_string(seconds) + " s"};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
    return {ChildResult::Outcome::no_unprivileged_user, failure};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {ChildResult::Outcome::passed, ""};
  return {ChildResult::Outcome::failed, failure.empty() ? "the child crashed" : failure};
}

/// Runs `body` in a child (see in_child) and fails the test with what it reported; skips the
/// test when the child could not become unprivileged.
#define DNNX_EXPECT_CHILD_PASSES(as, ...)                                                        \
  do {                                                                                           \
    const auto dnnx_child = ::dnnx::testing_cache::in_child(__VA_ARGS__, as);                    \
    if (dnnx_child.outcome == ::dnnx::testing_cache::ChildResult::Outcome::no_unprivileged_user) \
      GTEST_SKIP() << "running as root, and " << dnnx_child.failure                              \
                   << ": root ignores file permissions, so the read-only paths are not reached"; \
    EXPECT_EQ(dnnx_child.outcome, ::dnnx::testing_cache::ChildResult::Outcome::passed)           \
        << dnnx_child.failure;                                                                   \
  } while (false)

}  // namespace dnnx::testing_cache
