// The parts of a flow's canonical JSON that jobs added: the queue mode, a
// shared queue, the default priority and retention. Written only when not
// the default, so definitions stored before them read back unchanged.
#ifndef SLUICE_ENGINE_FLOW_SHAPE_SHARING_H_
#define SLUICE_ENGINE_FLOW_SHAPE_SHARING_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "boost/json/object.hpp"
#include "sluice/flow.h"

namespace sluice {

// Adds to `options` (the "options" object of the root).
void PutSharingOptions(const FlowShape& shape, boost::json::object& options);
// Reads the queue mode from `root` and the rest from `options`.
absl::Status ReadSharingOptions(const boost::json::object& root,
                                const boost::json::object& options,
                                FlowShape& shape);
// Appends each difference as a sentence.
void CompareSharingOptions(const FlowShape& here, const FlowShape& stored,
                           std::vector<std::string>& out);

}  // namespace sluice

#endif  // SLUICE_ENGINE_FLOW_SHAPE_SHARING_H_
