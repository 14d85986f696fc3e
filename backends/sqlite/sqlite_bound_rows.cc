#include "sqlite_bound_rows.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <numeric>
#include <tuple>

#include "sluice/internal/strings.h"
#include "sqlite_statement.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {

BoundRows::BoundRows(int columns, size_t rows) : columns_(columns) {
  assert(columns >= 1 && columns <= kMaxColumns);
  cells_.reserve(rows * columns);
}

BoundRows& BoundRows::AddInt(int64_t value) {
  cells_.push_back(Cell{value, 0, Kind::kInt});
  return *this;
}

BoundRows& BoundRows::AddNull() {
  cells_.push_back(Cell{});
  return *this;
}

BoundRows& BoundRows::AddText(std::string_view value) {
  cells_.push_back(Cell{static_cast<int64_t>(text_.size()),
                        static_cast<uint32_t>(value.size()), Kind::kText});
  text_.append(value);
  return *this;
}

BoundRows& BoundRows::AddTime(absl::Time value) {
  return AddInt(ToStoredTime(value));
}

BoundRows& BoundRows::AddOptionalInt(std::optional<int> value) {
  return value.has_value() ? AddInt(*value) : AddNull();
}

BoundRows& BoundRows::AddOptionalTime(std::optional<absl::Time> value) {
  return value.has_value() ? AddTime(*value) : AddNull();
}

void BoundRows::SortByKey(int key_cells) {
  assert(key_cells >= 1 && key_cells <= 2 && key_cells <= columns_);
  std::vector<int64_t> order(size());
  std::iota(order.begin(), order.end(), 0);
  auto key_less = [&](int64_t a, int64_t b) {
    for (int i = 0; i < key_cells; ++i) {
      const Cell& x = cells_[a * columns_ + i];
      const Cell& y = cells_[b * columns_ + i];
      assert(x.kind == Kind::kInt && y.kind == Kind::kInt);
      if (x.value != y.value) return x.value < y.value;
    }
    return false;
  };
  std::stable_sort(order.begin(), order.end(), key_less);
  std::vector<Cell> sorted;
  sorted.reserve(cells_.size());
  std::vector<int64_t> positions;
  positions.reserve(order.size());
  for (int64_t row : order) {
    sorted.insert(sorted.end(), cells_.begin() + row * columns_,
                  cells_.begin() + (row + 1) * columns_);
    positions.push_back(PositionOf(row));
  }
  cells_ = std::move(sorted);
  positions_ = std::move(positions);
  sorted_by_ = key_cells;
}

int64_t BoundRows::PositionOf(int64_t row) const {
  return positions_.empty() ? row : positions_[row];
}

std::pair<int64_t, int64_t> BoundRows::Candidates(
    std::span<const int64_t> key) const {
  if (static_cast<size_t>(sorted_by_) < key.size()) return {0, size()};
  // -1, 0, 1 as row `row`'s leading cells are below, equal to or above key.
  auto compare = [&](int64_t row) {
    for (size_t i = 0; i < key.size(); ++i) {
      const int64_t value = cells_[row * columns_ + i].value;
      if (value != key[i]) return value < key[i] ? -1 : 1;
    }
    return 0;
  };
  int64_t low = 0;
  int64_t high = size();
  while (low < high) {  // the first row not below key
    const int64_t middle = low + (high - low) / 2;
    if (compare(middle) < 0) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  int64_t end = low;
  while (end < size() && compare(end) == 0) ++end;
  return {low, end};
}

void BoundRows::ResultCell(sqlite3_context* context, int64_t row,
                           int column) const {
  if (column >= columns_) {
    sqlite3_result_null(context);
    return;
  }
  const Cell& cell = cells_[row * columns_ + column];
  switch (cell.kind) {
    case Kind::kNull:
      sqlite3_result_null(context);
      break;
    case Kind::kInt:
      sqlite3_result_int64(context, cell.value);
      break;
    case Kind::kText:
      sqlite3_result_text64(context, text_.data() + cell.value, cell.text_size,
                            SQLITE_STATIC, SQLITE_UTF8);
      break;
  }
}

namespace {

// The module behind `sluice_rows(?)`: an eponymous-only virtual table (no
// xCreate) over the BoundRows bound to its hidden `rows` argument.

// Column numbers in the declaration below.
constexpr int kKeyColumn = 0;
constexpr int kFirstCell = 1;
constexpr int kRowsArgument = kFirstCell + BoundRows::kMaxColumns;
constexpr char kDeclaration[] =
    "CREATE TABLE x(key, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, "
    "c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23, "
    "rows HIDDEN)";
static_assert(BoundRows::kMaxColumns == 24, "update kDeclaration");

// idxNum: 1 walks every row; 2 and 3 search by c0, or by c0 and c1 (the
// values are argv[1] and argv[2]).
constexpr int kWalkAll = 1;

struct Cursor {
  sqlite3_vtab_cursor base;  // first, as SQLite requires
  const BoundRows* rows;
  int64_t row;
  int64_t end;
};

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** table,
            char**) {
  int result = sqlite3_declare_vtab(db, kDeclaration);
  if (result != SQLITE_OK) return result;
  *table = static_cast<sqlite3_vtab*>(sqlite3_malloc(sizeof(sqlite3_vtab)));
  if (*table == nullptr) return SQLITE_NOMEM;
  std::memset(*table, 0, sizeof(sqlite3_vtab));
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* table) {
  sqlite3_free(table);
  return SQLITE_OK;
}

// Plans: walk the bound rows in key order, or, given c0 (and c1) by equality,
// search for them. A call without its `rows` argument is refused
// (SQLITE_CONSTRAINT makes the planner look elsewhere, and fail if there is
// nowhere else). A search leaves the equality to SQLite to check too (omit
// is 0): over rows not sorted by those cells it returns every row.
int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int rows_argument = -1;
  int key[2] = {-1, -1};  // constraints c0 = ? and c1 = ?
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& constraint = info->aConstraint[i];
    if (constraint.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (constraint.iColumn == kRowsArgument) {
      if (!constraint.usable) return SQLITE_CONSTRAINT;
      rows_argument = i;
    } else if (constraint.usable && (constraint.iColumn == kFirstCell ||
                                     constraint.iColumn == kFirstCell + 1)) {
      key[constraint.iColumn - kFirstCell] = i;
    }
  }
  if (rows_argument < 0) return SQLITE_CONSTRAINT;
  info->aConstraintUsage[rows_argument].argvIndex = 1;
  info->aConstraintUsage[rows_argument].omit = 1;
  const int key_cells = key[0] < 0 ? 0 : key[1] < 0 ? 1 : 2;
  for (int k = 0; k < key_cells; ++k) {
    info->aConstraintUsage[key[k]].argvIndex = 2 + k;
  }
  info->idxNum = kWalkAll + key_cells;
  info->estimatedCost = key_cells > 0 ? 2 : 64;
  info->estimatedRows = key_cells > 0 ? 1 : 64;
  info->orderByConsumed = key_cells == 0 && info->nOrderBy == 1 &&
                          info->aOrderBy[0].iColumn == kKeyColumn &&
                          !info->aOrderBy[0].desc;
  return SQLITE_OK;
}

int Open(sqlite3_vtab*, sqlite3_vtab_cursor** cursor) {
  auto* opened = static_cast<Cursor*>(sqlite3_malloc(sizeof(Cursor)));
  if (opened == nullptr) return SQLITE_NOMEM;
  std::memset(opened, 0, sizeof(Cursor));
  *cursor = &opened->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  sqlite3_free(cursor);
  return SQLITE_OK;
}

Cursor& AsCursor(sqlite3_vtab_cursor* cursor) {
  return *reinterpret_cast<Cursor*>(cursor);
}

int Filter(sqlite3_vtab_cursor* cursor, int plan, const char*, int argc,
           sqlite3_value** argv) {
  Cursor& c = AsCursor(cursor);
  // A parameter bound to anything but a BoundRows (or left unbound) reads
  // as no rows.
  c.rows = argc >= 1 ? static_cast<const BoundRows*>(sqlite3_value_pointer(
                           argv[0], BoundRows::kPointerType))
                     : nullptr;
  c.row = 0;
  c.end = c.rows == nullptr ? 0 : c.rows->size();
  const int key_cells = plan - kWalkAll;
  if (c.rows == nullptr || key_cells <= 0 || argc != 1 + key_cells) {
    return SQLITE_OK;
  }
  int64_t key[2];
  for (int k = 0; k < key_cells; ++k) {
    // Only an integer can equal an integer cell; anything else is left to
    // SQLite's own check over every row.
    if (sqlite3_value_type(argv[1 + k]) != SQLITE_INTEGER) return SQLITE_OK;
    key[k] = sqlite3_value_int64(argv[1 + k]);
  }
  std::tie(c.row, c.end) =
      c.rows->Candidates({key, static_cast<size_t>(key_cells)});
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cursor) {
  ++AsCursor(cursor).row;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cursor) {
  const Cursor& c = AsCursor(cursor);
  return c.row >= c.end;
}

int Column(sqlite3_vtab_cursor* cursor, sqlite3_context* context, int column) {
  const Cursor& c = AsCursor(cursor);
  if (column == kKeyColumn) {
    sqlite3_result_int64(context, c.rows->PositionOf(c.row));
  } else if (column < kRowsArgument) {
    c.rows->ResultCell(context, c.row, column - kFirstCell);
  } else {
    sqlite3_result_null(context);
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* rowid) {
  *rowid = AsCursor(cursor).row;
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  sqlite3_module module = {};
  module.xConnect = Connect;
  module.xBestIndex = BestIndex;
  module.xDisconnect = Disconnect;
  module.xOpen = Open;
  module.xClose = Close;
  module.xFilter = Filter;
  module.xNext = Next;
  module.xEof = Eof;
  module.xColumn = Column;
  module.xRowid = Rowid;
  return module;
}

const sqlite3_module kModule = MakeModule();

}  // namespace

absl::Status RegisterBoundRows(sqlite3* db) {
  int result =
      sqlite3_create_module_v2(db, "sluice_rows", &kModule, nullptr, nullptr);
  if (result != SQLITE_OK) {
    return StatusFromSqlite(result, db, "register sluice_rows");
  }
  return absl::OkStatus();
}

}  // namespace sluice::sqlite_internal
