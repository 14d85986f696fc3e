// `sluice migrate` and `sluice check-schema`: installing and inspecting a
// store's schema. Postgres has migrations; an SQLite file is created or
// upgraded when it is opened, so `migrate` on SQLite opens it.
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"

namespace sluice::cli {
namespace {

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgres://") || url.starts_with("postgresql://");
}

int Migrate(const std::string& url, bool json) {
  std::string done;
  if (IsPostgresUrl(url)) {
    absl::Status migrated = MigratePostgres(url);
    if (!migrated.ok()) return Fail(migrated);
    done = StrCat("schema at version ", LatestPostgresSchemaVersion());
  } else {
    // Opening creates or upgrades an SQLite file; memory has no schema.
    absl::StatusOr<Session> session = OpenSession(url);
    if (!session.ok()) return Fail(session.status());
    done = StrCat(session->backend->name(), " schema is current");
  }
  if (json) {
    PrintJson(boost::json::object{{"ok", true}, {"result", done}});
  } else {
    std::printf("%s\n", done.c_str());
  }
  return kExitOk;
}

Json NamesJson(const std::vector<std::string>& names) {
  boost::json::array array;
  for (const std::string& name : names) array.emplace_back(name);
  return array;
}

// kExitCheckFailed when the schema is incomplete or not current.
int CheckSchema(const std::string& url, bool json) {
  if (!IsPostgresUrl(url)) {
    std::fprintf(stderr,
                 "sluice: check-schema inspects Postgres schemas; an SQLite "
                 "file is checked and upgraded when opened (sluice migrate "
                 "sqlite:PATH)\n");
    return kExitUsage;
  }
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  if (!report.ok()) return Fail(report.status());
  if (json) {
    PrintJson(boost::json::object{
        {"ok", report->ok()},
        {"installed_version", report->installed_version},
        {"latest_version", report->latest_version},
        {"missing_tables", NamesJson(report->missing_tables)},
        {"missing_functions", NamesJson(report->missing_functions)},
        {"missing_privileges", NamesJson(report->missing_privileges)}});
  } else {
    std::printf("%s", report->ToString().c_str());
  }
  return report->ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace

void AddSchemaCommands(CLI::App& app, Outcome& outcome) {
  struct SchemaArgs {
    std::string url;
    bool json = false;
  };
  auto migrate_args = std::make_shared<SchemaArgs>();
  CLI::App* migrate = app.add_subcommand(
      "migrate",
      "Install or upgrade the store's schema (Postgres: every missing "
      "migration; SQLite: opening the file upgrades it)");
  AddUrl(*migrate, migrate_args->url);
  AddJsonFlag(*migrate, migrate_args->json);
  migrate->callback([&outcome, migrate_args] {
    outcome.exit_code = Migrate(migrate_args->url, migrate_args->json);
  });

  auto check_args = std::make_shared<SchemaArgs>();
  CLI::App* check = app.add_subcommand(
      "check-schema",
      "Report a Postgres schema's version and what it lacks, changing "
      "nothing (exit 3 if it is not complete and current)");
  AddUrl(*check, check_args->url);
  AddJsonFlag(*check, check_args->json);
  check->callback([&outcome, check_args] {
    outcome.exit_code = CheckSchema(check_args->url, check_args->json);
  });
}

}  // namespace sluice::cli
