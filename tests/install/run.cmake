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

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
foreach(exe consumer_shared consumer_static consumer_cxx)
  set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
  run(${WORK_DIR}/consumer/${exe})
  if(NOT LAST_OUT MATCHES "^urpc [0-9]+\\.[0-9]+\\.[0-9]+")
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
