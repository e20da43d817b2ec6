#ifndef SUGARD_CSQLITE_SHIM_H
#define SUGARD_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro Swift cannot import: a destructor value of -1 tells SQLite to copy the bound bytes.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
