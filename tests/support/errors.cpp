#include "support/errors.hpp"

#include <memory>

namespace dnnx::test {

void BadCaseAdder::operator()(std::string name, std::function<void()> call, ErrorKind kind,
                              std::vector<std::string> needles) const {
  cases_.push_back({std::move(name), std::move(call), kind, std::move(needles)});
}

void PrintTo(const BadCase& bad, std::ostream* out) { *out << bad.name; }

void expect_raises(const BadCase& bad, std::string_view op) {
  if (std::string why; !backend_available(bad.backend, &why)) {
    GTEST_SKIP() << bad.name << " needs backend " << to_string(bad.backend) << ": " << why;
  }
  try {
    bad.call();
    ADD_FAILURE() << bad.name << ": expected " << to_string(bad.kind) << ", nothing was thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), bad.kind) << bad.name << ": " << error.what();
    for (const std::string& needle : bad.needles) {
      EXPECT_NE(error.message().find(needle), std::string::npos)
          << bad.name << ": message lacks '" << needle << "': " << error.message();
    }
    if (error.context().op.starts_with(op)) {
      EXPECT_NE(error.context().repro.find("dnnx profile " + std::string(op)), std::string::npos)
          << bad.name << ": " << error.what();
    }
  }
}

std::string bad_case_name(const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; }

Context reference_context() {
  Context context(BackendKind::reference);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

}  // namespace dnnx::test
