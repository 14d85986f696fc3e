// How values travel to and from Postgres: every result column is text, and
// every parameter is text except the arrays that batches bind in binary
// (ArrayLiteral with an ElementType).
//
// Encoding: times are timestamptz written as "YYYY-MM-DD HH:MM:SS.ffffff+00"
// (an explicit offset, so the server's TimeZone never matters) and read in
// the same shape (each session sets TimeZone=UTC and DateStyle=ISO);
// microseconds are exact, since no floating point is involved. Run ids are
// uuid in canonical text. JSON payloads are `json` columns (kept byte for
// byte, so key order and scalars round-trip); absent is SQL NULL, JSON null
// is the text 'null'. Enums are their ToString() names. A batch binds one
// array parameter per column, read with unnest(): a "{...}" literal, or in
// binary, where a time is microseconds since 2000-01-01 UTC (exact too) and
// a run id its 16 bytes.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_VALUES_H_
#define SLUICE_BACKENDS_POSTGRES_PG_VALUES_H_

#include <libpq-fe.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/json.h"

namespace sluice::postgres_internal {

// `value`, or nullopt for JSON null: nullable JSON columns keep JSON null
// as SQL NULL.
inline std::optional<sluice::Json> NullIsAbsent(const sluice::Json& value) {
  if (value.is_null()) return std::nullopt;
  return value;
}

// Microseconds are kept; anything finer is dropped (rounded down).
std::string FormatTimestamp(absl::Time time);
// Parses FormatTimestamp()'s shape, with or without fractional digits, and
// "infinity" / "-infinity".
absl::StatusOr<absl::Time> ParseTimestamp(std::string_view text);

// The element type of an array bound in binary: its Postgres type OID,
// which must be the type the statement's cast names (`$1::uuid[]` takes
// kUuid, `$2::int[]` kInt4, `$3::bigint[]` kInt8, and so on).
enum class ElementType : uint32_t {
  kBool = 16,
  kInt8 = 20,
  kInt4 = 23,
  kText = 25,
  kJson = 114,
  kTimestamptz = 1184,
  kUuid = 2950,
};

// An array parameter, built element by element. By default a text literal
// ("{1,\"a\",NULL}") that the server parses with array_in. Made with an
// ElementType, it is Postgres's binary array format instead: nothing is
// quoted or formatted here, and the server parses no text (its
// timestamptz_in, uuid_in and array_in took about 7% of its time in W1;
// docs/decisions/0096). Each element call must then suit that type: Int
// for kInt4 and kInt8, Text and Json for kText and kJson, and so on.
class ArrayLiteral {
 public:
  ArrayLiteral() = default;
  explicit ArrayLiteral(ElementType type);

  ArrayLiteral& Text(std::string_view value);
  ArrayLiteral& Int(int64_t value);
  ArrayLiteral& OptionalInt(std::optional<int64_t> value);
  ArrayLiteral& Bool(bool value);
  ArrayLiteral& Time(absl::Time value);
  ArrayLiteral& OptionalTime(std::optional<absl::Time> value);
  ArrayLiteral& RunId(const sluice::RunId& value);
  ArrayLiteral& Json(const sluice::Json& value);
  ArrayLiteral& OptionalJson(const std::optional<sluice::Json>& value);
  ArrayLiteral& Null();

  bool binary() const { return type_.has_value(); }
  std::string Take() &&;

 private:
  void Separate();
  // Binary form: checks (in debug builds) that the element suits the
  // array's type, and counts it.
  void CountElement(std::initializer_list<ElementType> types);
  // Binary form: CountElement, then appends in one piece the element whose
  // `length` bytes the caller stored in `buffer` after 4 bytes of room,
  // where its length goes.
  void AppendElement(char* buffer, int32_t length,
                     std::initializer_list<ElementType> types);
  std::optional<ElementType> type_;
  std::string text_ = "{";  // the literal so far, or header and elements
  int32_t count_ = 0;
  bool has_null_ = false;
};

// An array of ids (message ids, report ids), for `bigint[]` parameters;
// binary.
ArrayLiteral IntArray(std::span<const int64_t> values);
// An array of run ids, for `uuid[]` parameters; binary.
ArrayLiteral RunIdArray(std::span<const sluice::RunId> run_ids);

// A statement's parameters ($1, $2, ...), in order.
class Params {
 public:
  Params& Text(std::string_view value);
  Params& Int(int64_t value);
  Params& Time(absl::Time value);
  Params& OptionalTime(std::optional<absl::Time> value);
  Params& RunId(const sluice::RunId& value);
  Params& Json(const sluice::Json& value);
  Params& OptionalJson(const std::optional<sluice::Json>& value);
  Params& Array(ArrayLiteral&& array);
  Params& Null();

  int size() const { return static_cast<int>(values_.size()); }
  // libpq's view: one pointer per parameter (nullptr for NULL), and each
  // one's length and format (0 text, 1 binary). Valid until the next change.
  const char* const* Pointers() const;
  const int* Lengths() const;
  const int* Formats() const { return formats_.data(); }

 private:
  std::vector<std::string> values_;
  std::vector<bool> is_null_;
  std::vector<int> formats_;
  mutable std::vector<const char*> pointers_;
  mutable std::vector<int> lengths_;
};

// Reads one result row's columns in order. A JSON, run id or enum column
// whose content does not decode is noted in unreadable() and read as its
// default (see sluice/records.h), so one bad row never fails a whole read.
// A column of the wrong shape for its type (a number that isn't one, a time
// in another format) latches a kInternal error, reported by status(); the
// readers return defaults after it.
class Row {
 public:
  Row(const PGresult* result, int row, int first_column = 0)
      : result_(result), row_(row), column_(first_column) {}

  bool IsNull() const { return PQgetisnull(result_, row_, column_) != 0; }
  void Skip() { ++column_; }

  std::string Text();
  int64_t Int();
  std::optional<int> OptionalInt();
  bool Bool();
  absl::Time Time();
  std::optional<absl::Time> OptionalTime();
  sluice::RunId RunId();
  sluice::Json Json(std::string_view what);
  std::optional<sluice::Json> OptionalJson(std::string_view what);

  // The text of the current column, for enum parsers; moves on.
  std::string_view Raw();
  // Latches `status` if it is the first failure.
  void Fail(absl::Status status);
  const absl::Status& status() const { return status_; }
  // Notes a value that does not decode.
  void NoteUnreadable(std::string_view problem);
  // What did not decode so far ("" if everything did); moves it out.
  std::string TakeUnreadable() { return std::move(unreadable_); }

 private:
  std::string_view Current() const;

  const PGresult* result_;
  int row_;
  int column_;
  absl::Status status_;
  std::string unreadable_;
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_VALUES_H_
