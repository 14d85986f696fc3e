// A test's own libpq connection, to look at a Postgres database from
// outside the backend: pg_stat_activity, row counts, terminating sessions,
// query plans.
// Statements run through the backend's plain-statement helpers
// (pg_session.h). Failures are test failures (ADD_FAILURE), and queries
// return what they could.
#ifndef SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_
#define SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_

#include <libpq-fe.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "pg_session.h"

namespace sluice::testing {

// Every value of `result` as text, row by row; NULL as nullopt.
inline std::vector<std::vector<std::optional<std::string>>> TextRows(
    const postgres_internal::Result& result) {
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (int r = 0; r < result.rows(); ++r) {
    std::vector<std::optional<std::string>> row;
    for (int c = 0; c < PQnfields(result.get()); ++c) {
      if (PQgetisnull(result.get(), r, c)) {
        row.push_back(std::nullopt);
      } else {
        row.push_back(std::string(PQgetvalue(result.get(), r, c)));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The plan of `sql` with `params` (EXPLAIN's lines), as `session` plans it.
inline std::string PlanText(postgres_internal::Session& session,
                            std::string_view sql,
                            const std::vector<std::string>& params) {
  absl::StatusOr<postgres_internal::Result> plan =
      session.Query("EXPLAIN " + std::string(sql), params, "explain");
  EXPECT_TRUE(plan.ok()) << plan.status() << "\n" << sql;
  if (!plan.ok()) return "";
  std::string text;
  for (const std::vector<std::optional<std::string>>& row : TextRows(*plan)) {
    text += row.at(0).value_or("") + "\n";
  }
  return text;
}

class SqlSession {
 public:
  // Fails the test and returns an unusable session if `url` can't be
  // reached; check ok().
  explicit SqlSession(const std::string& url)
      : session_(postgres_internal::Session::Open(url)) {
    if (!session_.ok()) {
      ADD_FAILURE() << "cannot connect to the test database: "
                    << session_.status();
    }
  }

  bool ok() const { return session_.ok(); }

  // Runs a script of one or more statements (no parameters); fails the
  // test if it fails.
  void Script(const std::string& sql) {
    if (!ok()) return;
    absl::Status status = session_->Execute(sql, "test script");
    EXPECT_TRUE(status.ok()) << status << "\n" << sql;
  }

  // Every row of one statement, each value as text ("" for NULL). Values
  // are bound as text parameters $1, $2, ...
  std::vector<std::vector<std::string>> Rows(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<std::vector<std::string>> rows;
    if (!ok()) return rows;
    absl::StatusOr<postgres_internal::Result> result =
        session_->Query(sql, params, "test query");
    if (!result.ok()) {
      ADD_FAILURE() << sql << ": " << result.status();
      return rows;
    }
    for (std::vector<std::optional<std::string>>& values : TextRows(*result)) {
      std::vector<std::string> row;
      for (std::optional<std::string>& value : values) {
        row.push_back(std::move(value).value_or(""));
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  // The first column of the first row, if any.
  std::optional<std::string> Value(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<std::vector<std::string>> rows = Rows(sql, params);
    if (rows.empty() || rows[0].empty()) return std::nullopt;
    return rows[0][0];
  }

  // A count(*)-like integer query; -1 if it returned nothing.
  int64_t Count(const std::string& sql,
                const std::vector<std::string>& params = {}) {
    std::optional<std::string> value = Value(sql, params);
    return value.has_value() ? std::stoll(*value) : -1;
  }

 private:
  absl::StatusOr<postgres_internal::Session> session_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_
