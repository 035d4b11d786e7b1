#pragma once
// The expected-unsupported lists of the parity tests (STYLE.md "Tests": "Unsupported" is a
// counted skip checked against an expected list, never a pass): a listed candidate may be
// unsupported only for a reason its op's list names, so a backend cannot quietly stop supporting
// a case.

#include <dnnx/algo.hpp>

#include <regex>
#include <vector>

namespace dnnx::test {

/// One reason a listed candidate may be unsupported: its id matches `id`, its reason matches
/// `reason`, and `applies` holds for the (desc, direction) it was listed for.
template <typename Desc>
struct ExpectedReason {
  const char* category;
  std::regex id;
  std::regex reason;
  bool (*applies)(const Desc&, Direction);
};

/// The category of the first of `reasons` that explains why `algo` is unsupported for
/// (desc, direction); nullptr when none does.
template <typename Desc>
const char* unsupported_category(const std::vector<ExpectedReason<Desc>>& reasons, const Desc& desc,
                                 Direction direction, const AlgoInfo& algo) {
  for (const ExpectedReason<Desc>& reason : reasons) {
    if (std::regex_search(algo.id, reason.id) && std::regex_search(algo.reason, reason.reason) &&
        reason.applies(desc, direction)) {
      return reason.category;
    }
  }
  return nullptr;
}

}  // namespace dnnx::test
