#!/usr/bin/env bash
# Give back the index space of a runsgate database on FerretDB 2 with DocumentDB: REINDEX TABLE
# CONCURRENTLY each collection's table in PostgreSQL, one at a time, while servers keep serving.
#   PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres PGDATABASE=postgres \
#     bash scripts/documentdb-reindex.sh DATABASE [COLLECTION...]
# DATABASE is the MongoDB database (the path of MONGODB_URI, e.g. runsgate); COLLECTION names some
# of its collections (default: all but system.*). The connection is libpq's (PG* variables or
# ~/.pgpass) to the PostgreSQL database holding the documentdb extension, as a superuser or the
# tables' owner; PSQL names the psql binary (default: psql on PATH).
#
# Why: DocumentDB's indexes (documentdb_rum, and the _id B-tree) keep the pages of deleted
# entries, so their size grows with the writes while the documents stay at one retention period
# (docs/operations.md "Space on FerretDB 2.5 with DocumentDB"). A collection's documents are in
# documentdb_data.documents_<collection_id> (documentdb_api_catalog.collections maps the names).
# REINDEX CONCURRENTLY builds each index anew beside the old one and swaps them, taking no lock
# that blocks reads or writes; it waits for transactions open on the table to end first.
#
# Prints, per collection, its indexes' bytes (pg_relation_size) before and after. An invalid index
# left by an interrupted REINDEX CONCURRENTLY (named *_ccnew or *_ccold) is reported, with the
# DROP INDEX CONCURRENTLY to run. Exits 0 when every REINDEX succeeded, 1 when one failed, 2 on
# wrong arguments or when the database has no collection of that name.
set -euo pipefail
[ $# -ge 1 ] && [ -n "$1" ] || { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
database="$1"
shift
psql_bin="${PSQL:-psql}"
q() { "$psql_bin" -X -At -F $'\t' -v ON_ERROR_STOP=1 "$@"; }

collections="$(q -v db="$database" <<'SQL'
SELECT collection_name, collection_id FROM documentdb_api_catalog.collections
WHERE database_name = :'db' AND collection_name NOT LIKE 'system.%' AND view_definition IS NULL
ORDER BY collection_name;
SQL
)"
[ -n "$collections" ] || { echo "documentdb-reindex: no collection in database $database" >&2; exit 2; }

index_bytes() { # the bytes of every index of documentdb_data.documents_$1
  q -c "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index
        WHERE indrelid = 'documentdb_data.documents_$1'::regclass"
}

invalid() { # invalid indexes of DocumentDB's tables (left by an interrupted REINDEX CONCURRENTLY)
  q -c "SELECT 'DROP INDEX CONCURRENTLY documentdb_data.' || quote_ident(c.relname) || ';'
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relnamespace = 'documentdb_data'::regnamespace"
}

status=0
matched=0
wanted=" $* "
while IFS=$'\t' read -r name id; do
  [ $# -eq 0 ] || [[ "$wanted" == *" $name "* ]] || continue
  matched=$((matched + 1))
  before="$(index_bytes "$id")"
  began="$(date +%s%N)"
  if q -c "REINDEX TABLE CONCURRENTLY documentdb_data.documents_$id" >/dev/null; then
    after="$(index_bytes "$id")"
    ms=$((($(date +%s%N) - began) / 1000000))
    printf '%s (documents_%s): indexes %s -> %s bytes in %d ms\n' "$name" "$id" "$before" "$after" "$ms"
  else
    echo "documentdb-reindex: REINDEX of $name (documents_$id) failed" >&2
    status=1
  fi
done <<<"$collections"

[ "$matched" -gt 0 ] || { echo "documentdb-reindex: no collection named $* in database $database" >&2; exit 2; }

left="$(invalid)"
if [ -n "$left" ]; then
  echo "documentdb-reindex: invalid indexes left by an interrupted REINDEX CONCURRENTLY; drop them:" >&2
  echo "$left" >&2
  status=1
fi
exit "$status"
