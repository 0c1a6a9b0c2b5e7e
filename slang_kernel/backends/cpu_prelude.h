// Included before Slang's generated C++ (g++ -include). Out-of-range buffer accesses behave as on
// GPUs with robust buffer access: reads give zero, writes are dropped, memory stays intact.
// With SK_CHECKED the first out-of-range access is also recorded for the host to report.
#pragma once
#include <stddef.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
struct SkBoundsReport { uint64_t count; uint64_t index; uint64_t size; };
#ifdef SK_CHECKED
__attribute__((visibility("default"))) SkBoundsReport sk_bounds_report = {0, 0, 0};
#endif
}

static inline void* sk_oob_slot(size_t bytes, size_t index, size_t count)
{
    alignas(64) static thread_local unsigned char scratch[1 << 16];
#ifdef SK_CHECKED
    if (__atomic_fetch_add(&sk_bounds_report.count, 1, __ATOMIC_RELAXED) == 0) {
        sk_bounds_report.index = index;
        sk_bounds_report.size = count;
    }
#else
    (void)index; (void)count;
#endif
    memset(scratch, 0, bytes < sizeof(scratch) ? bytes : sizeof(scratch));
    return scratch;
}

#define SLANG_BOUND_CHECK(index, count) \
    if ((size_t)(index) >= (size_t)(count)) return *(T*)sk_oob_slot(sizeof(T), (size_t)(index), (size_t)(count));
