# ctest driver: `tbe-verify check DIR` on every case folder (a folder holding case.json) directly
# under CASES_DIR, i.e. the recorded outside implementations of tests/data/
# (tests/data/dump_torch_cases.py, tests/data/record_*.py). Each check must exit 0 (the oracle's
# verdict on the recorded output equals the case's `expect`). OPERATORS (a ;-list, default
# "forward") names the operators `tbe-verify check` judges; folders of other operators are counted
# and listed as not judged here (python/tests/test_recorded_cases.py reads and judges them).
# No case folders (not recorded yet): reports 0 cases and passes.
# REQUIRE_CASES=ON: fails unless at least one folder was judged and none was left out.
# Usage: cmake -DTBE_VERIFY=<binary> -DCASES_DIR=<dir> [-DOPERATORS=forward,backward]
#              [-DREQUIRE_CASES=ON]
#              -P run_torch_cases.cmake
cmake_minimum_required(VERSION 3.25)  # IN_LIST, string(JSON)
if(NOT DEFINED OPERATORS)
  set(OPERATORS forward)
endif()
string(REPLACE "," ";" OPERATORS "${OPERATORS}")  # a comma list from add_test survives quoting
file(GLOB entries LIST_DIRECTORIES true "${CASES_DIR}/*")
list(SORT entries)
set(count 0)
set(skipped 0)
set(failed "")
foreach(entry IN LISTS entries)
  if(NOT IS_DIRECTORY "${entry}" OR NOT EXISTS "${entry}/case.json")
    continue()
  endif()
  file(READ "${entry}/case.json" json)
  string(JSON operator ERROR_VARIABLE json_error GET "${json}" operator)
  if(json_error)
    set(operator forward)  # no operator key: tbe-verify check reads it as a forward case
  endif()
  if(NOT operator IN_LIST OPERATORS)
    math(EXPR skipped "${skipped} + 1")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  execute_process(COMMAND "${TBE_VERIFY}" check "${entry}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    list(APPEND failed "${entry} (exit ${rc})")
  endif()
endforeach()
list(LENGTH failed nfailed)
message(STATUS "tbe-verify check: ${count} case(s) (${OPERATORS}) under ${CASES_DIR}, "
               "${nfailed} failed; ${skipped} folder(s) of other operators not judged here")
if(REQUIRE_CASES AND (count EQUAL 0 OR skipped GREATER 0))
  message(FATAL_ERROR "REQUIRE_CASES: ${count} case(s) judged and ${skipped} folder(s) left out "
                      "under ${CASES_DIR}: every committed folder must be judged")
endif()
if(nfailed GREATER 0)
  string(REPLACE ";" "\n  " lines "${failed}")
  message(FATAL_ERROR "tbe-verify check failed on:\n  ${lines}")
endif()
