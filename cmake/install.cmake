# Installation: the public header, both libraries, a pkg-config file and a
# CMake package, so that `find_package(urpc)` and `pkg-config urpc` work.

set_target_properties(urpc_shared PROPERTIES EXPORT_NAME urpc)
set_target_properties(urpc_static PROPERTIES EXPORT_NAME urpc_static)

# Component "dev": what a program built against urpc needs. The programs
# (urpc-info, demos, benchmarks) are component "programs": install_programs.cmake.
install(TARGETS urpc_shared urpc_static EXPORT urpcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
install(DIRECTORY include/urpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)

set(URPC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/urpc)
install(EXPORT urpcTargets NAMESPACE urpc:: DESTINATION ${URPC_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/urpcConfig.cmake.in
  ${CMAKE_BINARY_DIR}/urpcConfig.cmake INSTALL_DESTINATION ${URPC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/urpcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/urpcConfig.cmake ${CMAKE_BINARY_DIR}/urpcConfigVersion.cmake
  DESTINATION ${URPC_CMAKE_DIR} COMPONENT dev)

# urpc.pc names the prefix given at install time (cmake --install --prefix P
# as well as CMAKE_INSTALL_PREFIX), so its paths are plain: P/include, P/lib.
if(URPC_HAVE_VERBS)
  set(URPC_PC_VERBS_LIBS "-libverbs -lmlx5")
endif()
if(URPC_HAVE_XDP)
  set(URPC_PC_VERBS_LIBS "${URPC_PC_VERBS_LIBS} -lxdp -lbpf")
endif()
set(URPC_PC_PREFIX "@URPC_PC_PREFIX@") # filled in at install time, below
configure_file(cmake/urpc.pc.in ${CMAKE_BINARY_DIR}/urpc.pc.in @ONLY)
install(CODE "
  set(URPC_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${CMAKE_BINARY_DIR}/urpc.pc.in\" \"${CMAKE_BINARY_DIR}/pc/urpc.pc\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
    TYPE FILE FILES \"${CMAKE_BINARY_DIR}/pc/urpc.pc\")" COMPONENT dev)
