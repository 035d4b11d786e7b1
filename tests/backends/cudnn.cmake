# GPU tests of the cudnn backend (label "gpu"); included by tests/CMakeLists.txt when
# DNNX_HAVE_CUDNN. Every test skips, saying why, where no usable GPU is present.
add_executable(cudnn_conv_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_test.cpp)
target_link_libraries(cudnn_conv_test PRIVATE GTest::gtest_main dnnx_internal dnnx_test_support
                                              CUDA::cudart)
dnnx_gtests(cudnn_conv_test PROPERTIES LABELS "gpu" TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
add_executable(cudnn_conv_depthwise_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_depthwise_test.cpp)
target_link_libraries(cudnn_conv_depthwise_test PRIVATE GTest::gtest_main dnnx_internal
                                                        dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_depthwise_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# The conv's search: runtime-compiled candidates under the compile budget, saved plans, the
# heuristics' top configs among the timed, the search's time split (its settings tests need no GPU).
add_executable(cudnn_conv_search_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_search_test.cpp)
target_link_libraries(cudnn_conv_search_test PRIVATE GTest::gtest_main dnnx_internal
                                                     dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_search_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# Single-candidate descriptions (Note [re-validating persisted choices]): every kind of id
# described without a listing, a choice from the cache file run by a fresh context that lists
# nothing (its id-parsing tests need no GPU).
add_executable(cudnn_conv_describe_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_describe_test.cpp)
target_link_libraries(cudnn_conv_describe_test PRIVATE GTest::gtest_main dnnx_internal
                                                       dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_describe_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# The grouped kernel on the tensor cores (Note [grouped candidates]; its listing and host-emulation
# tests need no GPU).
add_executable(cudnn_conv_grouped_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_grouped_test.cpp)
target_link_libraries(cudnn_conv_grouped_test PRIVATE GTest::gtest_main dnnx_internal
                                                      dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_grouped_test PROPERTIES LABELS "gpu" TIMEOUT 1200 DISCOVERY_TIMEOUT 60)

# The narrow-channel backward data kernel (Note [narrow-channel candidates]; its listing tests
# need no GPU).
add_executable(cudnn_conv_narrow_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_narrow_test.cpp)
target_link_libraries(cudnn_conv_narrow_test PRIVATE GTest::gtest_main dnnx_internal
                                                     dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_narrow_test PROPERTIES LABELS "gpu" TIMEOUT 1200 DISCOVERY_TIMEOUT 60)

# Winograd's F(4x4, 3x3) (Note [winograd candidates]; its transform, listing and host-emulation
# tests need no GPU).
add_executable(cudnn_conv_winograd_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_winograd_test.cpp)
target_link_libraries(cudnn_conv_winograd_test PRIVATE GTest::gtest_main dnnx_internal
                                                       dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_winograd_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# The stacked folds of dilated convolutions (Note [stacked folds]; its form, listing and
# host-emulation tests need no GPU).
add_executable(cudnn_conv_stacked_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_stacked_test.cpp)
target_link_libraries(cudnn_conv_stacked_test PRIVATE GTest::gtest_main dnnx_internal
                                                      dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_stacked_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# The phase folds of strided convolutions (Note [phase folds]; its form, copies and
# host-emulation tests need no GPU).
add_executable(cudnn_conv_phases_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_phases_test.cpp)
target_link_libraries(cudnn_conv_phases_test PRIVATE GTest::gtest_main dnnx_internal
                                                     dnnx_test_support CUDA::cudart)
dnnx_gtests(cudnn_conv_phases_test PROPERTIES LABELS "gpu" TIMEOUT 1200
            DISCOVERY_TIMEOUT 60)

# The GPU's energy counter through NVML and the energy policies on it (docs/energy.md).
add_executable(cudnn_energy_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_energy_test.cpp)
target_link_libraries(cudnn_energy_test PRIVATE GTest::gtest_main dnnx_internal dnnx_test_support)
dnnx_gtests(cudnn_energy_test PROPERTIES LABELS "gpu" TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
