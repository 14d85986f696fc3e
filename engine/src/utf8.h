// UTF-8 checks for text that reaches storage.
//
// Postgres refuses text that is not valid UTF-8, and a stored value that
// cannot be read blocks whoever reads it, so every string a caller or a
// handler hands over is checked (payloads) or repaired (error messages).
#ifndef SLUICE_ENGINE_UTF8_H_
#define SLUICE_ENGINE_UTF8_H_

#include <string>
#include <string_view>

namespace sluice {

// True when `text` is well-formed UTF-8: no stray continuation bytes, no
// overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of a well-formed sequence replaced
// by U+FFFD. Returns `text` unchanged when it is already valid.
std::string ToValidUtf8(std::string_view text);

}  // namespace sluice

#endif  // SLUICE_ENGINE_UTF8_H_
