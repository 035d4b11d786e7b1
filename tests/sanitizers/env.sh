# Sanitizer options for running the tests of a DNNX_SANITIZE build; sourced by scripts/test.sh for
# its sanitizer stage (building too, where -DDNNX_TESTS_PER_CASE=ON has gtest_discover_tests run
# every test binary at build time to list its cases).
# By hand:  . tests/sanitizers/env.sh && ctest --test-dir build-asan -L unit
#
# Any report ends the program with SIGABRT (abort_on_error), so a report can never look like an
# expected exit status: the CLI tests expect 1 or 2 for bad input, ASan's default exit status.
#   detect_leaks                 LeakSanitizer at exit (the library's process-wide objects are
#                                reachable through static pointers: Note [static destruction])
#   check_initialization_order,  a static initialised from another translation unit's static that
#   strict_init_order            is not yet initialised
#   detect_stack_use_after_return  pointers to a returned function's locals (fake stack frames)
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:print_stacktrace=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:report_error_type=1
