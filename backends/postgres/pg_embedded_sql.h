// The SQL files the library carries, generated at build time from
// backends/postgres/migrations/*.sql and sql/pgmq_compat.sql
// (embed_sql.cmake).
#ifndef SLUICE_BACKENDS_POSTGRES_PG_EMBEDDED_SQL_H_
#define SLUICE_BACKENDS_POSTGRES_PG_EMBEDDED_SQL_H_

namespace sluice::postgres_internal {

struct EmbeddedMigration {
  int version;       // from the file name's NNNN_ prefix: 1, 2, ...
  const char* name;  // the file name
  const char* sql;
};

// In version order, without gaps, from 1.
extern const EmbeddedMigration kEmbeddedMigrations[];
extern const int kEmbeddedMigrationCount;
// pgmq-compatible tables and functions, for databases without pgmq.
extern const char kPgmqCompatSql[];

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_EMBEDDED_SQL_H_
