// The floor of a memory W1 job under the store's model, with no engine.
//
// MemoryModelFloor moves `jobs` one-step jobs through the rows DESIGN.md's
// memory store keeps for them, in plain containers under one mutex: a run
// (its id, flow, status, input, output, times; indexed by id, by start and,
// once ended, by finish), its task (its own input `{"run": input}`, status,
// attempt, times, worker, output) and the task's message (a ready queue in
// send order, moved to a read set when claimed, deleted at the finish).
// One producer thread starts the jobs in batches of 500 as W1 does; one
// worker thread claims 100 at a time, hands each claimed input to W1's
// handler (the run's input, copied as the output) and finishes the batch.
//
// Payloads are held one of two ways. Owned: each row and the handler's
// claim hold their own boost::json value, copied from the caller's, as
// every backend's records and the public Json type do. Shared: one
// immutable, counted value per payload, handed over by the caller and
// never copied (the step's input `{"run": input}` is still built once).
//
// Nothing here is checked or recovered: no events, plans, flows, ledger,
// retries, metrics or undo. It answers one question, how many jobs a
// second these rows allow on this machine, so that memory W1 can be read
// against what its model costs (docs/benchmarks.md).
#ifndef SLUICE_BENCH_MEMORY_FLOOR_H_
#define SLUICE_BENCH_MEMORY_FLOOR_H_

namespace sluice::bench {

// Jobs per second; `jobs` > 0.
double MemoryModelFloor(int jobs, bool shared_payloads);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_MEMORY_FLOOR_H_
