// Fuzzes backend URLs: whatever password libpq would read from a URL, the
// redacted form that error messages show must not contain it.
#include <libpq-fe.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "sluice/redact_url.h"

namespace {

using sluice::fuzz::Check;

// The password libpq reads from `url`, or "" when it reads none.
std::string PasswordOf(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  PQfreemem(error);
  std::string password;
  for (PQconninfoOption* o = options; o != nullptr && o->keyword != nullptr;
       ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) {
      password = o->val;
    }
  }
  PQconninfoFree(options);
  return password;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string url(reinterpret_cast<const char*>(data), size);
  if (url.find('\0') != std::string::npos) return 0;  // not a C string
  std::string redacted = sluice::RedactUrl(url);
  std::string password = PasswordOf(url);
  // Checked where the password is written once, unescaped, and libpq reads
  // it from that very place (a marker put there becomes the password); its
  // text elsewhere, or escaped, is no secret in the URL as written.
  const size_t at = url.find(password);
  if (password.empty() || at == std::string::npos ||
      password.find('*') != std::string::npos ||
      url.find(password, at + 1) != std::string::npos) {
    return 0;
  }
  const std::string marker = "Qz9Qz9Qz9";
  std::string probe = url;
  probe.replace(at, password.size(), marker);
  if (PasswordOf(probe) != marker) return 0;
  Check(redacted.find(password) == std::string::npos,
        "the redacted URL hides the password");
  return 0;
}
