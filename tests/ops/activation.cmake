# Activation tests, included by tests/CMakeLists.txt: the case table, unit tests (desc,
# reference against finite differences, selection policies, bad inputs), parity of every cpu
# candidate with the reference, the PyTorch oracle (activations and tensor add share its harness),
# the CLI, and the GPU tests of the cudnn backend.
add_library(dnnx_activation_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/activation_cases.cpp)
target_link_libraries(dnnx_activation_cases PUBLIC dnnx_test_support)

foreach(_name api errors)
  add_executable(activation_${_name}_test ${CMAKE_CURRENT_LIST_DIR}/activation_${_name}_test.cpp)
  target_link_libraries(activation_${_name}_test PRIVATE dnnx_activation_cases GTest::gtest_main)
  dnnx_gtests(activation_${_name}_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
endforeach()

add_executable(activation_parity_test ${CMAKE_CURRENT_LIST_DIR}/activation_parity_test.cpp)
target_link_libraries(activation_parity_test PRIVATE dnnx_activation_cases GTest::gtest_main)
dnnx_gtests(activation_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120
            DISCOVERY_TIMEOUT 60)

# The cpu backend's own kernel at each simd level against the reference and against each other
# (internal header; one process for the whole table).
if(DNNX_HAVE_ONEDNN)
  add_executable(activation_kernel_test ${CMAKE_CURRENT_LIST_DIR}/activation_kernel_test.cpp)
  target_link_libraries(activation_kernel_test PRIVATE dnnx_activation_cases dnnx_internal
                                                       GTest::gtest_main)
  add_test(NAME parity.activation_kernel COMMAND activation_kernel_test)
  set_tests_properties(parity.activation_kernel PROPERTIES LABELS "parity" TIMEOUT 600)
endif()

# The reference against PyTorch (tests/python/torch_activation_parity.py): activation_harness runs
# activations and tensor adds on the reference backend for the script.
find_package(nlohmann_json 3 REQUIRED)
add_executable(activation_harness ${CMAKE_CURRENT_LIST_DIR}/../python/activation_harness.cpp)
target_include_directories(activation_harness PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(activation_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_activation_parity
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../python/torch_activation_parity.py
                 $<TARGET_FILE:activation_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_activation_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(act_algos_cpu
    ARGS algos act --input 2x3x5x5 --kind relu --backend cpu
    STDOUT "act fwd on cpu: act relu dims=2x3x5x5 f32 nchw.*onednn:[a-z0-9_:]+:relu .*act bwd_data on cpu.*relu_use_dst_for_bwd")
  dnnx_cli_test(act_algos_reference_json
    ARGS algos act --input 7 --kind elu --alpha 0.5 --backend reference --direction bwd --saved dst --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro"
    STDOUT "reference:direct")
  dnnx_cli_test(act_algos_swish_saved_dst_unsupported
    ARGS algos act --input 2x3x4 --kind swish --backend reference --direction bwd --saved dst
    STDOUT "unsupported.*swish backward needs src, and desc.saved = dst")
  dnnx_cli_test(act_profile_reference
    ARGS profile act --input 1x3x5x7 --kind clipped_relu --ceiling 0.5 --dtype bf16 --layout nhwc --backend reference --direction all
    STDOUT "act fwd profile.*reference:direct.*act bwd_data profile.*repro: dnnx profile act --input 1x3x5x7 --kind clipped_relu --ceiling 0.5 --dtype bf16 --layout nhwc --direction bwd --saved src_and_dst")
  dnnx_cli_test(act_profile_cpu_json
    ARGS profile act --input 2x8x6x6 --kind tanh --dtype f16 --backend cpu --direction fwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  # Bad command lines: exit 2, one line naming the flag and the value.
  dnnx_cli_test(act_bad_kind ARGS algos act --input 2x3 --kind gelu CODE 2 ONE_LINE_ERROR
    STDERR "--kind 'gelu'.*accepted: identity, relu")
  dnnx_cli_test(act_bad_ceiling ARGS algos act --input 2x3 --kind clipped_relu --ceiling -1
    CODE 2 ONE_LINE_ERROR STDERR "ceiling of clipped_relu must be finite and > 0, got -1")
  dnnx_cli_test(act_alpha_without_elu ARGS algos act --input 2x3 --kind relu --alpha 2
    CODE 2 ONE_LINE_ERROR STDERR "--alpha '2': only --kind elu takes alpha")
  dnnx_cli_test(act_bad_alpha_number ARGS algos act --input 2x3 --kind elu --alpha 1x
    CODE 2 ONE_LINE_ERROR STDERR "--alpha '1x': expected a number")
  dnnx_cli_test(act_bad_saved ARGS algos act --input 2x3 --saved y CODE 2 ONE_LINE_ERROR
    STDERR "--saved 'y'.*accepted: src_and_dst, dst, src")
  dnnx_cli_test(act_bad_input_rank ARGS algos act --input 1x2x3x4x5x6 CODE 2 ONE_LINE_ERROR
    STDERR "--input")
  dnnx_cli_test(act_bad_direction ARGS algos act --input 2x3 --direction bwd_weights CODE 2
    ONE_LINE_ERROR STDERR "--direction 'bwd_weights'")
  dnnx_cli_test(act_missing_input ARGS profile act --kind relu CODE 2 ONE_LINE_ERROR
    STDERR "--input")
  dnnx_cli_test(act_help ARGS algos act --help STDOUT "--kind.*--alpha.*--ceiling.*--saved")
endif()

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_activation_test
                 ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_activation_test.cpp)
  target_link_libraries(cudnn_activation_test PRIVATE dnnx_activation_cases dnnx_internal
                                                      GTest::gtest_main)
  dnnx_gtests(cudnn_activation_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 600
              DISCOVERY_TIMEOUT 60)
endif()
