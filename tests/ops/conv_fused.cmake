# Tests of the fused convolution (included by tests/CMakeLists.txt; paths through
# CMAKE_CURRENT_LIST_DIR): the case table and helpers, the public surface (unit), every cpu
# candidate against the reference (parity), every cudnn candidate on a GPU (gpu), the CLI (cli).
include(GoogleTest)

add_library(dnnx_conv_fused_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/conv_fused_support.cpp)
target_link_libraries(dnnx_conv_fused_cases PUBLIC dnnx_test_support dnnx::dnnx)

add_executable(conv_fused_api_test ${CMAKE_CURRENT_LIST_DIR}/conv_fused_api_test.cpp)
target_link_libraries(conv_fused_api_test PRIVATE dnnx_conv_fused_cases GTest::gtest_main)
dnnx_gtests(conv_fused_api_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)

add_executable(conv_fused_parity_test ${CMAKE_CURRENT_LIST_DIR}/conv_fused_parity_test.cpp)
target_link_libraries(conv_fused_parity_test PRIVATE dnnx_conv_fused_cases GTest::gtest_main)
dnnx_gtests(conv_fused_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 300
                                              DISCOVERY_TIMEOUT 60)

if(DNNX_HAVE_CUDNN AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_conv_fused_test.cpp)
  # Every test skips, saying why, where no usable GPU is present.
  add_executable(cudnn_conv_fused_test
                 ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_conv_fused_test.cpp)
  target_link_libraries(cudnn_conv_fused_test PRIVATE dnnx_conv_fused_cases dnnx_internal
                                                      GTest::gtest_main CUDA::cudart)
  dnnx_gtests(cudnn_conv_fused_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 1200
                                               DISCOVERY_TIMEOUT 60)
endif()

if(COMMAND dnnx_cli_test)
  set(_fused --input 1x4x8x8 --weights 8x4x3x3 --pad 1)
  dnnx_cli_test(conv_fused.help_algos
                STDOUT "--input.*--weights.*--bias.*--residual.*--residual-scale.*--activation.*--direction.*--json"
                ARGS algos conv_fused --help)
  dnnx_cli_test(conv_fused.help_profile
                STDOUT "--bias.*--activation.*--direction.*--workspace-limit.*--runs"
                ARGS profile conv_fused --help)
  dnnx_cli_test(conv_fused.algos_reference
                STDOUT "^conv_fused fwd on reference: .*\\+bias \\+residual\\*2 relu\n.*reference:direct"
                ARGS algos conv_fused ${_fused} --bias --residual --residual-scale 2 --backend reference)
  dnnx_cli_test(conv_fused.algos_json JSON stdout JSON_LENGTH 1
                JSON_REQUIRE 0/algos/0/id 0/algos/0/notes 0/repro
                ARGS algos conv_fused ${_fused} --activation identity --direction all --json)
  # ConvFusedDesc::repro() of conv_fused_api_test's ReproIsTheCliLine, verbatim.
  dnnx_cli_test(conv_fused.repro STDOUT "reference:direct +[0-9.]+ .* ok"
                ARGS profile conv_fused --input 2x4x8x8 --weights 8x4x3x3 --stride 1 --pad 1
                     --dilation 1 --dtype f32 --layout nchw --bias --residual --residual-scale 0.5
                     --activation relu --direction fwd --backend reference --runs 1)
  dnnx_cli_test(conv_fused.profile_json JSON stdout JSON_LENGTH 1 JSON_REQUIRE 0/chosen 0/rows/0
                ARGS profile conv_fused --input 1x4x9 --weights 4x2x3 --groups 2 --layout nhwc
                     --dtype bf16 --residual --backend reference --runs 1 --json)
  if(DNNX_HAVE_ONEDNN)
    dnnx_cli_test(conv_fused.algos_cpu STDOUT "onednn:[^ ]*:fused .*unfused:onednn:"
                  ARGS algos conv_fused ${_fused} --bias --residual --backend cpu)
    dnnx_cli_test(conv_fused.profile_cpu STDOUT "fastest: " ARGS profile conv_fused ${_fused}
                  --layout nhwc --bias --activation relu --backend cpu --runs 1 --warmup 0)
  endif()
  dnnx_cli_usage_error(conv_fused.bad_activation "--activation 'gelu'.*identity.*relu"
                       algos conv_fused ${_fused} --activation gelu)
  dnnx_cli_usage_error(conv_fused.bad_scale "--residual-scale 'abc': expected a finite number"
                       algos conv_fused ${_fused} --residual --residual-scale abc)
  dnnx_cli_usage_error(conv_fused.infinite_scale "--residual-scale 'inf'"
                       algos conv_fused ${_fused} --residual --residual-scale inf)
  dnnx_cli_usage_error(conv_fused.scale_without_residual "residual_scale is 0.5 but residual is false"
                       algos conv_fused ${_fused} --residual-scale 0.5)
  dnnx_cli_usage_error(conv_fused.bwd_direction "only the forward direction \\(fwd\\); got bwd_data"
                       algos conv_fused ${_fused} --direction bwd_data --backend reference)
  dnnx_cli_usage_error(conv_fused.bad_direction "--direction 'sideways'"
                       profile conv_fused ${_fused} --direction sideways)
  dnnx_cli_usage_error(conv_fused.unknown_flag "--biass" algos conv_fused ${_fused} --biass)
  dnnx_cli_usage_error(conv_fused.bad_groups "groups=3 does not divide out_channels=4"
                       algos conv_fused --input 1x6x8x8 --weights 4x2x3x3 --groups 3)
endif()
