// Included (after cpu_prelude.h) in the vector build of a kernel: see _cpu_simd.py.
// The threads of a group run as iterations of one lane loop that g++ vectorises. A buffer access
// cannot call out on its out-of-range branch there, so the rewritten accessors below are masked
// (reads past the end give 0, writes past the end are dropped, as on the scalar path) and count
// out-of-range accesses in a per-thread accumulator that the lane entry folds into sk_bounds_report
// after its slice (with the access a probe found: see below). The accumulator lives in one small runtime library (sk_simd_rt.so) with
// initial-exec TLS: a plain address, so g++ keeps it in registers across the loop; every kernel
// library that defined its own would use up glibc's static TLS reserve after ~50 dlopens.
#pragma once
#include <math.h>
#include <type_traits>
#include <utility>

// glibc's libmvec: vector variants of these exist (_ZGVdN8v_sinf ...); math-vector.h only
// declares them under -ffast-math. With -fno-math-errno they are safe to use (measured ULP in
// bench/RESULTS.md).
extern "C" {
__attribute__((simd("notinbranch"))) float sinf(float) noexcept;
__attribute__((simd("notinbranch"))) float cosf(float) noexcept;
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) float logf(float) noexcept;
__attribute__((simd("notinbranch"))) float powf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double sin(double) noexcept;
__attribute__((simd("notinbranch"))) double cos(double) noexcept;
__attribute__((simd("notinbranch"))) double exp(double) noexcept;
__attribute__((simd("notinbranch"))) double log(double) noexcept;
__attribute__((simd("notinbranch"))) double pow(double, double) noexcept;
}

// The lane loop keeps only the count (one vector add per access): which access it was (index, size,
// buffer) is found afterwards by a probe, the same row of threads re-run through a scalar copy of the
// kernel's code whose accessors record the first out-of-range access and change no memory
// (sk_probe_ld / sk_probe_st, see _cpu_simd.translate). `found` is set once per slice.
struct SkSimdAcc { uint64_t count, data, found, index, size, found_data; };
extern __thread SkSimdAcc sk_simd_acc __attribute__((tls_model("initial-exec")));

template <bool Probe>
static inline __attribute__((always_inline)) void sk_simd_note(bool ok, size_t i, size_t n, const void* d)
{
    if constexpr (!Probe) {
        // unconditional and branch-free: a vector sum and one bit-mask select of the (loop-invariant)
        // buffer pointer; without that select g++ 12 keeps the count in memory ("complicated access
        // pattern") and vectorises no lane loop
        uint64_t bad = !ok, m = 0 - bad;
        sk_simd_acc.count += bad;
        sk_simd_acc.data ^= (sk_simd_acc.data ^ (uint64_t)(uintptr_t)d) & m;
    } else if (!ok && !sk_simd_acc.found) {
        sk_simd_acc.found = 1;
        sk_simd_acc.index = (uint64_t)i;
        sk_simd_acc.size = (uint64_t)n;
        sk_simd_acc.found_data = (uint64_t)(uintptr_t)d;
    }
}

template <bool Probe, class T>
static inline __attribute__((always_inline)) T sk_simd_load(T* data, size_t count, size_t i)
{
    bool ok = i < count;
    sk_simd_note<Probe>(ok, i, count, data);
    T v{};
    if (ok) v = data[i];
    return v;
}

template <class B, class = void> struct sk_simd_is_buffer : std::false_type {};
template <class B>
struct sk_simd_is_buffer<B, std::void_t<decltype(std::declval<B&>().data), decltype(std::declval<B&>().count)>>
    : std::true_type {};

// `*(&(b)[i])` read as a value (Slang's form for buffer element reads).
template <bool Probe, class B, class I>
static inline __attribute__((always_inline)) auto sk_simd_ld(B&& b, I i)
{
    if constexpr (sk_simd_is_buffer<std::remove_reference_t<B>>::value)
        return sk_simd_load<Probe>(b.data, (size_t)b.count, (size_t)i);
    else {
        auto v = *(&(b)[i]);
        return v;
    }
}

// `*(&(b)[i]) = v;` (Slang's form for buffer element writes). The probe writes nothing to a buffer
// (the lane loop already did); a local array is the probe's own.
template <bool Probe, class B, class I, class V>
static inline __attribute__((always_inline)) void sk_simd_st(B&& b, I i, V&& v)
{
    if constexpr (sk_simd_is_buffer<std::remove_reference_t<B>>::value) {
        size_t k = (size_t)i;
        bool ok = k < (size_t)b.count;
        sk_simd_note<Probe>(ok, k, (size_t)b.count, b.data);
        if (!Probe && ok) b.data[k] = std::forward<V>(v);
    } else {
        *(&(b)[i]) = std::forward<V>(v);
    }
}

template <class B, class I>
static inline __attribute__((always_inline)) auto sk_ld(B&& b, I i) { return sk_simd_ld<false>(std::forward<B>(b), i); }
template <class B, class I, class V>
static inline __attribute__((always_inline)) void sk_st(B&& b, I i, V&& v)
{ sk_simd_st<false>(std::forward<B>(b), i, std::forward<V>(v)); }
template <class B, class I>
static inline __attribute__((always_inline)) auto sk_probe_ld(B&& b, I i) { return sk_simd_ld<true>(std::forward<B>(b), i); }
template <class B, class I, class V>
static inline __attribute__((always_inline)) void sk_probe_st(B&& b, I i, V&& v)
{ sk_simd_st<true>(std::forward<B>(b), i, std::forward<V>(v)); }

// After a slice: the exact count, and the access the probe found (none found: the row's indices
// depended on what the row itself wrote, so the probe, which reads memory after the row, took other
// paths; the count is still exact, the buffer is then not named).
static inline void sk_simd_fold()
{
    SkSimdAcc& a = sk_simd_acc;
    if (a.count) {
        uint64_t n = a.count;
        a.count = 0;
        if (a.found)
            sk_oob_record((size_t)a.index, (size_t)a.size, (const void*)(uintptr_t)a.found_data);
        else
            sk_oob_record(0, 0, (const void*)(uintptr_t)a.data);
        if (n > 1) __atomic_fetch_add(&sk_bounds_report.count, n - 1, __ATOMIC_RELAXED);
    }
    a.found = 0;
}
