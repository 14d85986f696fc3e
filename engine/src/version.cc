#include "sluice/version.h"

namespace sluice {

std::string_view LibraryVersion() { return SLUICE_VERSION; }

}  // namespace sluice
