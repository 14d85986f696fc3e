#include "pg_one_row.h"

#include <algorithm>

namespace sluice::postgres_internal {
namespace {

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

std::string OneRowShape(std::string_view sql) {
  constexpr std::string_view kUnnest = "unnest(";
  constexpr std::string_view kOrdinality = ") WITH ORDINALITY AS ";
  std::string shaped;
  size_t copied = 0;
  for (size_t start = sql.find(kUnnest); start != std::string_view::npos;
       start = sql.find(kUnnest, start + 1)) {
    const size_t args = start + kUnnest.size();
    const size_t end = sql.find(')', args);
    if (end == std::string_view::npos) break;
    if (sql.substr(end, kOrdinality.size()) != kOrdinality ||
        sql.substr(args, end - args).find('(') != std::string_view::npos) {
      continue;
    }
    shaped.append(sql.substr(copied, start - copied));
    shaped.append("(SELECT ");
    std::string_view rest = sql.substr(args, end - args);
    while (!rest.empty()) {
      const size_t comma = std::min(rest.find(','), rest.size());
      shaped.append("(")
          .append(Trimmed(rest.substr(0, comma)))
          .append(")[1], ");
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    shaped.append("1::bigint) AS ");
    copied = end + kOrdinality.size();
  }
  shaped.append(sql.substr(copied));
  return shaped;
}

}  // namespace sluice::postgres_internal
