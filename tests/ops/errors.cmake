# Bad-input table for convolution (included from tests/ops/CMakeLists.txt; paths relative to tests/ops).
add_executable(conv_errors_test ${CMAKE_CURRENT_SOURCE_DIR}/conv_errors_test.cpp)
target_link_libraries(conv_errors_test PRIVATE dnnx_internal GTest::gtest_main)
dnnx_gtests(conv_errors_test PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
