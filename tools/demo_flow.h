// The demo: a flow that reads like its picture.
//
//   split_documents ──> count_words (map, one task per document) ──> totals
//                                                                └──> shout
//
// `shout` runs only when the run input asks for it (a condition).
#ifndef SLUICE_TOOLS_DEMO_FLOW_H_
#define SLUICE_TOOLS_DEMO_FLOW_H_

#include "sluice/flow.h"

namespace sluice::demo {

Flow WordStatsFlow();
Json DemoInput();

}  // namespace sluice::demo

#endif  // SLUICE_TOOLS_DEMO_FLOW_H_
