// Status propagation shorthands for Sluice's own sources.
#ifndef SLUICE_INTERNAL_STATUS_MACROS_H_
#define SLUICE_INTERNAL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status _status = (expr); !_status.ok()) return _status; \
  } while (0)

#define SLUICE_CONCAT_INNER(a, b) a##b
#define SLUICE_CONCAT(a, b) SLUICE_CONCAT_INNER(a, b)
#define SLUICE_ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL(SLUICE_CONCAT(_statusor_, __LINE__), lhs, expr)
#define SLUICE_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(*statusor)

#endif  // SLUICE_INTERNAL_STATUS_MACROS_H_
