// A test's own libpq connection, to look at a Postgres database from
// outside the backend: pg_stat_activity, row counts, terminating sessions.
// Failures are test failures (ADD_FAILURE), and queries return what they
// could.
#ifndef SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_
#define SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::testing {

class SqlSession {
 public:
  // Fails the test and returns an unusable session if `url` can't be
  // reached; check ok().
  explicit SqlSession(const std::string& url)
      : connection_(PQconnectdb(url.c_str()), &PQfinish) {
    if (PQstatus(connection_.get()) != CONNECTION_OK) {
      ADD_FAILURE() << "cannot connect to the test database: "
                    << PQerrorMessage(connection_.get());
      return;
    }
    PQsetNoticeProcessor(
        connection_.get(), [](void*, const char*) {}, nullptr);
  }

  bool ok() const { return PQstatus(connection_.get()) == CONNECTION_OK; }

  // Every row of one statement, each value as text ("" for NULL). Values
  // are bound as text parameters $1, $2, ...
  std::vector<std::vector<std::string>> Rows(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<std::vector<std::string>> rows;
    if (!ok()) return rows;
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* result = PQexecParams(connection_.get(), sql.c_str(),
                                    static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(result);
    }
    for (int r = 0; r < PQntuples(result); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(result); ++c) {
        row.push_back(PQgetvalue(result, r, c));
      }
      rows.push_back(std::move(row));
    }
    PQclear(result);
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
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_POSTGRES_SQL_H_
