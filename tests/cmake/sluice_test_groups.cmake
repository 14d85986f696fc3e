# Registers a gtest binary's cases with CTest in groups, one process per
# group instead of one per case (SluiceTestGroups.cmake says why). Two uses:
#
# Script mode (cmake -P), after the binary is linked: writes its case list.
#   -D TEST_EXECUTABLE=...  -D TEST_WORKING_DIR=...  -D LIST_FILE=...
#
# Included by the CTest file of the test directory, each time ctest starts:
#   sluice_register_test_groups(EXECUTABLE LIST_FILE WORKING_DIR MAX_GROUP
#                               COST_PER_CASE [property value]...)
# adds one test per group: the cases of one test suite with one value of the
# test parameter (Backends/Completion.*/postgres; EventPublisher.* for a
# suite without one), in parts of at most MAX_GROUP cases ("... part 2"),
# each run with a --gtest_filter naming its cases, with COST (which orders a
# run CTest has no times for yet) COST_PER_CASE times its number of cases.
# MAX_GROUP 1, or SLUICE_CTEST_PER_CASE=1 in ctest's environment, registers
# each case on its own, as gtest_discover_tests does.
cmake_minimum_required(VERSION 3.25)

# Reads LIST_FILE (--gtest_list_tests output) into `groups_var`, the group
# keys in order, with each group's cases ("Suite.Case") in
# <groups_var>_<index>, and the disabled cases in <groups_var>_disabled.
function(sluice_read_test_groups list_file groups_var)
  file(STRINGS "${list_file}" lines)
  set(groups "")
  set(disabled "")
  set(suite "")
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "^Running main\\(\\)")
      continue()
    endif()
    if(NOT line MATCHES "^  ")
      string(REGEX REPLACE "\\.( *#.*)?$" "" suite "${line}")
      continue()
    endif()
    string(STRIP "${line}" case_line)
    string(REGEX REPLACE " +#.*" "" case_name "${case_line}")
    set(full "${suite}.${case_name}")
    if(suite MATCHES "(^|/)DISABLED_" OR case_name MATCHES "^DISABLED_")
      list(APPEND disabled "${full}")
      continue()
    endif()
    set(key "${suite}.*")
    if(case_line MATCHES "# GetParam\\(\\) = ")
      string(REGEX REPLACE "^.*/" "" param "${case_name}")
      set(key "${suite}.*/${param}")
    endif()
    list(FIND groups "${key}" index)
    if(index EQUAL -1)
      list(LENGTH groups index)
      list(APPEND groups "${key}")
      set(group_${index} "")
    endif()
    list(APPEND group_${index} "${full}")
  endforeach()
  list(LENGTH groups count)
  set(${groups_var} "${groups}" PARENT_SCOPE)
  set(${groups_var}_disabled "${disabled}" PARENT_SCOPE)
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(index RANGE ${last})
      set(${groups_var}_${index} "${group_${index}}" PARENT_SCOPE)
    endforeach()
  endif()
endfunction()

function(sluice_add_test_group name executable working_dir filter cost)
  add_test("${name}" "${executable}" "--gtest_filter=${filter}")
  set_tests_properties("${name}" PROPERTIES WORKING_DIRECTORY "${working_dir}"
                       SKIP_RETURN_CODE 77 ${ARGN})
  if(NOT cost STREQUAL "")
    set_tests_properties("${name}" PROPERTIES COST ${cost})
  endif()
endfunction()

function(sluice_register_test_groups executable list_file working_dir
         max_group cost_per_case)
  sluice_read_test_groups("${list_file}" groups)
  if("$ENV{SLUICE_CTEST_PER_CASE}" STREQUAL "1")
    set(max_group 1)
    set(cost_per_case "")
  endif()
  list(LENGTH groups group_count)
  if(group_count GREATER 0)
    math(EXPR last "${group_count} - 1")
    foreach(index RANGE ${last})
      list(GET groups ${index} key)
      set(cases ${groups_${index}})
      list(LENGTH cases case_count)
      # Parts of near-equal size, each at most max_group cases.
      math(EXPR parts "(${case_count} + ${max_group} - 1) / ${max_group}")
      math(EXPR per_part "(${case_count} + ${parts} - 1) / ${parts}")
      foreach(part RANGE 1 ${parts})
        math(EXPR first "(${part} - 1) * ${per_part}")
        list(SUBLIST cases ${first} ${per_part} chunk)
        list(LENGTH chunk chunk_count)
        if(chunk_count EQUAL 0)
          continue()
        endif()
        list(JOIN chunk ":" filter)
        set(cost "")
        if(NOT cost_per_case STREQUAL "")
          math(EXPR cost "${chunk_count} * ${cost_per_case}")
        endif()
        if(max_group EQUAL 1)
          set(name "${filter}")
        elseif(parts GREATER 1)
          set(name "${key} part ${part}")
        else()
          set(name "${key}")
        endif()
        sluice_add_test_group("${name}" "${executable}" "${working_dir}"
                              "${filter}" "${cost}" ${ARGN})
      endforeach()
    endforeach()
  endif()
  # Disabled cases stay visible as disabled tests.
  foreach(case IN LISTS groups_disabled)
    sluice_add_test_group("${case}" "${executable}" "${working_dir}"
                          "${case}" "" ${ARGN} DISABLED TRUE)
  endforeach()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  foreach(var TEST_EXECUTABLE TEST_WORKING_DIR LIST_FILE)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "sluice_test_groups.cmake: ${var} is not set")
    endif()
  endforeach()
  execute_process(
    COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
    WORKING_DIRECTORY "${TEST_WORKING_DIR}"
    TIMEOUT 60
    OUTPUT_VARIABLE listing
    ERROR_VARIABLE listing_errors
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "listing the tests of ${TEST_EXECUTABLE} failed "
                        "(${result}):\n${listing}${listing_errors}")
  endif()
  # gtest names are identifiers joined by '/' and '.'; a ';' or a bracket
  # would need quoting that the lists above do not do.
  if(listing MATCHES "[][;\\\\]")
    message(FATAL_ERROR "${TEST_EXECUTABLE} lists a test name with ';', '\\' "
                        "or a bracket, which sluice_test_groups.cmake cannot "
                        "register:\n${listing}")
  endif()
  file(WRITE "${LIST_FILE}" "${listing}")
endif()
