#pragma once
// The bad-input tables of the layer ops' error tests (tests/ops/<op>_errors_test.cpp): one case,
// how a case is checked, and the context the calls run on.

#include <dnnx/dnnx.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::test {

/// One bad input: `call` must raise dnnx::Error of `kind` whose message (without the context
/// decorations) contains every entry of `needles`: the argument, the value received, what is
/// accepted. `backend`: the backend the call runs on; where it is not available (a build without
/// oneDNN, a machine without a GPU) the case is skipped, not failed.
struct BadCase {
  std::string name;
  std::function<void()> call;
  ErrorKind kind = ErrorKind::InvalidArgument;
  std::vector<std::string> needles;
  BackendKind backend = BackendKind::reference;
};

/// Appends to a table of cases: add(name, call, kind, needles).
class BadCaseAdder {
 public:
  explicit BadCaseAdder(std::vector<BadCase>& cases) : cases_(cases) {}
  void operator()(std::string name, std::function<void()> call, ErrorKind kind,
                  std::vector<std::string> needles) const;

 private:
  std::vector<BadCase>& cases_;
};

/// gtest prints a case by its name.
void PrintTo(const BadCase& bad,  // NOLINT(readability-identifier-naming): gtest's name
             std::ostream* out);

/// Skips the test (GTEST_SKIP) when bad.backend is not available; otherwise runs `bad.call` and
/// checks, as gtest expectations, that it raises bad.kind with every needle in
/// the message. An error the op layer raised (its context's op starts with `op`, e.g. "pool")
/// must also carry the desc's repro line, "dnnx profile <op> ...".
void expect_raises(const BadCase& bad, std::string_view op);

/// The name of a parameterized BadCase test: the case's name.
std::string bad_case_name(const ::testing::TestParamInfo<BadCase>& info);

/// Runs `body` and checks, as gtest expectations, that it throws dnnx::Error of `kind` whose full
/// text (what()) mentions every entry of `mentions`.
template <typename Body>
void expect_error(ErrorKind kind, const std::vector<std::string>& mentions, Body&& body) {
  try {
    body();
    ADD_FAILURE() << "expected " << to_string(kind) << ", nothing was thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    for (const std::string& mention : mentions)
      EXPECT_NE(std::string(error.what()).find(mention), std::string::npos)
          << "message does not mention '" << mention << "': " << error.what();
  }
}

/// A context on the reference backend with a memory-only choice cache (tests must not write the
/// user's cache file).
Context reference_context();

/// A call that lists `desc` after `edit` corrupted it, on the reference backend through the op
/// layer: `list` (e.g. dnnx::add_list) must validate the desc before any backend runs.
template <typename Desc, typename List>
std::function<void()> list_after(const Desc& desc, std::function<void(Desc&)> edit, List list) {
  return [desc, edit = std::move(edit), list] {
    Desc edited = desc;
    edit(edited);
    Context context = reference_context();
    list(context, edited, Direction::fwd);
  };
}

}  // namespace dnnx::test
