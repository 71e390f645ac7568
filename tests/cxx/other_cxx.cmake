# cmake -P script behind cxx.other_compiler_*: builds cxx_app.cc and
# null_crl.cc with COMPILER at C++STD against the build's libshoal and runs
# them.  Inputs (-D): COMPILER, STD, SRC_DIR, INCLUDE, LIB, SHOALRUN, WORK_DIR.
cmake_minimum_required(VERSION 3.20)
file(MAKE_DIRECTORY ${WORK_DIR})
get_filename_component(libdir ${LIB} DIRECTORY)
set(flags -std=c++${STD} -Wall -Wextra -Werror -pedantic -I${INCLUDE})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
  message("${out}")
  if(NOT rc STREQUAL "0")
    list(JOIN ARGN " " cmdline)
    message(FATAL_ERROR "${what} failed (${rc}): ${cmdline}")
  endif()
endfunction()

step("compile cxx_app" ${COMPILER} ${flags} ${SRC_DIR}/cxx_app.cc ${LIB} -Wl,-rpath,${libdir}
     -o ${WORK_DIR}/cxx_app)
step("run cxx_app" ${SHOALRUN} --timeout 60 -n 2 ${WORK_DIR}/cxx_app)
step("compile null_crl" ${COMPILER} ${flags} -DSHOAL_CRL_NULL ${SRC_DIR}/null_crl.cc -o ${WORK_DIR}/null_crl)
step("run null_crl" ${WORK_DIR}/null_crl)
