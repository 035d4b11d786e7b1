# Reorder tests, included by tests/CMakeLists.txt: the case table, bad inputs and the desc, parity
# of the cpu candidate with the reference, the CLI, and the GPU test of the cudnn backend. The nn
# side (Flatten of channels_last inputs, convert) is in tests/nn.
add_library(dnnx_reorder_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/reorder_cases.cpp)
target_link_libraries(dnnx_reorder_cases PUBLIC dnnx_test_support)

add_executable(reorder_errors_test ${CMAKE_CURRENT_LIST_DIR}/reorder_errors_test.cpp)
target_link_libraries(reorder_errors_test PRIVATE dnnx_reorder_cases GTest::gtest_main)
dnnx_gtests(reorder_errors_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)

add_executable(reorder_parity_test ${CMAKE_CURRENT_LIST_DIR}/reorder_parity_test.cpp)
target_link_libraries(reorder_parity_test PRIVATE dnnx_reorder_cases GTest::gtest_main)
dnnx_gtests(reorder_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(reorder_algos_cpu
    ARGS algos reorder --dims 2x3x4x5 --src-dtype f32 --dst-dtype f16 --backend cpu
    STDOUT "reorder fwd on cpu: reorder dims=2x3x4x5 f32 nchw -> f16 nhwc alpha=1 beta=0.*onednn:[A-Za-z0-9_:.+-]+:reorder")
  dnnx_cli_test(reorder_profile_reference
    ARGS profile reorder --dims 3x5x7 --src-layout nhwc --dst-layout nchw --alpha 0.5 --beta 2 --backend reference
    STDOUT "reorder fwd profile.*reference:direct.*repro: dnnx profile reorder --dims 3x5x7 --src-dtype f32 --dst-dtype f32 --src-layout nhwc --dst-layout nchw --alpha 0.5 --beta 2")
  dnnx_cli_test(reorder_profile_cpu_json
    ARGS profile reorder --dims 2x8x4x4 --dst-dtype bf16 --backend cpu --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(reorder_bad_dtype ARGS algos reorder --dims 5 --dst-dtype i32 CODE 2
    ONE_LINE_ERROR STDERR "dst_dtype must be f32, f16 or bf16, got i32")
  dnnx_cli_test(reorder_bad_alpha ARGS algos reorder --dims 5 --alpha two CODE 2 ONE_LINE_ERROR
    STDERR "--alpha 'two': expected a number")
  dnnx_cli_test(reorder_missing_dims ARGS profile reorder CODE 2 ONE_LINE_ERROR STDERR "--dims")
  dnnx_cli_test(reorder_help ARGS profile reorder --help
    STDOUT "--dims.*--src-dtype.*--dst-dtype.*--src-layout.*--dst-layout.*--alpha.*--beta")
endif()

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_reorder_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_reorder_test.cpp)
  target_link_libraries(cudnn_reorder_test PRIVATE dnnx_reorder_cases dnnx_internal GTest::gtest_main)
  dnnx_gtests(cudnn_reorder_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 600 DISCOVERY_TIMEOUT 60)
endif()
