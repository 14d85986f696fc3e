// The main of every gtest binary that tests/cmake/SluiceTestGroups.cmake
// registers: gtest's own, except that a run in which every selected case was
// skipped (Postgres cases without SLUICE_TEST_POSTGRES_URL, say) exits 77,
// which CTest reports as skipped (SKIP_RETURN_CODE). One process runs a group
// of cases, so "[  SKIPPED ]" in its output can't mark the whole group
// skipped: a group with a failure and a skip would hide the failure.
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {
constexpr int kAllSkipped = 77;
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (status == 0 && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    return kAllSkipped;
  }
  return status;
}
