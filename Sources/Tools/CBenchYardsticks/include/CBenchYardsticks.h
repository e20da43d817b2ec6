#ifndef CBENCHYARDSTICKS_H
#define CBENCHYARDSTICKS_H

#include <stddef.h>
#include <stdint.h>

/// The C yardstick of `sugar-bench parse`: decodes every length-prefixed Glucose Measurement of
/// `corpus` with the checks the Swift parser makes (shape length from the flags, exact length, Base
/// Time ranges) into a plain struct. Returns the number of packets, or -1 - index of the first bad one.
/// `checksum` receives the same fold of decoded fields the Swift pass computes.
long sugar_yardstick_parse(const uint8_t *corpus, size_t length, uint64_t *checksum);

/// The C yardstick of `sugar-bench ingest`: copies the schema (tables, indexes, triggers) and the meter
/// rows of the store-filled database `source` into a fresh database `target` and loads every `reading`
/// row of `source` into memory (untimed); then, timed: opens `target` with WAL and synchronous=FULL and
/// in ONE transaction runs one reused `INSERT OR IGNORE INTO reading (...)` per row (every column but
/// `id`), re-inserting one row in ten of the rows already inserted (ignored by the unique key), as many
/// rows as `submitted` in all. Returns the seconds of the timed part, or a negative value on failure
/// (`message` gets the SQLite error, up to `message_size` bytes). `inserted` gets the rows stored.
double sugar_yardstick_ingest(
    const char *source, const char *target, long submitted, long *inserted, char *message, size_t message_size);

#endif
