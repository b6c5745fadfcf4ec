# ctest no_mutant_symbols: none of FILES (a normal build's tbe-verify and libtbe_optimized.a) holds
# a symbol or string of the mutation build: the fault selection (tbe::cuda::active_fault,
# MutantTag), the environment variable TBE_MUTANT, the start-up announcement.
find_program(NM nm REQUIRED)
foreach(f IN LISTS FILES)
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "no_mutant_symbols: '${f}' does not exist")
  endif()
  execute_process(COMMAND ${NM} -C "${f}" OUTPUT_VARIABLE syms ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "no_mutant_symbols: nm ${f} failed: ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]*(active_fault|MutantTag|fault_announcement)[^\n]*" hits "${syms}")
  file(STRINGS "${f}" strings REGEX "TBE_MUTANT|tbe mutation build")
  if(hits OR strings)
    message(FATAL_ERROR "no_mutant_symbols: ${f} holds mutation-build code: ${hits} ${strings}")
  endif()
  message(STATUS "no_mutant_symbols: ${f}: none")
endforeach()
