# Unit tests of the cpu backend (oneDNN) below the op layer; included by tests/CMakeLists.txt
# when DNNX_HAVE_ONEDNN.
add_executable(onednn_conv_test ${CMAKE_CURRENT_LIST_DIR}/onednn_conv_test.cpp)
target_link_libraries(onednn_conv_test PRIVATE GTest::gtest_main dnnx_internal dnnx_test_support)
dnnx_gtests(onednn_conv_test PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
