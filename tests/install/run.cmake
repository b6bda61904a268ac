# Install urpc into a scratch prefix, then build and run a consumer against it
# through find_package() and through pkg-config. Variables: BUILD_DIR,
# SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/urpc/urpc.h lib/pkgconfig/urpc.pc lib/cmake/urpc/urpcConfig.cmake lib/liburpc.a)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()

# The .pc file names the prefix itself: no lib/pkgconfig/../../include.
file(READ ${prefix}/lib/pkgconfig/urpc.pc pc)
string(FIND "${pc}" "prefix=${prefix}\n" named)
string(FIND "${pc}" ".." dotdot)
if(named EQUAL -1 OR NOT dotdot EQUAL -1)
  message(FATAL_ERROR "urpc.pc does not name ${prefix} plainly:\n${pc}")
endif()

# The programs (component "programs", URPC_INSTALL_PROGRAMS): each runs
# from the prefix, finding the installed library through its RPATH.
if(INSTALL_PROGRAMS)
  unset(ENV{LD_LIBRARY_PATH})
  foreach(p urpc-info urpc-demo urpc-hello-server urpc-hello-client urpc-kv-server
      urpc-kv-client urpc-rdma-example urpc-latency urpc-small-tput urpc-sessions
      urpc-large-tput urpc-rdma-bw urpc-cpu-cost)
    if(NOT EXISTS ${prefix}/bin/${p})
      message(FATAL_ERROR "install is missing bin/${p}")
    endif()
    run(${prefix}/bin/${p} --help)
  endforeach()
  run(${prefix}/bin/urpc-info)
  message(STATUS "installed urpc-info: ${LAST_OUT}")
  run(${prefix}/bin/urpc-rdma-example --transport loop)
  message(STATUS "installed urpc-rdma-example: ${LAST_OUT}")
endif()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
foreach(exe consumer_shared consumer_static consumer_cxx echo)
  set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
  run(${WORK_DIR}/consumer/${exe})
  if(NOT LAST_OUT MATCHES "^(urpc [0-9]+\\.[0-9]+\\.[0-9]+|echo: hello\n$)")
    message(FATAL_ERROR "${exe} printed: ${LAST_OUT}")
  endif()
  message(STATUS "${exe}: ${LAST_OUT}")
endforeach()

# pkg-config: compile the same program with the flags it prints.
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run(pkg-config --cflags --libs urpc)
string(STRIP "${LAST_OUT}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(cc ${SOURCE_DIR}/tests/install/consumer/main.c ${flags} -o ${WORK_DIR}/consumer_pc)
run(${WORK_DIR}/consumer_pc)
message(STATUS "pkg-config consumer: ${LAST_OUT}")
run(cc ${SOURCE_DIR}/tests/install/consumer/echo.c ${flags} -o ${WORK_DIR}/echo_pc)
run(${WORK_DIR}/echo_pc)
if(NOT LAST_OUT STREQUAL "echo: hello\n")
  message(FATAL_ERROR "the pkg-config build of echo.c printed: ${LAST_OUT}")
endif()

# README.md shows echo.c whole: the two must not drift apart.
file(READ ${SOURCE_DIR}/tests/install/consumer/echo.c echo_src)
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "${echo_src}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not show tests/install/consumer/echo.c as it is")
endif()
