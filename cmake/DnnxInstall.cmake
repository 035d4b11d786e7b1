# `cmake --install` rules: libdnnx, the public headers, the `dnnx` tool, and a CMake package
# (dnnxConfig.cmake, dnnxConfigVersion.cmake, dnnxTargets.cmake with namespace dnnx::) so that
# consumers write find_package(dnnx) + target_link_libraries(app PRIVATE dnnx::dnnx).
#
# libdnnx links its backends' libraries privately and finds them through its RUNPATH, so the
# package exports no dependency on oneDNN: consumers need neither its headers nor its CMake config.

include(CMakePackageConfigHelpers)

set(DNNX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dnnx CACHE STRING
    "Where dnnxConfig.cmake is installed, relative to the prefix")
option(DNNX_INSTALL_ONEDNN
       "Copy the oneDNN shared library next to libdnnx (a relocatable install; libdnnx's RUNPATH has $ORIGIN)"
       OFF)

install(TARGETS dnnx EXPORT dnnxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dnnx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")

if(DNNX_INSTALL_ONEDNN AND DNNX_HAVE_ONEDNN)
  get_target_property(_dnnx_dnnl_file DNNL::dnnl IMPORTED_LOCATION_RELEASE)
  get_target_property(_dnnx_dnnl_soname DNNL::dnnl IMPORTED_SONAME_RELEASE)
  install(FILES ${_dnnx_dnnl_file} DESTINATION ${CMAKE_INSTALL_LIBDIR} RENAME ${_dnnx_dnnl_soname})
endif()

# The command-line tool (tools/dnnx). Its installed copy finds libdnnx in ../lib.
if(TARGET dnnx_cli)
  set_target_properties(dnnx_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS dnnx_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT dnnxTargets NAMESPACE dnnx:: FILE dnnxTargets.cmake
        DESTINATION ${DNNX_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dnnxConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dnnxConfig.cmake
                              INSTALL_DESTINATION ${DNNX_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dnnxConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dnnxConfig.cmake ${PROJECT_BINARY_DIR}/dnnxConfigVersion.cmake
        DESTINATION ${DNNX_INSTALL_CMAKEDIR})

# The same package for the build tree: find_package(dnnx) with dnnx_DIR=<build folder> links the
# libdnnx built there (the Python module, python/, is built this way instead of compiling the
# library again).
export(EXPORT dnnxTargets NAMESPACE dnnx:: FILE ${PROJECT_BINARY_DIR}/dnnxTargets.cmake)
