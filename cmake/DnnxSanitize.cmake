# DNNX_SANITIZE: sanitizers compiled into dnnx's own targets (the library, tools, tests,
# benchmarks), e.g. -DDNNX_SANITIZE=address,undefined. Libraries from outside (oneDNN, GoogleTest,
# the C++ runtime) stay uninstrumented: ASan still sees their heap through its malloc, UBSan does
# not look inside them. scripts/test.sh builds build-asan this way and runs the `unit` and `cli`
# tests in it with the options and suppressions of tests/sanitizers/.
set(DNNX_SANITIZE "" CACHE STRING
    "Sanitizers for dnnx's own code, comma-separated: address, undefined, leak (empty: none)")

if(DNNX_SANITIZE)
  string(REPLACE "," ";" _dnnx_sanitizers "${DNNX_SANITIZE}")
  foreach(_sanitizer IN LISTS _dnnx_sanitizers)
    if(NOT _sanitizer MATCHES "^(address|undefined|leak)$")
      message(FATAL_ERROR "DNNX_SANITIZE='${DNNX_SANITIZE}': unknown sanitizer '${_sanitizer}'; "
                          "accepted: address, undefined, leak, comma-separated")
    endif()
  endforeach()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
    message(FATAL_ERROR "DNNX_SANITIZE needs g++ or clang++, got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # nvcc's device code cannot be instrumented, and the CUDA runtime does not start under ASan's
  # default shadow layout; the sanitizer build is a host-only build.
  if(DNNX_HAVE_CUDNN)
    message(FATAL_ERROR "DNNX_SANITIZE='${DNNX_SANITIZE}' with the cudnn backend is not supported; "
                        "configure with -DDNNX_WITH_CUDNN=OFF")
  endif()
  # Frame pointers give whole stacks in reports at little cost; any UBSan finding stops the
  # program with a non-zero status instead of printing and carrying on, so a test cannot pass
  # over it.
  set(_dnnx_sanitize_recover)
  if("undefined" IN_LIST _dnnx_sanitizers)
    set(_dnnx_sanitize_recover -fno-sanitize-recover=undefined)
  endif()
  list(JOIN _dnnx_sanitizers "," _dnnx_sanitizers)
  set(_dnnx_sanitize_flags -fsanitize=${_dnnx_sanitizers} -fno-omit-frame-pointer
                           ${_dnnx_sanitize_recover})
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_dnnx_sanitize_flags}>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:${_dnnx_sanitize_flags}>")
  message(STATUS "Sanitizers: ${_dnnx_sanitize_flags}")
endif()
