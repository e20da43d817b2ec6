// Interposes the glibc allocator entry points to count allocations for sugar-bench.
//
// Defining malloc & co. in the executable makes the dynamic linker bind every caller (libswiftCore
// included) to these definitions. Each one bumps a counter and forwards to glibc's internal
// __libc_* functions, which avoids dlsym(RTLD_NEXT) and its own allocations during start-up.
// Linked only into sugar-bench; never into the daemon.
#define _GNU_SOURCE
#include "CMallocCounter.h"

#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static uint64_t allocation_count = 0;

static inline void count_one(void) {
    __atomic_fetch_add(&allocation_count, 1, __ATOMIC_RELAXED);
}

uint64_t sugar_malloc_count(void) {
    return __atomic_load_n(&allocation_count, __ATOMIC_RELAXED);
}

void *malloc(size_t size) {
    count_one();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_one();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_one();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

void *valloc(size_t size) {
    count_one();
    return __libc_memalign(4096, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    count_one();
    // POSIX: the alignment must be a power of two multiple of sizeof(void *).
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) {
        return EINVAL;
    }
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) {
        return ENOMEM;
    }
    *result = pointer;
    return 0;
}
