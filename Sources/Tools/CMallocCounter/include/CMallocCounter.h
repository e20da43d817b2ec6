#ifndef CMALLOCCOUNTER_H
#define CMALLOCCOUNTER_H

#include <stdint.h>

/// Number of allocation calls (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign,
/// valloc) made by this process since it started. Thread-safe (relaxed atomic).
uint64_t sugar_malloc_count(void);

#endif
