#include "sluice/ids.h"

#include <atomic>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

uint64_t RandomWord() {
  // absl::BitGen is not thread-safe; one per thread keeps ids cheap.
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

RunId RunId::Random() {
  // Version 7: the Unix time in milliseconds, then random bits. Ids made
  // close in time sort close together, so a backend's index on run id fills
  // at its end instead of touching a random page per new run.
  //
  // Within a process ids also increase strictly (RFC 9562, section 6.2,
  // method 3 with the 12 bits after the version as the counter): runs that
  // tie on their created time list in the order they were made. A new
  // millisecond starts the counter at a random value below 0x800, leaving
  // room for 2,048 more ids; past 0xFFF the id borrows the next millisecond.
  static std::atomic<uint64_t> last_high{0};
  uint64_t millis = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  uint64_t fresh = (millis << 16) | 0x7000ULL | (RandomWord() & 0x07FFULL);
  uint64_t prev = last_high.load(std::memory_order_relaxed);
  uint64_t high;
  do {
    high = fresh;
    if (high <= prev) {
      high = (prev & 0x0FFFULL) == 0x0FFFULL
                 ? (((prev >> 16) + 1) << 16) | 0x7000ULL
                 : prev + 1;
    }
  } while (
      !last_high.compare_exchange_weak(prev, high, std::memory_order_relaxed));
  uint64_t low = (RandomWord() & ~(0xC000ULL << 48)) | (0x8000ULL << 48);
  return RunId(high, low);
}

absl::StatusOr<RunId> RunId::Parse(std::string_view text) {
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        StrCat("run id \"", text.substr(0, 64),
               "\" is not a UUID (expected 8-4-4-4-12 hexadecimal digits)"));
  };
  if (text.size() != 36) return invalid();
  uint64_t words[2] = {0, 0};
  int digit = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return invalid();
      continue;
    }
    int v = HexValue(text[i]);
    if (v < 0) return invalid();
    uint64_t& word = words[digit / 16];
    word = (word << 4) | static_cast<uint64_t>(v);
    ++digit;
  }
  return RunId(words[0], words[1]);
}

std::string RunId::ToString() const {
  // By hand rather than snprintf: every task's message names its run, so
  // this runs once per task created.
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(36, '-');
  int out = 35;
  auto put = [&](uint64_t bits, int digits) {
    for (int i = 0; i < digits; ++i, bits >>= 4) text[out--] = kHex[bits & 15];
  };
  // Right to left: 12 digits, '-', 4, '-', 4, '-', 4, '-', 8.
  put(low_ & 0xFFFFFFFFFFFFULL, 12);
  --out;
  put(low_ >> 48, 4);
  --out;
  put(high_ & 0xFFFF, 4);
  --out;
  put((high_ >> 16) & 0xFFFF, 4);
  --out;
  put(high_ >> 32, 8);
  return text;
}

std::string NewWorkerId() {
  // 15 characters: short enough for the small-string buffer of std::string,
  // since a worker id is copied onto every task it claims.
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuv";
  uint64_t bits = RandomWord();
  std::string id = "w";
  for (int i = 0; i < 14; ++i, bits >>= 5) id.push_back(kDigits[bits & 31]);
  return id;
}

}  // namespace sluice
