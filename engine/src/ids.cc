#include "sluice/ids.h"

#include <array>
#include <atomic>
#include <cstdint>

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

// Each byte's value as a hexadecimal digit, or -1.
constexpr std::array<int8_t, 256> kHexValue = [] {
  std::array<int8_t, 256> values{};
  for (int c = 0; c < 256; ++c) {
    values[c] = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
  }
  return values;
}();

// Where a UUID's 32 digits sit in its 8-4-4-4-12 text.
constexpr std::array<uint8_t, 32> kDigitAt = {
    0,  1,  2,  3,  4,  5,  6,  7,  9,  10, 11, 12, 14, 15, 16, 17,
    19, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};

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
  // By table and without a branch per digit: every run id read back from a
  // store's text passes here.
  if (text.size() != 36 || text[8] != '-' || text[13] != '-' ||
      text[18] != '-' || text[23] != '-') {
    return invalid();
  }
  int seen = 0;  // negative once any digit is not one
  auto word = [&](int first_digit) {
    uint64_t bits = 0;
    for (int digit = first_digit; digit < first_digit + 16; ++digit) {
      const int v =
          kHexValue[static_cast<unsigned char>(text[kDigitAt[digit]])];
      seen |= v;
      bits = (bits << 4) | static_cast<uint64_t>(v & 15);
    }
    return bits;
  };
  const uint64_t high = word(0);
  const uint64_t low = word(16);
  if (seen < 0) return invalid();
  return RunId(high, low);
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
