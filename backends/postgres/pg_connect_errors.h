// Why a connection could not be made, as a status whose code says whether
// retrying can help, and never showing a secret from the URL.
//
//   malformed URL, bad option value          -> kInvalidArgument
//   wrong password, unknown role, no entry
//   in pg_hba.conf (class 28), no password
//   given where one is needed                -> kPermissionDenied
//   database does not exist (3D000)          -> kNotFound
//   anything else the server says            -> its SQLSTATE's code
//   (pg_status.h) refused, unreachable, no such host       -> kUnavailable
//   (retry later)
//
// libpq's own messages about a URL it can't parse quote the offending part,
// which may be the password (a bad percent-escape in it): every quoted part
// of such a message is replaced by "..." unless it is a connection option's
// name, and the URL itself is never shown.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_CONNECT_ERRORS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_CONNECT_ERRORS_H_

#include <libpq-fe.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sluice::postgres_internal {

// OK, or kInvalidArgument if libpq can't parse `url` or if it has an
// unescaped '@' that would make libpq read part of the password as a host
// or database name.
absl::Status CheckConnectionUrl(const std::string& url);

// The status for a connection that failed. Its SQLSTATE is read from the
// error message, so the connection must have had PQERRORS_VERBOSE set
// while connecting.
absl::Status ConnectFailure(PGconn* connection);

// `message` with the text between double quotes replaced by "...", except
// the names of libpq's connection options.
std::string WithoutQuotedText(std::string_view message);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_CONNECT_ERRORS_H_
