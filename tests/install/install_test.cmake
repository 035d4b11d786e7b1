# Run by the install.example test (see CMakeLists.txt here) with cmake -P.
cmake_minimum_required(VERSION 3.25)

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit status ${status}):\n${ARGN}\n${output}")
  endif()
  set(run_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

run_checked("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

# The package folder is wherever DNNX_INSTALL_CMAKEDIR put it (lib/cmake/dnnx by default).
file(GLOB_RECURSE configs "${prefix}/dnnxConfig.cmake")
list(LENGTH configs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one dnnxConfig.cmake under ${prefix}, found ${count}: ${configs}")
endif()
get_filename_component(package_dir "${configs}" DIRECTORY)
file(RELATIVE_PATH cmakedir "${prefix}" "${package_dir}")
foreach(file IN ITEMS include/dnnx/dnnx.hpp include/dnnx/ops/conv.hpp
                      ${cmakedir}/dnnxConfigVersion.cmake ${cmakedir}/dnnxTargets.cmake)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "the install lacks ${file} (prefix ${prefix})")
  endif()
endforeach()
file(GLOB libraries "${prefix}/${LIBDIR}/libdnnx.so*")
if(NOT libraries)
  message(FATAL_ERROR "the install lacks ${LIBDIR}/libdnnx.so (prefix ${prefix})")
endif()
file(GLOB_RECURSE internal_headers RELATIVE "${prefix}" "${prefix}/include/*")
list(FILTER internal_headers EXCLUDE REGEX "^include/dnnx/")
if(internal_headers)
  message(FATAL_ERROR "the install puts headers outside include/dnnx: ${internal_headers}")
endif()

# A consumer that sees only the installed prefix.
set(example_build "${WORK_DIR}/examples")
run_checked("configuring examples/ against the install"
            "${CMAKE_COMMAND}" -S "${EXAMPLES_DIR}" -B "${example_build}" -G "${GENERATOR}"
            "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE=Release
            "-Ddnnx_DIR=${package_dir}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_checked("building examples/" "${CMAKE_COMMAND}" --build "${example_build}")

set(example "${example_build}/conv_example")
find_program(LDD ldd)
if(LDD)
  # Every library must resolve, and libdnnx must be the installed one.
  run_checked("ldd conv_example" "${LDD}" "${example}")
  if(run_output MATCHES "not found")
    message(FATAL_ERROR "conv_example has unresolved libraries:\n${run_output}")
  endif()
  string(FIND "${run_output}" " => ${prefix}/${LIBDIR}/libdnnx.so" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "conv_example does not load libdnnx from ${prefix}:\n${run_output}")
  endif()
endif()

# The example checks its own result (exit status) and names the algorithm that ran.
run_checked("conv_example" "${example}")
message("${run_output}")
if(NOT run_output MATCHES "algorithm: [a-z0-9_]+:[^ \n]+")
  message(FATAL_ERROR "conv_example did not print the algorithm that ran (\"algorithm: <id>\")")
endif()

if(HAVE_CLI)
  set(cli "${prefix}/${BINDIR}/dnnx")
  if(NOT EXISTS "${cli}")
    message(FATAL_ERROR "the install lacks ${BINDIR}/dnnx")
  endif()
  run_checked("installed dnnx --help" "${cli}" --help)
endif()
message("install test passed: prefix ${prefix}")
