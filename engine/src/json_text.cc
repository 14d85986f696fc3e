#include "sluice/internal/json_text.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "boost/json/basic_parser_impl.hpp"
#include "boost/json/value_stack.hpp"
#include "sluice/internal/strings.h"

namespace sluice::internal {
namespace {

namespace json = boost::json;
using boost::system::error_code;

// Builds the value on Boost's value_stack, as boost::json::parser does, but
// converts doubles from their text.
class ExactHandler {
 public:
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_key_size = json::string::max_size();
  static constexpr size_t max_string_size = json::string::max_size();

  ExactHandler() { stack_.reset(); }

  json::value Release() { return stack_.release(); }
  bool wide_integer() const { return wide_integer_; }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code&) { return true; }
  bool on_object_end(size_t n, error_code&) {
    stack_.push_object(n);
    return true;
  }
  bool on_array_begin(error_code&) { return true; }
  bool on_array_end(size_t n, error_code&) {
    stack_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, size_t, error_code&) {
    stack_.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, size_t, error_code&) {
    stack_.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, size_t, error_code&) {
    stack_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, error_code&) {
    stack_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view s, error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(int64_t i, json::string_view, error_code&) {
    number_.clear();
    stack_.push_int64(i);
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, error_code&) {
    number_.clear();
    stack_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view s, error_code& ec);
  bool on_bool(bool b, error_code&) {
    stack_.push_bool(b);
    return true;
  }
  bool on_null(error_code&) {
    stack_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }

 private:
  json::value_stack stack_;
  std::string number_;  // the literal so far, when it spans calls
  bool wide_integer_ = false;
};

bool ExactHandler::on_double(double d, json::string_view s, error_code& ec) {
  number_.append(s.data(), s.size());
  if (number_.find_first_of(".eE") == std::string::npos) {
    // An integer literal Boost could only read as a double.
    wide_integer_ = true;
    ec = json::error::exponent_overflow;
    return false;
  }
  const char* end = number_.data() + number_.size();
  double exact = 0;
  std::from_chars_result parsed = std::from_chars(number_.data(), end, exact);
  // Out of range keeps Boost's result (infinity or zero): the payload check
  // refuses the first, and the second is what the text means.
  if (parsed.ec == std::errc() && parsed.ptr == end) d = exact;
  number_.clear();
  stack_.push_double(d);
  return true;
}

}  // namespace

absl::StatusOr<json::value> ParseJsonText(std::string_view text,
                                          std::string_view what,
                                          const JsonTextOptions& options) {
  json::parse_options parse_options;
  parse_options.max_depth = options.max_depth;
  json::basic_parser<ExactHandler> parser(parse_options);
  error_code ec;
  parser.write_some(false, text.data(), text.size(), ec);
  if (parser.handler().wide_integer()) {
    return absl::InvalidArgumentError(
        StrCat(what,
               " holds an integer outside the 64-bit range; integers must lie "
               "in [-2^63, 2^64 - 1] (send larger ones as strings)"));
  }
  if (ec == json::error::too_deep) {
    return absl::InvalidArgumentError(
        StrCat(what, " nests deeper than the limit of ", options.max_depth,
               " levels of arrays and objects"));
  }
  if (ec) {
    return absl::InvalidArgumentError(
        StrCat(what, " is not valid JSON: ", ec.message()));
  }
  return parser.handler().Release();
}

}  // namespace sluice::internal
