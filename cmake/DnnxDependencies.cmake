# Finds the optional backends' libraries and the tools' dependencies.
# oneDNN: the set-up script installs PyPI's onednn-cpu-gomp wheels into .venv; point
# CMAKE_PREFIX_PATH (or dnnl_DIR) elsewhere to use another oneDNN 3.x.

function(dnnx_resolve_option name found)
  if(${name} STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "${name}=ON but the library was not found")
  endif()
endfunction()

set(DNNX_HAVE_ONEDNN OFF)
if(NOT DNNX_WITH_ONEDNN STREQUAL "OFF")
  list(APPEND CMAKE_PREFIX_PATH ${CMAKE_CURRENT_SOURCE_DIR}/.venv)
  find_package(dnnl 3 CONFIG QUIET)
  if(dnnl_FOUND)
    set(DNNX_HAVE_ONEDNN ON)
    get_target_property(_dnnl_lib DNNL::dnnl IMPORTED_LOCATION_RELEASE)
    message(STATUS "oneDNN ${dnnl_VERSION}: ${_dnnl_lib}")
  endif()
  dnnx_resolve_option(DNNX_WITH_ONEDNN DNNX_HAVE_ONEDNN)
endif()

# cuDNN 9 (C API only) and the CUDA runtime. The CUDA toolkit is found by FindCUDAToolkit (nvcc on
# the PATH, CUDAToolkit_ROOT or /usr/local/cuda). cuDNN is looked for first under a hint folder
# holding include/cudnn.h and lib/libcudnn.so[.9] — CUDNN_ROOT or DNNX_CUDNN_ROOT, as a CMake or an
# environment variable (e.g. the nvidia/cudnn folder of the nvidia-cudnn-cu13 wheel) — then in the
# toolkit's folders and the system ones. Building needs no GPU; running needs a device and driver.
set(DNNX_HAVE_CUDNN OFF)
if(NOT DNNX_WITH_CUDNN STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  set(_cudnn_hints)
  foreach(_hint IN ITEMS "${DNNX_CUDNN_ROOT}" "$ENV{DNNX_CUDNN_ROOT}" "${CUDNN_ROOT}" "$ENV{CUDNN_ROOT}")
    if(_hint)
      list(APPEND _cudnn_hints "${_hint}")
    endif()
  endforeach()
  set(_cudnn_toolkit_dirs)
  if(CUDAToolkit_FOUND)
    set(_cudnn_toolkit_dirs ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR}
                            "${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  find_path(DNNX_CUDNN_INCLUDE_DIR cudnn.h
            HINTS ${_cudnn_hints} PATH_SUFFIXES include
            PATHS ${_cudnn_toolkit_dirs})
  # Wheels ship only the versioned libcudnn.so.9.
  find_library(DNNX_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
               HINTS ${_cudnn_hints} PATH_SUFFIXES lib lib64
               PATHS ${_cudnn_toolkit_dirs})
  set(DNNX_CUDNN_VERSION "")
  if(DNNX_CUDNN_INCLUDE_DIR AND EXISTS "${DNNX_CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${DNNX_CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_version_lines
         REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
    foreach(_part MAJOR MINOR PATCHLEVEL)
      string(REGEX REPLACE ".*#define CUDNN_${_part} +([0-9]+).*" "\\1" _cudnn_${_part}
             "${_cudnn_version_lines}")
    endforeach()
    set(DNNX_CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
  endif()
  if(NOT CUDAToolkit_FOUND)
    message(STATUS "cuDNN backend: CUDA toolkit (runtime) not found")
  elseif(NOT DNNX_CUDNN_INCLUDE_DIR OR NOT DNNX_CUDNN_LIBRARY)
    message(STATUS "cuDNN backend: cudnn.h or libcudnn not found (set CUDNN_ROOT)")
  elseif(NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
    # The ops cuDNN has no call for (e.g. cross-entropy's label gather) are CUDA kernels.
    message(STATUS "cuDNN backend: nvcc not found (the backend has CUDA kernels of its own)")
  elseif(DNNX_CUDNN_VERSION VERSION_LESS 9.0)
    # The graph-API attributes the backend uses (engine-config workspace, knob types) are cuDNN 9's.
    message(STATUS "cuDNN backend: cuDNN ${DNNX_CUDNN_VERSION} found, 9.x needed")
  else()
    set(DNNX_HAVE_CUDNN ON)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
    endif()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper machine code, plus PTX for newer GPUs. No GPU is needed to build.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
    endif()
    enable_language(CUDA)
    if(NOT TARGET dnnx::cudnn_libraries)
      add_library(dnnx::cudnn_libraries INTERFACE IMPORTED)
      target_include_directories(dnnx::cudnn_libraries INTERFACE "${DNNX_CUDNN_INCLUDE_DIR}")
      # cuBLASLt and cuBLAS run the matrix multiply (src/backends/cudnn/matmul.cpp).
      target_link_libraries(dnnx::cudnn_libraries INTERFACE "${DNNX_CUDNN_LIBRARY}" CUDA::cudart
                                                            CUDA::cublasLt CUDA::cublas)
    endif()
    get_filename_component(DNNX_CUDNN_LIBRARY_DIR "${DNNX_CUDNN_LIBRARY}" DIRECTORY)
    message(STATUS "cuDNN ${DNNX_CUDNN_VERSION}: ${DNNX_CUDNN_LIBRARY}; CUDA runtime "
                   "${CUDAToolkit_VERSION}: ${CUDAToolkit_LIBRARY_DIR}")
  endif()
  dnnx_resolve_option(DNNX_WITH_CUDNN DNNX_HAVE_CUDNN)
endif()

find_package(nlohmann_json 3 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
if(DNNX_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()
