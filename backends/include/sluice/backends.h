// Opening a backend by URL.
//
//   memory:                 a fresh in-process memory backend
//   sqlite:PATH             an SQLite database file (created if missing);
//   sqlite:PATH?synchronous=full   commits durable against power loss too
//                           (default synchronous=normal: against crashes)
//   postgres://... or       Postgres + pgmq, a libpq URL; the database must be
//   postgresql://...        migrated first (sluice/postgres.h), and
//                           OpenPostgres() takes pool options
#ifndef SLUICE_BACKENDS_H_
#define SLUICE_BACKENDS_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "sluice/backend.h"

namespace sluice {

// kInvalidArgument for a URL no backend claims, naming the accepted forms.
absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(std::string_view url);

}  // namespace sluice

#endif  // SLUICE_BACKENDS_H_
