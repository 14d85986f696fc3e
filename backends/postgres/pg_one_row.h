// A batch statement's shape for a batch of one row. A batch reaches the
// server as one array per column, spread into rows by `unnest(...) WITH
// ORDINALITY`. For a single row that machinery (a function scan into a
// tuplestore, and the sorts and joins on `ord` above it) is most of the
// statement's fixed cost: a task and its message took 46.9 us to insert
// that way and 37.2 us in this shape (docs/decisions/0083). The one-row
// shape reads element 1 of each array instead: the same parameters and the
// same columns, so callers build them as for any batch.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_ONE_ROW_H_
#define SLUICE_BACKENDS_POSTGRES_PG_ONE_ROW_H_

#include <string>
#include <string_view>

namespace sluice::postgres_internal {

// `sql` with each `unnest(a, b, ...) WITH ORDINALITY AS x(...)` whose
// arguments hold no parentheses replaced by `(SELECT (a)[1], (b)[1], ...,
// 1::bigint) AS x(...)`. Other text, and any other unnest, is kept.
std::string OneRowShape(std::string_view sql);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_ONE_ROW_H_
