# cmake -P script behind the install.consumer test.  Inputs (-D): BUILD_DIR,
# WORK_DIR, CONSUMER_DIR, LIBDIR, BINDIR, VERSION, C_COMPILER, GENERATOR,
# MAKE_PROGRAM.  Any failed step ends the script with FATAL_ERROR.
cmake_minimum_required(VERSION 3.20)

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# A stale launcher environment would make the consumer try to join a job;
# the consumer must run as a singleton (rank 0 of 1).
foreach(v SHOAL_RANK SHOAL_SIZE SHOAL_BOOT_FD SHOAL_JOB_FD SHOAL_JOB_ID)
  unset(ENV{${v}})
endforeach()

# Runs a command; fails the test with its output unless it exits 0.
# Leaves the combined output in step_output.
function(step what)
  list(JOIN ARGN " " cmdline)
  message(STATUS "${what}: ${cmdline}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                  TIMEOUT 120)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/shoal.h ${LIBDIR}/libshoal.so ${LIBDIR}/libshoal.a
          ${LIBDIR}/cmake/shoal/shoalConfig.cmake ${LIBDIR}/cmake/shoal/shoalConfigVersion.cmake
          ${LIBDIR}/cmake/shoal/shoalTargets.cmake ${LIBDIR}/pkgconfig/shoal.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install did not produce ${prefix}/${f}")
  endif()
endforeach()
step("installed shoal-info" ${prefix}/${BINDIR}/shoal-info)
if(NOT step_output MATCHES "shoal ${VERSION}")
  message(FATAL_ERROR "installed shoal-info does not report version ${VERSION}:\n${step_output}")
endif()

# ---- CMake package ---------------------------------------------------------
set(cbuild ${WORK_DIR}/consumer-build)
step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${cbuild} -G ${GENERATOR}
     -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_C_COMPILER=${C_COMPILER}
     -DCMAKE_PREFIX_PATH=${prefix})
string(FIND "${step_output}" "shoal ${VERSION} found in ${prefix}/" found_at)
if(found_at EQUAL -1)
  message(FATAL_ERROR "find_package(shoal) did not pick the package under ${prefix}:\n${step_output}")
endif()
step("build consumer" ${CMAKE_COMMAND} --build ${cbuild})
foreach(exe consumer consumer_static)
  step("run ${exe}" ${cbuild}/${exe})
  if(NOT step_output MATCHES "rank 0 of 1 got its pong")
    message(FATAL_ERROR "${exe} printed something unexpected:\n${step_output}")
  endif()
endforeach()

# A program written from the CMAM thesis's prototypes (Fig. 4-18), alone
# and in a job of 4.
step("run cmam_fig418" ${cbuild}/cmam_fig418)
if(NOT step_output MATCHES "rank 0 of 1: fetch&add ok")
  message(FATAL_ERROR "cmam_fig418 printed something unexpected:\n${step_output}")
endif()
step("run cmam_fig418 with the installed shoalrun" ${prefix}/${BINDIR}/shoalrun -n 4 ${cbuild}/cmam_fig418)
foreach(r 0 1 2 3)
  if(NOT step_output MATCHES "rank ${r} of 4: fetch&add ok")
    message(FATAL_ERROR "cmam_fig418 -n 4 printed something unexpected:\n${step_output}")
  endif()
endforeach()

# ---- installed examples, manual pages and documentation -----------------------
set(ebuild ${WORK_DIR}/examples-build)
step("configure the installed examples" ${CMAKE_COMMAND} -S ${prefix}/share/shoal/examples -B ${ebuild}
     -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_C_COMPILER=${C_COMPILER}
     -DCMAKE_PREFIX_PATH=${prefix})
step("build the installed examples" ${CMAKE_COMMAND} --build ${ebuild})
step("run hello_am with the installed shoalrun" ${prefix}/${BINDIR}/shoalrun -n 3 ${ebuild}/hello_am)
if(NOT step_output MATCHES "all 3 ranks said hello")
  message(FATAL_ERROR "the installed hello_am printed something unexpected:\n${step_output}")
endif()
step("run crl_lu --check" ${prefix}/${BINDIR}/shoalrun -n 2 ${ebuild}/crl/crl_lu --n=60 --block=10 --check)
foreach(f share/man/man1/shoalrun.1 share/man/man1/shoal-info.1 share/man/man1/shoal-cosmos.1 share/man/man7/shoal.7
          share/doc/shoal/README.md share/doc/shoal/docs/API.md share/doc/shoal/docs/TUTORIAL.md)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install did not produce ${prefix}/${f}")
  endif()
endforeach()
find_program(MAN man)
if(MAN)
  foreach(page man1/shoalrun.1 man1/shoal-info.1 man1/shoal-cosmos.1 man7/shoal.7)
    execute_process(COMMAND ${MAN} --warnings -l ${prefix}/share/man/${page} RESULT_VARIABLE rc
                    OUTPUT_VARIABLE text ERROR_VARIABLE warnings TIMEOUT 60)
    if(NOT rc STREQUAL "0" OR warnings OR NOT text MATCHES "NAME")
      message(FATAL_ERROR "man ${page} does not render cleanly (${rc}):\n${warnings}")
    endif()
  endforeach()
endif()

# ---- pkg-config --------------------------------------------------------------
find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
  message(STATUS "pkg-config is not installed: SKIPPED the pkg-config half of this test "
                 "(Debian: apt-get install pkg-config)")
  return()
endif()
# PKG_CONFIG_LIBDIR replaces the system search path, so only this prefix's
# shoal.pc can be found.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
set(ENV{PKG_CONFIG_LIBDIR} ${prefix}/${LIBDIR}/pkgconfig)
step("pkg-config" ${PKG_CONFIG} --cflags --libs shoal)
string(STRIP "${step_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
# The compiler of the build, not whatever `cc` is: a sanitized libshoal
# needs the matching sanitizer runtime.
step("compile with pkg-config flags" ${C_COMPILER} -std=c11 -Wall -Wextra -Werror
     ${CONSUMER_DIR}/consumer.c ${pc_flags} -o ${WORK_DIR}/consumer_pc)
# No LD_LIBRARY_PATH: outside the loader's directories shoal.pc gives the run path.
unset(ENV{LD_LIBRARY_PATH})
step("run consumer_pc" ${WORK_DIR}/consumer_pc)
if(NOT step_output MATCHES "rank 0 of 1 got its pong")
  message(FATAL_ERROR "consumer_pc printed something unexpected:\n${step_output}")
endif()
message(STATUS "install test passed: CMake package and pkg-config")
