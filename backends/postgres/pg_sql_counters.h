// The Postgres backend's counter moves checked on the server
// (internal::CheckedCounterMoves), kept beside pg_sql.h under its rules.
// Each is the returning statement of pg_sql.h in a CTE `u` (slot, counters),
// then one row that raises when a slot's row was not found
// (sluice.require_found: "run ... does not exist", kNotFound) or its new
// counters are not the expected ones, the last parameters, one element per
// slot (sluice.require_counters, migration 0019: kInternal). Nobody waits
// for the row: a raise aborts the transaction, and COMMIT reports it.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SQL_COUNTERS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SQL_COUNTERS_H_

#include <cstddef>

#include "pg_sql.h"

namespace sluice::postgres_internal::sql {

// Between them, `'<what>', <missing text>, <differs text>`: each a scalar
// subquery, NULL when nothing is wrong.
inline constexpr char kCheckCounters[] =
    "SELECT CASE WHEN c.missing IS NOT NULL THEN "
    "sluice.require_found(c.what, c.missing) WHEN c.differs IS NOT NULL THEN "
    "sluice.require_counters(c.differs) END FROM (SELECT ";
inline constexpr char kCheckCountersEnd[] = ") AS c(what, missing, differs)";

// A run's name where its slot found no row, and the message where its
// remaining_steps is not the expected one; `ids` and `expected` are the
// parameters of the run ids and of the expected counters.
template <size_t I, size_t E>
constexpr auto RunCountersCheck(const char (&ids)[I],
                                const char (&expected)[E]) {
  return Join(
      "'run', (SELECT min((", ids, "::uuid[])[e.slot]::text) FROM unnest(",
      expected,
      "::int[]) WITH ORDINALITY AS e(steps, slot) WHERE e.slot NOT IN "
      "(SELECT slot FROM u)), (SELECT min(format('run %s: remaining_steps is "
      "%s but the engine expected %s; nothing was changed', (",
      ids, "::uuid[])[e.slot], u.remaining_steps, e.steps)) FROM unnest(",
      expected,
      "::int[]) WITH ORDINALITY AS e(steps, slot) JOIN u ON u.slot = e.slot "
      "WHERE u.remaining_steps <> e.steps)");
}

// The same for a step: `steps` its index, `tasks` and `deps` the expected
// remaining_tasks and remaining_deps.
template <size_t I, size_t S, size_t T, size_t D>
constexpr auto StepCountersCheck(const char (&ids)[I], const char (&steps)[S],
                                 const char (&tasks)[T],
                                 const char (&deps)[D]) {
  return Join(
      "'step', (SELECT min(format('%s of run %s', (", steps,
      "::int[])[e.slot], (", ids, "::uuid[])[e.slot])) FROM unnest(", tasks,
      "::int[]) WITH ORDINALITY AS e(tasks, slot) WHERE e.slot NOT IN "
      "(SELECT slot FROM u)), (SELECT min(format('run %s step %s: counters "
      "are (tasks %s, deps %s) but the engine expected (%s, %s); nothing was "
      "changed', (",
      ids, "::uuid[])[e.slot], (", steps,
      "::int[])[e.slot], u.remaining_tasks, u.remaining_deps, e.tasks, "
      "e.deps)) FROM unnest(",
      tasks, "::int[], ", deps,
      "::int[]) WITH ORDINALITY AS e(tasks, deps, slot) JOIN u ON u.slot = "
      "e.slot WHERE (u.remaining_tasks, u.remaining_deps) IS DISTINCT FROM "
      "(e.tasks, e.deps))");
}

// kAddRunRemainingSteps; $3 the expected remaining_steps.
inline constexpr auto kAddRunRemainingStepsChecked =
    Join(kGenericPlan, "WITH u AS (", kAddRunRemainingSteps.text, ") ",
         kCheckCounters, RunCountersCheck("$1", "$3").text, kCheckCountersEnd);
// kUpdateRunsAndCounters; $8 the expected remaining_steps.
inline constexpr auto kUpdateRunsAndCountersChecked =
    Join(kGenericPlan, "WITH u AS (", kUpdateRunsAndCounters.text, ") ",
         kCheckCounters, RunCountersCheck("$1", "$8").text, kCheckCountersEnd);
// kAddStepCounters; $5, $6 the expected remaining_tasks, remaining_deps.
inline constexpr auto kAddStepCountersChecked = Join(
    kGenericPlan, "WITH u AS (", kAddStepCounters.text, ") ", kCheckCounters,
    StepCountersCheck("$1", "$2", "$5", "$6").text, kCheckCountersEnd);
// kUpdateStepStatesAndCounters; $12, $13 the expected counters.
inline constexpr auto kUpdateStepStatesAndCountersChecked =
    Join(kGenericPlan, "WITH u AS (", kUpdateStepStatesAndCounters.text, ") ",
         kCheckCounters, StepCountersCheck("$1", "$2", "$12", "$13").text,
         kCheckCountersEnd);

}  // namespace sluice::postgres_internal::sql

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SQL_COUNTERS_H_
