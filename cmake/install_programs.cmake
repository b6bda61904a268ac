# The programs users run, component "programs" (option URPC_INSTALL_PROGRAMS,
# ON by default): urpc-info, the demos and the benchmarks, into bin/. They
# find the installed liburpc through a relative RPATH ($ORIGIN/../lib).
# `cmake --install B --component dev` installs only the library and headers.
if(URPC_INSTALL_PROGRAMS)
  set(URPC_PROGRAMS urpc-info urpc-demo urpc-hello-server urpc-hello-client
    urpc-kv-server urpc-kv-client urpc-rdma-example urpc-latency urpc-small-tput
    urpc-sessions urpc-large-tput urpc-rdma-bw urpc-cpu-cost)
  file(RELATIVE_PATH _urpc_bin_to_lib /p/${CMAKE_INSTALL_BINDIR} /p/${CMAKE_INSTALL_LIBDIR})
  set_target_properties(${URPC_PROGRAMS} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${_urpc_bin_to_lib}")
  install(TARGETS ${URPC_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT programs)
endif()
