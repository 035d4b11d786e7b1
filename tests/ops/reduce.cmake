# Tests of the reduction ops (reduce, argmax, accuracy), included by tests/CMakeLists.txt: the
# case tables, unit tests (semantics worked out by hand, bad inputs), parity of every cpu
# candidate with the reference, the CLI, the PyTorch oracle of the reference (label oracle) and
# the GPU tests of the cudnn backend (label gpu).
add_library(dnnx_reduce_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/reduce_cases.cpp)
target_link_libraries(dnnx_reduce_cases PUBLIC dnnx_test_support)

foreach(_name api errors)
  add_executable(reduce_${_name}_test ${CMAKE_CURRENT_LIST_DIR}/reduce_${_name}_test.cpp)
  target_link_libraries(reduce_${_name}_test PRIVATE dnnx_reduce_cases GTest::gtest_main)
  dnnx_gtests(reduce_${_name}_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
endforeach()

add_executable(reduce_parity_test ${CMAKE_CURRENT_LIST_DIR}/reduce_parity_test.cpp)
target_link_libraries(reduce_parity_test PRIVATE dnnx_reduce_cases GTest::gtest_main)
dnnx_gtests(reduce_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(reduce_algos_cpu
    ARGS algos reduce --kind mean --src 8x16x5x5 --axes 2,3 --backend cpu
    STDOUT "reduce fwd on cpu: reduce mean src=8x16x5x5 dst=8x16x1x1 f32 nchw.*onednn:[a-z0-9_:.+-]+.*cpu:kernel:reduce.*reduce bwd_data on cpu.*cpu:kernel:reduce")
  dnnx_cli_test(reduce_algos_no_axis_json
    ARGS algos reduce --src 4x5 --dst 4x5 --backend cpu --direction fwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro"
    STDOUT "has no implementation of reduction")
  dnnx_cli_test(reduce_profile_reference
    ARGS profile reduce --kind max --src 3x4x5 --dst 1x4x1 --dtype bf16 --layout nhwc --backend reference
    STDOUT "reduce fwd profile.*reference:direct.*reduce bwd_data profile.*repro: dnnx profile reduce --kind max --src 3x4x5 --dst 1x4x1 --dtype bf16 --layout nhwc --direction bwd")
  dnnx_cli_test(reduce_profile_cpu_json
    ARGS profile reduce --kind norm2 --src 16x64 --axes 0,1 --backend cpu --direction fwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(reduce_bad_dst ARGS algos reduce --src 2x3 --dst 2x2 CODE 2 ONE_LINE_ERROR
    STDERR "dst_dims 2x2 are not a reduction of src_dims 2x3: axis 1")
  dnnx_cli_test(reduce_both_dst_and_axes ARGS algos reduce --src 2x3 --dst 2x1 --axes 1 CODE 2
    ONE_LINE_ERROR STDERR "exactly one of --dst")
  dnnx_cli_test(reduce_bad_kind ARGS algos reduce --kind avg --src 2x3 --axes 1 CODE 2
    ONE_LINE_ERROR STDERR "--kind 'avg'")
  dnnx_cli_test(reduce_help ARGS profile reduce --help STDOUT "--kind.*--src.*--dst.*--axes")
  dnnx_cli_test(argmax_algos_cpu ARGS algos argmax --src 64x1000 --backend cpu
    STDOUT "argmax fwd on cpu: argmax src=64x1000 axis=1 f32 index=i64 nchw.*cpu:kernel:argmax")
  dnnx_cli_test(argmax_profile_reference
    ARGS profile argmax --src 2x5x3x3 --axis 1 --index-dtype i32 --dtype f16 --layout nhwc --backend reference
    STDOUT "argmax fwd profile.*reference:direct.*repro: dnnx profile argmax --src 2x5x3x3 --axis 1 --dtype f16 --index-dtype i32 --layout nhwc --direction fwd")
  dnnx_cli_test(argmax_bad_axis ARGS algos argmax --src 4x5 --axis 2 CODE 2 ONE_LINE_ERROR
    STDERR "axis 2 is out of range for src_dims 4x5")
  dnnx_cli_test(accuracy_algos_cpu_json ARGS algos accuracy --input 64x1000 --top-k 5 --backend cpu --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro" STDOUT "cpu:kernel:accuracy")
  dnnx_cli_test(accuracy_profile_reference
    ARGS profile accuracy --input 8x10x4x4 --top-k 2 --ignore-index=3 --accumulate --label-dtype i32 --count-dtype f32 --dtype bf16 --backend reference
    STDOUT "accuracy fwd profile.*reference:direct.*repro: dnnx profile accuracy --input 8x10x4x4 --top-k 2 --ignore-index=3 --accumulate --label-dtype i32 --count-dtype f32 --dtype bf16 --layout nchw --direction fwd")
  dnnx_cli_test(accuracy_bad_top_k ARGS algos accuracy --input 4x10 --top-k 11 CODE 2
    ONE_LINE_ERROR STDERR "top_k must be in \\[1, C\\] = \\[1, 10\\], got 11")
endif()

# The reference against PyTorch (label oracle): reduce_harness runs the reference on .npy inputs,
# torch_reduce_parity.py compares with torch.sum / mean / amax / amin / norm and their autograd
# gradients, torch.argmax and a top-k count in float64.
find_package(nlohmann_json 3 REQUIRED)
add_executable(reduce_harness ${CMAKE_CURRENT_LIST_DIR}/../python/reduce_harness.cpp)
target_include_directories(reduce_harness PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(reduce_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_reduce_parity
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../python/torch_reduce_parity.py
                 $<TARGET_FILE:reduce_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_reduce_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_reduce_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_reduce_test.cpp)
  target_link_libraries(cudnn_reduce_test PRIVATE dnnx_reduce_cases dnnx_internal GTest::gtest_main)
  dnnx_gtests(cudnn_reduce_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 600 DISCOVERY_TIMEOUT 60)
endif()
