// The dashboard's static files (src/dashboard/assets/), embedded in the
// library at build time by cmake/EmbedFiles.cmake.
#ifndef SLUICE_DASHBOARD_ASSETS_H_
#define SLUICE_DASHBOARD_ASSETS_H_

#include <span>
#include <string_view>

namespace sluice::dashboard {

struct EmbeddedFile {
  std::string_view name;     // the file's base name: "app.js"
  std::string_view content;  // its bytes
  std::string_view digest;   // 16 hex digits of its SHA-256
};

// Every embedded file, in the order CMake lists them.
std::span<const EmbeddedFile> EmbeddedAssets();

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_ASSETS_H_
