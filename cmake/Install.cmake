# Packaging is API: headers, the shared library, an exported CMake package
# (deputy::deputy) and a pkg-config file. tests/install checks both work.
include(CMakePackageConfigHelpers)

install(TARGETS deputy EXPORT deputyTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/deputy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/generated/deputy/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/deputy)
install(EXPORT deputyTargets NAMESPACE deputy::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deputy)

configure_package_config_file(cmake/deputyConfig.cmake.in
  ${CMAKE_BINARY_DIR}/deputyConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deputy)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/deputyConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/deputyConfig.cmake ${CMAKE_BINARY_DIR}/deputyConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deputy)

# The .pc file finds its prefix from its own location, so an install moved
# with `cmake --install --prefix` (or DESTDIR) still works.
file(RELATIVE_PATH DEPUTY_PC_TO_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(cmake/deputy.pc.in ${CMAKE_BINARY_DIR}/deputy.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/deputy.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(TARGETS deputy_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
