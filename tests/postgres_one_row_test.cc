// A batch statement's one-row shape (pg_one_row.h); no server. The shapes
// the backend sends run in every test that writes a single run, task or
// step state.
#include <string>

#include "gtest/gtest.h"
#include "pg_one_row.h"
#include "pg_queue_sql.h"
#include "pg_sql.h"
#include "pg_sql_tasks.h"

namespace sluice::testing {
namespace {

using postgres_internal::OneRowShape;

TEST(PostgresOneRowTest, OneRowShape_ReadsElementOneOfEachArray) {
  EXPECT_EQ(OneRowShape("INSERT INTO t (a, b) SELECT i.a, i.b FROM "
                        "unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS "
                        "i(a, b, ord) ORDER BY i.ord"),
            "INSERT INTO t (a, b) SELECT i.a, i.b FROM (SELECT "
            "($1::uuid[])[1], ($2::int[])[1], 1::bigint) AS i(a, b, ord) "
            "ORDER BY i.ord");
}

TEST(PostgresOneRowTest, OneRowShape_KeepsOtherUnnests) {
  // Without ordinality (its rows are not numbered), and with an argument
  // that is itself an expression.
  const std::string plain = "SELECT * FROM unnest($1::int[]) AS u(x)";
  EXPECT_EQ(OneRowShape(plain), plain);
  const std::string nested =
      "SELECT * FROM unnest(ARRAY(SELECT 1)) WITH ORDINALITY AS u(x, ord)";
  EXPECT_EQ(OneRowShape(nested), nested);
}

TEST(PostgresOneRowTest, OneRowShape_OfEachInsert_LeavesNoNumberedUnnest) {
  const postgres_internal::QueueSql queue("jobs_q");
  for (const std::string_view sql :
       {std::string_view(postgres_internal::sql::kInsertRuns),
        postgres_internal::sql::kInsertTasks.checked,
        postgres_internal::sql::kInsertTasks.unchecked,
        postgres_internal::sql::kInsertStepStates.checked,
        postgres_internal::sql::kInsertStepStates.unchecked,
        std::string_view(queue.send_with_tasks),
        std::string_view(queue.send_with_tasks_of_new_runs)}) {
    const std::string shaped = OneRowShape(sql);
    EXPECT_EQ(shaped.find("WITH ORDINALITY"), std::string::npos) << shaped;
    EXPECT_NE(shaped.find("[1], 1::bigint) AS "), std::string::npos) << shaped;
    // The run check's own unnest (not numbered) is kept.
    EXPECT_EQ(
        shaped.find("unnest($1::uuid[]) AS d(run_id)") != std::string::npos,
        sql.find("runs_exist") != std::string::npos)
        << shaped;
  }
}

}  // namespace
}  // namespace sluice::testing
