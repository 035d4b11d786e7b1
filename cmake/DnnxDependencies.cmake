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

set(DNNX_HAVE_CUDNN OFF)

find_package(nlohmann_json 3 REQUIRED)
if(DNNX_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()
