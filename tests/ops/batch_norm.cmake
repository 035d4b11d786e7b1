# Batch-norm tests (included from tests/CMakeLists.txt; paths through CMAKE_CURRENT_LIST_DIR):
# the case table and shared helpers, unit tests (desc, reference vs finite differences, running
# statistics, bad inputs, policies), parity of every cpu candidate with the reference, the
# PyTorch oracle, the CLI, and the cudnn backend on a GPU.
set(_bnorm_dir ${CMAKE_CURRENT_LIST_DIR})

add_library(dnnx_bnorm_cases STATIC ${_bnorm_dir}/batch_norm_cases.cpp)
target_include_directories(dnnx_bnorm_cases PUBLIC ${_bnorm_dir}/..)
target_link_libraries(dnnx_bnorm_cases PUBLIC dnnx::dnnx dnnx_test_support GTest::gtest)

add_executable(batch_norm_parity_test ${_bnorm_dir}/batch_norm_parity_test.cpp)
target_link_libraries(batch_norm_parity_test PRIVATE dnnx_bnorm_cases GTest::gtest_main)
gtest_discover_tests(batch_norm_parity_test NO_PRETTY_VALUES
                     PROPERTIES LABELS "parity" TIMEOUT 300 DISCOVERY_TIMEOUT 60)
