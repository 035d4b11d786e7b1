# Optimizer and loss-scaling tests (sgd, adam, unscale, update_scale), included by
# tests/CMakeLists.txt: the case table, bad inputs with semantics worked out by hand, parity of the
# cpu candidates with the reference, and the CLI. The cudnn backend's GPU test is
# tests/backends/cudnn_optim_test.cpp; the PyTorch oracle is tests/python/torch_optim_parity.py.
add_library(dnnx_optim_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/optim_cases.cpp)
target_link_libraries(dnnx_optim_cases PUBLIC dnnx_test_support)

add_executable(optim_errors_test ${CMAKE_CURRENT_LIST_DIR}/optim_errors_test.cpp)
target_link_libraries(optim_errors_test PRIVATE dnnx_optim_cases GTest::gtest_main)
dnnx_gtests(optim_errors_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)

add_executable(optim_parity_test ${CMAKE_CURRENT_LIST_DIR}/optim_parity_test.cpp)
target_link_libraries(optim_parity_test PRIVATE dnnx_optim_cases GTest::gtest_main)
dnnx_gtests(optim_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(sgd_algos_cpu
    ARGS algos sgd --sizes 64x3x7x7,0,64 --momentum --nesterov --backend cpu
    STDOUT "sgd fwd on cpu: sgd f32 momentum nesterov tensors=3 64x3x7x7.0.64.*cpu:kernel:sgd")
  dnnx_cli_test(adam_algos_resnet_json
    ARGS algos adamw --model resnet50 --decoupled-weight-decay --dtype bf16 --master-weights --backend reference --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro"
    STDOUT "reference:direct.*dnnx profile adam --model resnet50 --dtype bf16 --master-weights --decoupled-weight-decay")
  dnnx_cli_test(adam_profile_cpu
    ARGS profile adam --sizes 5,3x4,1000 --amsgrad --grad-scale --found-inf --backend cpu
    STDOUT "adam fwd profile.*cpu:kernel:adam.*repro: dnnx profile adam --sizes 5,3x4,1000 --dtype f32 --amsgrad --grad-scale --found-inf --direction fwd")
  dnnx_cli_test(unscale_profile_reference
    ARGS profile unscale --sizes 7,2x2 --dtype f16 --reset-found-inf --from-scale --backend reference
    STDOUT "unscale fwd profile.*reference:direct")
  dnnx_cli_test(update_scale_algos_cpu ARGS algos amp_update_scale --backend cpu
    STDOUT "update_scale fwd on cpu.*cpu:kernel:update_scale")
  dnnx_cli_test(sgd_bad_nesterov ARGS algos sgd --sizes 4 --nesterov CODE 2 ONE_LINE_ERROR
    STDERR "nesterov needs momentum buffers")
  dnnx_cli_test(sgd_both_lists ARGS algos sgd --sizes 4 --model resnet50 CODE 2 ONE_LINE_ERROR
    STDERR "exactly one of --sizes and --model")
  dnnx_cli_test(sgd_bad_sizes ARGS algos sgd --sizes 4,,3 CODE 2 ONE_LINE_ERROR
    STDERR "--sizes '4,,3': an entry is empty")
  dnnx_cli_test(adam_bad_model ARGS algos adam --model vgg CODE 2 ONE_LINE_ERROR
    STDERR "--model 'vgg'")
  dnnx_cli_test(adam_help ARGS profile adam --help
    STDOUT "--sizes.*--model.*--dtype.*--master-weights.*--maximize.*--grad-scale.*--found-inf.*--amsgrad.*--decoupled-weight-decay")
endif()

# The reference against PyTorch (label oracle): optim_harness runs the reference on .npy state,
# torch_optim_parity.py compares with torch.optim.SGD / Adam / AdamW over 10 steps and with
# GradScaler's documented algorithm.
find_package(nlohmann_json 3 REQUIRED)
add_executable(optim_harness ${CMAKE_CURRENT_LIST_DIR}/../python/optim_harness.cpp)
target_include_directories(optim_harness PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(optim_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_optim_parity
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../python/torch_optim_parity.py
                 $<TARGET_FILE:optim_harness>)
set_tests_properties(oracle.torch_optim_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_optim_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_optim_test.cpp)
  target_link_libraries(cudnn_optim_test PRIVATE GTest::gtest_main dnnx_optim_cases CUDA::cudart)
  dnnx_gtests(cudnn_optim_test PROPERTIES LABELS "gpu" ENVIRONMENT "DNNX_CACHE=off"
              TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
endif()
