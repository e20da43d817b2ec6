// A plain C SQLite loop: the yardstick `sugar-bench ingest` compares the store's commit path to.
#include "CBenchYardsticks.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double fail(sqlite3 *db, const char *what, char *message, size_t size) {
    snprintf(message, size, "%s: %s", what, db ? sqlite3_errmsg(db) : "cannot open");
    return -1;
}

double sugar_yardstick_ingest(
    const char *source, const char *target, long submitted, long *inserted, char *message, size_t message_size) {
    sqlite3 *src = NULL, *dst = NULL;
    sqlite3_stmt *s = NULL;
    double result = -1;
    sqlite3_value **values = NULL;
    long rows = 0, capacity = 0;
    int columns = 0;
    char insert_sql[4096] = "INSERT OR IGNORE INTO reading (";
    char select_sql[4096] = "SELECT ";

    if (sqlite3_open_v2(source, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) { result = fail(src, "open source", message, message_size); goto done; }
    remove(target);
    if (sqlite3_open(target, &dst) != SQLITE_OK) { result = fail(dst, "open target", message, message_size); goto done; }

    // The schema, as the store made it.
    if (sqlite3_prepare_v2(src, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid", -1, &s, NULL) != SQLITE_OK) {
        result = fail(src, "schema", message, message_size); goto done;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (sqlite3_exec(dst, (const char *)sqlite3_column_text(s, 0), NULL, NULL, NULL) != SQLITE_OK) {
            result = fail(dst, "create", message, message_size); goto done;
        }
    }
    sqlite3_finalize(s); s = NULL;
    sqlite3_close(dst); dst = NULL;
    char attach[4200];
    // The parent rows the readings refer to (meter_id, session_id), so the loop can check its
    // foreign keys as the store does.
    snprintf(attach, sizeof attach,
        "ATTACH '%s' AS src; INSERT INTO meter SELECT * FROM src.meter; "
        "INSERT INTO sync_session SELECT * FROM src.sync_session; DETACH src;", source);
    if (sqlite3_open(target, &dst) != SQLITE_OK || sqlite3_exec(dst, attach, NULL, NULL, NULL) != SQLITE_OK) {
        result = fail(dst, "meters", message, message_size); goto done;
    }
    sqlite3_close(dst); dst = NULL;

    // Every column of reading but id.
    if (sqlite3_prepare_v2(src, "SELECT name FROM pragma_table_info('reading') WHERE name != 'id' ORDER BY cid", -1, &s, NULL) != SQLITE_OK) {
        result = fail(src, "columns", message, message_size); goto done;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        if (columns > 0) { strcat(insert_sql, ", "); strcat(select_sql, ", "); }
        strcat(insert_sql, name);
        strcat(select_sql, name);
        columns++;
    }
    sqlite3_finalize(s); s = NULL;
    strcat(insert_sql, ") VALUES (");
    for (int i = 0; i < columns; i++) strcat(insert_sql, i ? ", ?" : "?");
    strcat(insert_sql, ")");
    strcat(select_sql, " FROM reading ORDER BY id");

    if (sqlite3_prepare_v2(src, select_sql, -1, &s, NULL) != SQLITE_OK) { result = fail(src, "select", message, message_size); goto done; }
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (rows == capacity) {
            capacity = capacity ? capacity * 2 : 1024;
            values = realloc(values, (size_t)capacity * (size_t)columns * sizeof *values);
        }
        for (int c = 0; c < columns; c++) values[rows * columns + c] = sqlite3_value_dup(sqlite3_column_value(s, c));
        rows++;
    }
    sqlite3_finalize(s); s = NULL;
    if (rows == 0) { snprintf(message, message_size, "the source has no readings"); goto done; }

    // Timed: what the store's commit does at its core, in plain C.
    double start = now_seconds();
    // The store's open flags (no SQLite mutexes: one thread uses the connection) and its
    // constraints: foreign keys on, so each insert checks its meter and sync-session rows.
    if (sqlite3_open_v2(target, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        result = fail(dst, "reopen", message, message_size); goto done;
    }
    if (sqlite3_exec(dst, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        result = fail(dst, "begin", message, message_size); goto done;
    }
    if (sqlite3_prepare_v3(dst, insert_sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
        result = fail(dst, "prepare", message, message_size); goto done;
    }
    long stored = 0;
    for (long n = 0, next = 0; n < submitted; n++) {
        // Every tenth submission re-sends a row already inserted (the unique key ignores it).
        long row = (n % 10 == 9 && next > 0) ? (n * 7) % next : (next < rows ? next++ : (n * 7) % rows);
        for (int c = 0; c < columns; c++) sqlite3_bind_value(s, c + 1, values[row * columns + c]);
        if (sqlite3_step(s) != SQLITE_DONE) { result = fail(dst, "insert", message, message_size); goto done; }
        stored += sqlite3_changes(dst);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s); s = NULL;
    if (sqlite3_exec(dst, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) { result = fail(dst, "commit", message, message_size); goto done; }
    sqlite3_close(dst); dst = NULL;
    result = now_seconds() - start;
    *inserted = stored;

done:
    if (s) sqlite3_finalize(s);
    if (values) {
        for (long i = 0; i < rows * columns; i++) sqlite3_value_free(values[i]);
        free(values);
    }
    if (dst) sqlite3_close(dst);
    if (src) sqlite3_close(src);
    return result;
}
