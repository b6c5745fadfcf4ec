# ctest driver: `tbe-verify check DIR...` and `tbe-verify replay DIR` on backward, ikbo-lce and
# ikbo-attention case folders written by test_tools "[.write-cli-cases]": exit statuses (0 every
# case as expected, 1 a mismatch, 3 an unreadable folder, 2 a bad command line) and the report
# lines (count line, worst element with its coordinates, the rule of an expected failure).
# Usage: cmake -DTBE_VERIFY=<binary> -DTEST_TOOLS=<binary> -DCASES_DIR=<dir> -P run_check_cli.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -E env TBE_CLI_CASES_DIR=${CASES_DIR}
                        "${TEST_TOOLS}" "[.write-cli-cases]"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the case folders failed (${rc}):\n${out}${err}")
endif()

# run(<expected exit status> <regex the output must match> args...)
function(run expected regex)
  execute_process(COMMAND "${TBE_VERIFY}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " line "${ARGN}")
  if(NOT rc EQUAL expected)
    message(FATAL_ERROR "tbe-verify ${line}: exit ${rc}, expected ${expected}\n${out}${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "tbe-verify ${line}: no match for '${regex}' in\n${out}${err}")
  endif()
  message(STATUS "tbe-verify ${line}: exit ${rc} as expected")
endfunction()

set(d "${CASES_DIR}")
run(0 "check: 4 cases, 4 as expected, 0 mismatched, 0 unreadable"
    check ${d}/bwd-pass ${d}/lce-pass ${d}/attention-pass ${d}/bwd-expect-fail)
run(0 "rule the case names: test: one weight moved outside its enclosure\noracle worst element \\(weights\\): table [0-9]+, row [0-9]+, column 1 \\(flat [0-9]+\\)"
    check ${d}/bwd-expect-fail)
run(1 "MISMATCH: expected pass, got fail.*check: 2 cases, 1 as expected, 1 mismatched, 0 unreadable"
    check ${d}/bwd-pass ${d}/bwd-mismatch)
run(3 "cannot read the case" check ${d}/bwd-pass ${d}/no-such-case)
run(0 "verdict: cpu passed, gpu (skipped|passed)" replay ${d}/bwd-pass)
run(0 "verdict: cpu passed, gpu (skipped|passed)" replay ${d}/lce-pass)
run(0 "verdict: cpu passed, gpu (skipped|passed)" replay ${d}/attention-pass)
run(2 "replay takes exactly one CASE_DIR" replay ${d}/bwd-pass ${d}/lce-pass)
file(REMOVE_RECURSE "${CASES_DIR}")
