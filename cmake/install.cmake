# Installation: the public header, both libraries, a pkg-config file and a
# CMake package, so that `find_package(urpc)` and `pkg-config urpc` work.

set_target_properties(urpc_shared PROPERTIES EXPORT_NAME urpc)
set_target_properties(urpc_static PROPERTIES EXPORT_NAME urpc_static)

install(TARGETS urpc_shared urpc_static EXPORT urpcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/urpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(URPC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/urpc)
install(EXPORT urpcTargets NAMESPACE urpc:: DESTINATION ${URPC_CMAKE_DIR})
configure_package_config_file(cmake/urpcConfig.cmake.in
  ${CMAKE_BINARY_DIR}/urpcConfig.cmake INSTALL_DESTINATION ${URPC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/urpcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/urpcConfig.cmake ${CMAKE_BINARY_DIR}/urpcConfigVersion.cmake
  DESTINATION ${URPC_CMAKE_DIR})

file(RELATIVE_PATH URPC_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
if(URPC_HAVE_VERBS)
  set(URPC_PC_VERBS_LIBS "-libverbs -lmlx5")
endif()
if(URPC_HAVE_XDP)
  set(URPC_PC_VERBS_LIBS "${URPC_PC_VERBS_LIBS} -lxdp -lbpf")
endif()
configure_file(cmake/urpc.pc.in ${CMAKE_BINARY_DIR}/urpc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/urpc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
