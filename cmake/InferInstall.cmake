# Installation: headers, both libraries, the tools, a CMake package (find_package(infer) gives
# infer::infer and infer::infer_static) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS infer infer_static
  EXPORT inferTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Public headers only: the C++ API (include/infer/), the generated version header, the C header.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/infer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/infer/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infer)

set(INFER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/infer)
install(EXPORT inferTargets NAMESPACE infer:: DESTINATION ${INFER_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/inferConfig.cmake.in
  ${PROJECT_BINARY_DIR}/inferConfig.cmake INSTALL_DESTINATION ${INFER_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/inferConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/inferConfig.cmake ${PROJECT_BINARY_DIR}/inferConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindSentencePiece.cmake DESTINATION ${INFER_CMAKE_DIR})

# The .pc file locates the prefix relative to itself, so an installed tree can be moved.
file(RELATIVE_PATH INFER_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" INFER_PC_TO_PREFIX "${INFER_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/infer.pc.in ${PROJECT_BINARY_DIR}/infer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/infer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
