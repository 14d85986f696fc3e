// Enqueuing in the host's own database transaction, so a run exists if and
// only if the host's own writes commit (River's InsertTx).
//
// The host borrows a backend on its open connection (BorrowSqlite in
// sluice/sqlite.h, BorrowPostgres in sluice/postgres.h) and starts runs
// through a HostTransaction on it:
//
//   PQexec(conn, "BEGIN");
//   PQexec(conn, "INSERT INTO orders ...");
//   auto borrowed = sluice::BorrowPostgres(conn);
//   sluice::HostTransaction host = engine->WithHostTransaction(**borrowed);
//   absl::StatusOr<sluice::EnqueueResult> job =
//       host.Enqueue("send_invoice", payload);
//   PQexec(conn, "COMMIT");  // or ROLLBACK: then no run ever existed
//   host.Committed();
//
// Each call is the engine call of the same name, with the same validation
// and results, run as a savepoint inside the host's transaction: a call that
// fails undoes its own writes and leaves the host's transaction usable; a
// call that succeeds is committed or rolled back by the host. Nothing is
// visible to workers before the host commits.
//
// Wake-ups and events. On Postgres the NOTIFY a new run sends is delivered
// when the host commits, so workers anywhere wake then. Committed() also
// wakes this process's idle workers and publishes the runs' events to
// Engine::Subscribe subscribers; without it (a rollback, or a host that
// forgets) events are never published and workers of an SQLite database
// find the runs at their next poll.
//
// Completing a task together with the handler's own write is the other half:
// see TaskContext::WriteOnCompletion (sluice/task_context.h).
//
// Thread-safety: a HostTransaction is used by the thread that owns the
// host's connection, like the connection itself. The engine and the borrowed
// backend must outlive it.
#ifndef SLUICE_HOST_TRANSACTION_H_
#define SLUICE_HOST_TRANSACTION_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/job.h"
#include "sluice/json.h"

namespace sluice {

class HostTransaction {
 public:
  // Prefer Engine::WithHostTransaction. `borrowed` must be a backend
  // borrowed on the host's connection to the engine's database; a backend
  // of another kind than the engine's is kInvalidArgument at each call.
  HostTransaction(Engine& engine, Backend& borrowed);
  HostTransaction(HostTransaction&&) noexcept;
  HostTransaction& operator=(HostTransaction&&) noexcept;
  ~HostTransaction();

  // As Engine::Enqueue / EnqueueMany / StartRun, in the host's transaction.
  absl::StatusOr<EnqueueResult> Enqueue(const Job& job, const Json& payload,
                                        const EnqueueOptions& options = {});
  absl::StatusOr<EnqueueResult> Enqueue(std::string_view job_name,
                                        const Json& payload,
                                        const EnqueueOptions& options = {});
  absl::StatusOr<std::vector<EnqueueResult>> EnqueueMany(
      std::string_view job_name, std::span<const Engine::EnqueueItem> items);
  absl::StatusOr<EnqueueResult> StartRun(std::string_view flow_slug,
                                         const Json& input,
                                         const EnqueueOptions& options = {});

  // Call after the host's COMMIT succeeded: wakes this process's workers on
  // the new runs' queues and publishes their events. Calls made after it
  // start a new batch, for the host's next transaction.
  void Committed();
  // Call after the host rolled back (or instead of Committed() when unsure):
  // forgets the wake-ups and events gathered so far.
  void RolledBack();

 private:
  struct Pending;
  absl::Status CheckBackend() const;

  Engine* engine_;
  Backend* borrowed_;
  std::unique_ptr<Pending> pending_;
};

}  // namespace sluice

#endif  // SLUICE_HOST_TRANSACTION_H_
