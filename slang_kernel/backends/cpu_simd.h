// Included (after cpu_prelude.h) in the vector build of a kernel: see _cpu_simd.py.
// The threads of a group run as iterations of one lane loop that g++ vectorises. A buffer access
// cannot call out on its out-of-range branch there, so the rewritten accessors below are masked
// (reads past the end give 0, writes past the end are dropped, as on the scalar path) and count
// out-of-range accesses in a per-thread accumulator that the lane entry folds into sk_bounds_report
// after its slice. The accumulator lives in one small runtime library (sk_simd_rt.so) with
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

struct SkSimdAcc { uint64_t count, index, size, data; };
extern __thread SkSimdAcc sk_simd_acc __attribute__((tls_model("initial-exec")));

static inline __attribute__((always_inline)) void sk_simd_note(bool ok, size_t i, size_t n, const void* d)
{
    // Unconditional and branch-free: a sum and three conditional selects (vector reductions).
    // (selects as bit masks: g++ would turn `bad ? i : index` back into a branch)
    uint64_t bad = !ok, m = 0 - bad;
    sk_simd_acc.count += bad;
    sk_simd_acc.index ^= (sk_simd_acc.index ^ (uint64_t)i) & m;
    sk_simd_acc.size ^= (sk_simd_acc.size ^ (uint64_t)n) & m;
    sk_simd_acc.data ^= (sk_simd_acc.data ^ (uint64_t)(uintptr_t)d) & m;
}

template <class T>
static inline __attribute__((always_inline)) T sk_simd_load(T* data, size_t count, size_t i)
{
    bool ok = i < count;
    sk_simd_note(ok, i, count, data);
    T v{};
    if (ok) v = data[i];
    return v;
}

template <class B, class = void> struct sk_simd_is_buffer : std::false_type {};
template <class B>
struct sk_simd_is_buffer<B, std::void_t<decltype(std::declval<B&>().data), decltype(std::declval<B&>().count)>>
    : std::true_type {};

// `*(&(b)[i])` read as a value (Slang's form for buffer element reads).
template <class B, class I>
static inline __attribute__((always_inline)) auto sk_ld(B&& b, I i)
{
    if constexpr (sk_simd_is_buffer<std::remove_reference_t<B>>::value)
        return sk_simd_load(b.data, (size_t)b.count, (size_t)i);
    else {
        auto v = *(&(b)[i]);
        return v;
    }
}

// `*(&(b)[i]) = v;` (Slang's form for buffer element writes).
template <class B, class I, class V>
static inline __attribute__((always_inline)) void sk_st(B&& b, I i, V&& v)
{
    if constexpr (sk_simd_is_buffer<std::remove_reference_t<B>>::value) {
        size_t k = (size_t)i;
        bool ok = k < (size_t)b.count;
        sk_simd_note(ok, k, (size_t)b.count, b.data);
        if (ok) b.data[k] = std::forward<V>(v);
    } else {
        *(&(b)[i]) = std::forward<V>(v);
    }
}

static inline void sk_simd_fold()
{
    SkSimdAcc& a = sk_simd_acc;
    if (a.count) {
        uint64_t n = a.count;
        a.count = 0;
        sk_oob_record((size_t)a.index, (size_t)a.size, (const void*)(uintptr_t)a.data);
        if (n > 1) __atomic_fetch_add(&sk_bounds_report.count, n - 1, __ATOMIC_RELAXED);
    }
}
