# Runs a libFuzzer target for a bounded time, starting from a committed
# corpus that it does not modify: libFuzzer writes new inputs only to the
# first corpus directory given, here an emptied scratch directory, and
# crash/timeout reproducers to WORK_DIR/.
#   cmake -DFUZZER=... -DCORPUS=... -DWORK_DIR=... -DSECONDS=... -P run_fuzzer.cmake
foreach(v FUZZER CORPUS WORK_DIR SECONDS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_fuzzer.cmake: ${v} not set")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${CORPUS}")
  message(FATAL_ERROR "no corpus directory ${CORPUS}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/new")
execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix=${WORK_DIR}/ "${WORK_DIR}/new" "${CORPUS}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB artifacts "${WORK_DIR}/crash-*" "${WORK_DIR}/timeout-*" "${WORK_DIR}/oom-*" "${WORK_DIR}/leak-*")
  message(FATAL_ERROR "${FUZZER} failed (exit ${rc}); reproducers: ${artifacts}\n"
                      "Replay one with: ${FUZZER} FILE; once fixed, add it to ${CORPUS}.")
endif()
