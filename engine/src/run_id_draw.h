// The ids one call gives the runs it creates. A call may plan its runs more
// than once: before its transaction and again in it (decision 0089), or
// again after its known alias moved. Each plan takes the same ids in the
// same order, so EngineOptions::run_id_source is called once for each run
// a plan of the call needed, not once per plan.
#ifndef SLUICE_ENGINE_RUN_ID_DRAW_H_
#define SLUICE_ENGINE_RUN_ID_DRAW_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "sluice/ids.h"

namespace sluice {

class RunIdDraw {
 public:
  // `source` as EngineOptions::run_id_source: unset means RunId::Random().
  explicit RunIdDraw(const std::function<RunId()>& source) : source_(source) {}

  // Starts a plan: its first run takes the call's first id.
  void Restart() { next_ = 0; }

  // The next run's id in this plan: one an earlier plan drew, else a new one.
  RunId Next() {
    if (next_ == drawn_.size()) {
      drawn_.push_back(source_ ? source_() : RunId::Random());
    }
    return drawn_[next_++];
  }

 private:
  const std::function<RunId()>& source_;
  std::vector<RunId> drawn_;
  size_t next_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_RUN_ID_DRAW_H_
