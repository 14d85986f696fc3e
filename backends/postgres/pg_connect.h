// Opening a libpq connection with the backend's connection settings.
//
// Every connection the backend makes (the pool, the queue listener,
// migrations, schema checks) is opened by Connect(), so all of them get:
//  - TCP keepalives from PostgresOptions. They are passed to libpq before
//    the URL, so the URL's own keepalives* parameters win;
//  - a connect timeout for each address libpq tries: the URL's
//    connect_timeout (or PGCONNECT_TIMEOUT), else
//    PostgresOptions::connect_timeout. libpq enforces connect_timeout only
//    in its blocking connect; Connect() drives the non-blocking one and
//    enforces it itself, so that it can also read the SQLSTATE of a
//    refusal (pg_status.h).
// The statement timeout is a session setting: the pool's connections set it
// (StatementTimeoutSql).
#ifndef SLUICE_BACKENDS_POSTGRES_PG_CONNECT_H_
#define SLUICE_BACKENDS_POSTGRES_PG_CONNECT_H_

#include <libpq-fe.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {

using ConnectionHandle = std::unique_ptr<PGconn, decltype(&PQfinish)>;

// An open connection to `url`, notices silenced. kUnavailable if the server
// can't be reached or doesn't answer within the connect timeout; the other
// failures as pg_connect_errors.h maps them. No message shows the URL.
absl::StatusOr<ConnectionHandle> Connect(const std::string& url,
                                         const PostgresOptions& options);

// "SET statement_timeout = '1500ms'" for `options`, or "" when it is off or
// when the connection's own `options` parameter (from the URL or
// PGOPTIONS) sets statement_timeout already.
std::string StatementTimeoutSql(PGconn* connection,
                                const PostgresOptions& options);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_CONNECT_H_
