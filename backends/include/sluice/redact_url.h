// Backend URLs with their secrets hidden, for error messages and logs.
//
//   postgresql://app:s3cret@db/app      ->  postgresql://app:***@db/app
//   postgresql://db/app?password=x      ->  postgresql://db/app?password=***
//   host=db password='a b' user=app     ->  host=db password=*** user=app
//
// Every message that shows a backend URL shows RedactUrl(url), never the URL
// itself. It works on malformed URLs too, erring on the side of hiding: in
// the URI form everything from the first ':' after "scheme://" to the last
// '@' is hidden, so a password holding an unescaped '/', '?' or '@' is still
// hidden whole (and perhaps some of the host with it); where that span and a
// query password overlap, both are hidden as one.
//
// Thread-safe (a pure function).
#ifndef SLUICE_REDACT_URL_H_
#define SLUICE_REDACT_URL_H_

#include <string>
#include <string_view>

namespace sluice {

std::string RedactUrl(std::string_view url);

}  // namespace sluice

#endif  // SLUICE_REDACT_URL_H_
