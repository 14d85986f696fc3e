# sluice_test_groups(TARGET [MAX_GROUP n] [COST_PER_CASE c] [PROPERTIES ...])
# registers a gtest binary's cases with CTest, like gtest_discover_tests,
# but a group of cases per process instead of one process per case
# (docs/decisions/0045-ctest-groups.md).
#
# Why: most cases take milliseconds, but each process costs its start under
# AddressSanitizer, and with 2,300 cases those starts were a large part of
# the suite's time. A group is one suite's cases for one test parameter (a
# backend, a shard), at most MAX_GROUP (default 25) of them, so that
# `ctest -j2` still has many tests to balance and `ctest -R` still selects
# by suite and backend. MAX_GROUP 1 keeps one process per case, for binaries
# whose cases each take long (real processes), where grouping saves nothing
# and would only make the tail of a run longer. COST_PER_CASE (default 1,
# roughly seconds) tells CTest what a case costs before it has timed the
# tests (a fresh build, as in CI), so that the longest start first.
#
# A group passes when every case in it passes; its output names each case
# (gtest's [ RUN ] and [ FAILED ] lines). The binaries link
# sluice_gtest_main, which exits 77 (SKIP_RETURN_CODE) when every case that
# ran was skipped, such as Postgres cases without SLUICE_TEST_POSTGRES_URL.
# SLUICE_CTEST_PER_CASE=1 in ctest's environment registers one process per
# case instead (to compare, or to find a case that fails only after another
# one in the same process).
#
# The case list is written after each link; CTest groups it when it starts
# (tests/cmake/sluice_test_groups.cmake), so changing MAX_GROUP or
# COST_PER_CASE relinks nothing.
set(SLUICE_TEST_GROUPS_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/sluice_test_groups.cmake")

function(sluice_test_groups target)
  cmake_parse_arguments(arg "" "MAX_GROUP;COST_PER_CASE" "PROPERTIES" ${ARGN})
  if(NOT arg_MAX_GROUP)
    set(arg_MAX_GROUP 25)
  endif()
  if(NOT arg_COST_PER_CASE)
    set(arg_COST_PER_CASE 1)
  endif()
  set(base "${CMAKE_CURRENT_BINARY_DIR}/${target}_cases")
  add_custom_command(
    TARGET ${target} POST_BUILD
    BYPRODUCTS "${base}.txt"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "LIST_FILE=${base}.txt"
            -P "${SLUICE_TEST_GROUPS_SCRIPT}"
    VERBATIM)
  set(properties "")
  foreach(property IN LISTS arg_PROPERTIES)
    string(APPEND properties " [==[${property}]==]")
  endforeach()
  string(CONCAT content
    "if(EXISTS \"${base}.txt\")\n"
    "  include(\"${SLUICE_TEST_GROUPS_SCRIPT}\")\n"
    "  sluice_register_test_groups(\"$<TARGET_FILE:${target}>\" \"${base}.txt\"\n"
    "    \"${CMAKE_CURRENT_BINARY_DIR}\" ${arg_MAX_GROUP} ${arg_COST_PER_CASE}\n"
    "   ${properties})\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  file(GENERATE OUTPUT "${base}_include.cmake" CONTENT "${content}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
               "${base}_include.cmake")
endfunction()
