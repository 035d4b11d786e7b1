# Tensor-add tests, included by tests/CMakeLists.txt: the case table, unit tests (desc,
# reference against finite differences, selection policies, bad inputs), parity of every cpu
# candidate with the reference, the CLI, and the GPU tests of the cudnn backend. The PyTorch
# oracle of add shares activation_harness (tests/ops/activation.cmake).
add_library(dnnx_add_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/add_cases.cpp)
target_link_libraries(dnnx_add_cases PUBLIC dnnx_test_support)

foreach(_name api errors)
  add_executable(add_${_name}_test ${CMAKE_CURRENT_LIST_DIR}/add_${_name}_test.cpp)
  target_link_libraries(add_${_name}_test PRIVATE dnnx_add_cases GTest::gtest_main)
  dnnx_gtests(add_${_name}_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
endforeach()

add_executable(add_parity_test ${CMAKE_CURRENT_LIST_DIR}/add_parity_test.cpp)
target_link_libraries(add_parity_test PRIVATE dnnx_add_cases GTest::gtest_main)
dnnx_gtests(add_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(add_algos_cpu
    ARGS algos add --src 1x16x1x1 --dst 2x16x5x5 --backend cpu
    STDOUT "add fwd on cpu: add src=1x16x1x1 dst=2x16x5x5 alpha=1 beta=1 f32 nchw.*onednn:[a-z0-9_:]+:scaled_dst.*add bwd_data on cpu.*reduction_sum")
  dnnx_cli_test(add_algos_beta0_json
    ARGS algos add --src 1x16x1x1 --dst 2x16x5x5 --beta 0 --backend cpu --direction fwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro"
    STDOUT "reads dst as binary source 0")
  dnnx_cli_test(add_profile_reference
    ARGS profile add --src 1x1x5x6 --dst 3x4x5x6 --alpha -1 --beta 0.5 --dtype f16 --layout nhwc --backend reference
    STDOUT "add fwd profile.*reference:direct.*add bwd_data profile.*repro: dnnx profile add --src 1x1x5x6 --dst 3x4x5x6 --alpha -1 --beta 0.5 --dtype f16 --layout nhwc --direction bwd")
  dnnx_cli_test(add_profile_cpu_json
    ARGS profile add --src 1x8x1x1 --dst 2x8x4x4 --backend cpu --direction bwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(add_bad_broadcast ARGS algos add --src 1x3x1x1 --dst 2x4x5x5 CODE 2
    ONE_LINE_ERROR STDERR "src_dims 1x3x1x1 do not broadcast to dst_dims 2x4x5x5: axis 1")
  dnnx_cli_test(add_bad_alpha ARGS algos add --src 1 --dst 5 --alpha two CODE 2 ONE_LINE_ERROR
    STDERR "--alpha 'two': expected a number")
  dnnx_cli_test(add_bad_beta_infinite ARGS algos add --src 1 --dst 5 --beta inf CODE 2
    ONE_LINE_ERROR STDERR "beta must be finite, got inf")
  dnnx_cli_test(add_bad_src_dims ARGS algos add --src 1x0 --dst 5x2 CODE 2 ONE_LINE_ERROR
    STDERR "--src")
  dnnx_cli_test(add_bad_dtype ARGS algos add --src 1 --dst 5 --dtype i32 CODE 2 ONE_LINE_ERROR
    STDERR "dtype must be f32, f16 or bf16, got i32")
  dnnx_cli_test(add_missing_dst ARGS profile add --src 1x3 CODE 2 ONE_LINE_ERROR STDERR "--dst")
  dnnx_cli_test(add_help ARGS profile add --help STDOUT "--src.*--dst.*--alpha.*--beta")
endif()

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_add_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_add_test.cpp)
  target_link_libraries(cudnn_add_test PRIVATE dnnx_add_cases dnnx_internal GTest::gtest_main)
  dnnx_gtests(cudnn_add_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 600 DISCOVERY_TIMEOUT 60)
endif()
