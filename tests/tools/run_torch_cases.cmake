# ctest driver: `tbe-verify check DIR` on every case folder (a folder holding case.json) directly
# under CASES_DIR, i.e. the PyTorch F.embedding_bag cases dumped by tests/data/dump_torch_cases.py.
# Each check must exit 0 (the oracle's verdict on the recorded output equals the case's `expect`).
# No case folders (not dumped yet): reports 0 cases and passes.
# Usage: cmake -DTBE_VERIFY=<binary> -DCASES_DIR=<dir> -P run_torch_cases.cmake
file(GLOB entries LIST_DIRECTORIES true "${CASES_DIR}/*")
list(SORT entries)
set(count 0)
set(failed "")
foreach(entry IN LISTS entries)
  if(NOT IS_DIRECTORY "${entry}" OR NOT EXISTS "${entry}/case.json")
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
message(STATUS "tbe-verify check: ${count} torch case(s) under ${CASES_DIR}, ${nfailed} failed")
if(nfailed GREATER 0)
  string(REPLACE ";" "\n  " lines "${failed}")
  message(FATAL_ERROR "tbe-verify check failed on:\n  ${lines}")
endif()
