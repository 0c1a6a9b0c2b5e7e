// Included before Slang's generated C++ (g++ -include). Out-of-range buffer accesses behave as on
// GPUs with robust buffer access: reads give zero, writes are dropped, memory stays intact. This
// covers structured buffers, unsized arrays, byte-address buffers and fixed-size (local) arrays.
// The first out-of-range access of a dispatch is also recorded (index, element count and the
// buffer's data pointer, which the host maps back to the parameter): the host warns about it, or
// with Session(checked=True) raises. Recording happens only on the out-of-range path.
#pragma once
#include <stddef.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
struct SkBoundsReport { uint64_t count; uint64_t index; uint64_t size; uint64_t data; };
__attribute__((visibility("default"))) SkBoundsReport sk_bounds_report = {0, 0, 0, 0};
}

alignas(64) static thread_local unsigned char sk_scratch[1 << 16];

static inline void sk_oob_record(size_t index, size_t count, const void* data)
{
    if (__atomic_fetch_add(&sk_bounds_report.count, 1, __ATOMIC_RELAXED) == 0) {
        sk_bounds_report.index = index;
        sk_bounds_report.size = count;
        sk_bounds_report.data = (uint64_t)(uintptr_t)data;
    }
}

static inline void* sk_oob_slot(size_t bytes, size_t index, size_t count, const void* data)
{
    sk_oob_record(index, count, data);
    memset(sk_scratch, 0, bytes < sizeof(sk_scratch) ? bytes : sizeof(sk_scratch));
    return sk_scratch;
}

// Byte-address buffers return many types (and void for stores): instead of returning early, move
// the byte index so that data + index lands in the zeroed scratch block.
static inline size_t sk_oob_byte_index(size_t index, size_t elem, size_t bytes, const void* data)
{
    sk_oob_record(index / 4, bytes / 4, data);
    memset(sk_scratch, 0, elem < sizeof(sk_scratch) ? elem : sizeof(sk_scratch));
    return (size_t)((uintptr_t)sk_scratch - (uintptr_t)data);
}

#define SLANG_BOUND_CHECK(index, count) \
    if ((size_t)(index) >= (size_t)(count)) return *(T*)sk_oob_slot(sizeof(T), (size_t)(index), (size_t)(count), data);

#define SLANG_BOUND_CHECK_FIXED_ARRAY(index, count) \
    if ((size_t)(index) >= (size_t)(count)) return *(T*)sk_oob_slot(sizeof(T), (size_t)(index), (size_t)(count), m_data);

#define SLANG_BOUND_CHECK_BYTE_ADDRESS(index, elemSize, sizeInBytes) \
    if ((size_t)(sizeInBytes) < (size_t)(elemSize) || (size_t)(index) > (size_t)(sizeInBytes) - (size_t)(elemSize)) \
        index = sk_oob_byte_index((size_t)(index), (size_t)(elemSize), (size_t)(sizeInBytes), data);

// One thread's share of a dispatch. The group range is cut into `parts` slices along `axis`; every
// thread of the host's pool calls this once and takes slices from the shared counter until none are
// left, so an uneven kernel (a Mandelbrot's busy half) keeps every core busy and no Python runs (or
// waits for its interpreter lock) between slices.
extern "C" __attribute__((visibility("default")))
void sk_run_share(void (*entry)(void*, void*, void*), const uint32_t* groups, uint32_t axis, uint32_t parts,
                  uint32_t* next, void* entry_params, void* global_params)
{
    struct { uint32_t start[3]; uint32_t end[3]; } range;
    const uint64_t n = groups[axis];
    for (uint32_t k; (k = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED)) < parts;) {
        for (int i = 0; i < 3; i++) { range.start[i] = 0; range.end[i] = groups[i]; }
        range.start[axis] = (uint32_t)(n * k / parts);
        range.end[axis] = (uint32_t)(n * (k + 1) / parts);
        entry(&range, entry_params, global_params);
    }
}
