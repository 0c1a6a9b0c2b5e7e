// slang-kernel's stand-in for the few PyTorch/ATen/pybind11 names that Slang's torch-binding C++
// (the host code of [TorchEntryPoint] functions) uses, so that code builds with g++ in about a second
// instead of as a PyTorch C++ extension (minutes). Tensors stay in Python: a torch::Tensor here is a
// handle plus the metadata the generated code reads; allocation, fills, kernel launches and the current
// stream are callbacks into Python (SkHost, below), and pybind11's module definition becomes a table of
// functions called through one C entry point, sk_call, with arguments and results as SkValue trees.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define SK_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
enum { SK_MAX_DIM = 8 };
// The C ABI shared with slang_kernel/torch/slangtorch/_host_abi.py (keep the two in step).
typedef struct SkTensor {
    int64_t handle;               // index into the Python side's table of this call's tensors
    uint64_t data;                // data_ptr()
    int32_t dtype;                // c10::ScalarType code
    int32_t is_cuda;
    int32_t ndim;
    int32_t pad;
    int64_t sizes[SK_MAX_DIM];
    int64_t strides[SK_MAX_DIM];  // in elements, as torch reports them
} SkTensor;

enum { SK_NONE = 0, SK_INT = 1, SK_FLOAT = 2, SK_BOOL = 3, SK_TENSOR = 4, SK_TUPLE = 5, SK_STRING = 6 };

typedef struct SkValue {          // one node of a value tree, in pre-order (a tuple's items follow it)
    int32_t kind;
    int32_t count;                // SK_TUPLE: number of items
    int64_t i;
    double f;
    const char* s;
    SkTensor tensor;
} SkValue;

typedef struct SkHost {           // callbacks into Python; each returns 0, or nonzero after recording an error
    int (*alloc)(int64_t like, int32_t dtype, int32_t ndim, const int64_t* sizes, SkTensor* out);
    int (*fill)(int64_t handle, double value);
    int (*launch)(const char* kernel, const uint32_t* grid, const uint32_t* block, void** args,
                  uint64_t shared_mem, uint64_t stream);
    uint64_t (*stream)(void);
    int (*sync)(uint64_t stream);
    int (*emit)(const SkValue* value);
} SkHost;
}

namespace sk {
// Internal linkage: every module's library has its own (they may be loaded side by side).
namespace {
thread_local const SkHost* g_host = nullptr;   // set by sk_call for its own thread

struct HostError : std::exception {       // a callback failed; Python holds the exception to raise
    const char* what() const noexcept override { return "slang-kernel host callback failed"; }
};

inline const SkHost& host() {
    if (!g_host) throw std::runtime_error("slang-kernel: host callbacks used outside sk_call");
    return *g_host;
}

inline void ok(int rc) {
    if (rc != 0) throw HostError();
}

std::vector<std::pair<const void*, const char*>>& kernels() {
    static std::vector<std::pair<const void*, const char*>> table;
    return table;
}

struct KernelName {                       // filled by the stubs appended to the generated code
    KernelName(const void* fn, const char* name) { kernels().emplace_back(fn, name); }
};

inline const char* kernel_name(const void* fn) {
    for (auto& k : kernels())
        if (k.first == fn) return k.second;
    throw std::runtime_error("slang-kernel: launch of a function that is not a [CUDAKernel] of this module");
}

[[noreturn]] inline void kernel_stub(const char* name) {
    throw std::runtime_error(std::string(name) + " is a CUDA kernel: it runs on the GPU, not in host code");
}
}  // namespace
}  // namespace sk

namespace c10 {
enum class ScalarType : int8_t {
    Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7, Bool = 11, BFloat16 = 15
};
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
struct Half { uint16_t x; };
struct BFloat16 { uint16_t x; };
struct Device {
    DeviceType type;
    bool is_cuda() const { return type == DeviceType::CUDA; }
    bool is_cpu() const { return type == DeviceType::CPU; }
};
}  // namespace c10

namespace torch {
using ScalarType = c10::ScalarType;
using Half = c10::Half;
using BFloat16 = c10::BFloat16;
using Device = c10::Device;
constexpr ScalarType kUInt8 = ScalarType::Byte, kInt8 = ScalarType::Char, kInt16 = ScalarType::Short,
                     kInt32 = ScalarType::Int, kInt64 = ScalarType::Long, kFloat16 = ScalarType::Half,
                     kFloat32 = ScalarType::Float, kFloat64 = ScalarType::Double, kBool = ScalarType::Bool,
                     kBFloat16 = ScalarType::BFloat16;
constexpr c10::DeviceType kCUDA = c10::DeviceType::CUDA, kCPU = c10::DeviceType::CPU;

struct TensorOptions {
    ScalarType dtype_ = kFloat32;
    c10::DeviceType device_ = kCPU;
    TensorOptions device(c10::DeviceType d) const { TensorOptions o = *this; o.device_ = d; return o; }
    TensorOptions dtype(ScalarType t) const { TensorOptions o = *this; o.dtype_ = t; return o; }
};

class Tensor {
  public:
    Tensor() { std::memset(&info_, 0, sizeof info_); info_.handle = -1; }
    explicit Tensor(const SkTensor& info) : info_(info) {}
    const SkTensor& info() const { return info_; }
    bool defined() const { return info_.handle >= 0; }
    int64_t dim() const { return info_.ndim; }
    int64_t dims() const { return info_.ndim; }
    int64_t size(int64_t d) const { return info_.sizes[wrap(d)]; }
    int64_t stride(int64_t d) const { return info_.strides[wrap(d)]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int32_t d = 0; d < info_.ndim; ++d) n *= info_.sizes[d];
        return n;
    }
    ScalarType scalar_type() const { return static_cast<ScalarType>(info_.dtype); }
    ScalarType dtype() const { return scalar_type(); }
    Device device() const { return Device{info_.is_cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU}; }
    bool is_cuda() const { return info_.is_cuda != 0; }
    bool is_contiguous() const {
        int64_t expected = 1;
        for (int32_t d = info_.ndim - 1; d >= 0; --d) {
            if (info_.sizes[d] != 1 && info_.strides[d] != expected) return false;
            expected *= info_.sizes[d];
        }
        return true;
    }
    template <class T> T* data_ptr() const { return reinterpret_cast<T*>(static_cast<uintptr_t>(info_.data)); }
    void* data_ptr() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(info_.data)); }
    Tensor& zero_() { return fill_(0.0); }
    template <class V> Tensor& fill_(V value) {
        sk::ok(sk::host().fill(info_.handle, static_cast<double>(value)));
        return *this;
    }

  private:
    int64_t wrap(int64_t d) const {
        int64_t w = d < 0 ? d + info_.ndim : d;
        if (w < 0 || w >= info_.ndim)
            throw std::out_of_range("dimension " + std::to_string(d) + " of a " + std::to_string(info_.ndim) +
                                    "-dimensional tensor");
        return w;
    }
    SkTensor info_;
};

inline Tensor alloc(int64_t like, ScalarType dtype, const std::vector<int64_t>& sizes, c10::DeviceType device) {
    if (device != kCUDA) throw std::runtime_error("slang-kernel: host code allocates CUDA tensors only");
    if (sizes.size() > SK_MAX_DIM) throw std::runtime_error("slang-kernel: too many dimensions");
    SkTensor out;
    std::memset(&out, 0, sizeof out);
    sk::ok(sk::host().alloc(like, static_cast<int32_t>(dtype), static_cast<int32_t>(sizes.size()), sizes.data(), &out));
    return Tensor(out);
}

inline Tensor empty_like(const Tensor& other, const TensorOptions& o) {
    return alloc(other.info().handle, o.dtype_, {}, o.device_);
}

inline Tensor empty(std::initializer_list<int64_t> sizes, const TensorOptions& o) {
    return alloc(-1, o.dtype_, std::vector<int64_t>(sizes), o.device_);
}
}  // namespace torch

namespace at {
using torch::Tensor;
using Half = c10::Half;
using BFloat16 = c10::BFloat16;
using ScalarType = c10::ScalarType;
}  // namespace at

// --- CUDA runtime names the generated host code uses ----------------------------------------------
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
struct dim3 { unsigned int x, y, z; };

namespace at { namespace cuda {
struct CUDAStream {
    uint64_t id;
    operator cudaStream_t() const { return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(id)); }
    cudaStream_t stream() const { return *this; }
};
inline CUDAStream getCurrentCUDAStream() { return CUDAStream{sk::host().stream()}; }
}}  // namespace at::cuda

inline cudaError_t cudaLaunchKernel(const void* fn, dim3 grid, dim3 block, void** args, size_t shared_mem,
                                    cudaStream_t stream) {
    const uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
    sk::ok(sk::host().launch(sk::kernel_name(fn), g, b, args, shared_mem,
                             static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream))));
    return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    sk::ok(sk::host().sync(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream))));
    return cudaSuccess;
}

#define AT_CUDA_CHECK(expr)                                                                           \
    do {                                                                                              \
        cudaError_t sk_err_ = (expr);                                                                 \
        if (sk_err_ != cudaSuccess) throw std::runtime_error("CUDA error " + std::to_string(sk_err_)); \
    } while (0)

// --- arguments in, results out: SkValue trees <-> C++ values ---------------------------------------
namespace sk {
namespace {
template <class T> struct is_tuple : std::false_type {};
template <class... A> struct is_tuple<std::tuple<A...>> : std::true_type {};

const char* kind_name(int32_t kind) {
    switch (kind) {
    case SK_NONE: return "None";
    case SK_INT: return "an int";
    case SK_FLOAT: return "a float";
    case SK_BOOL: return "a bool";
    case SK_TENSOR: return "a tensor";
    case SK_TUPLE: return "a tuple";
    default: return "a string";
    }
}

struct Reader {
    const SkValue* values;
    int32_t count;
    int32_t at = 0;
    int32_t count_args = 0;
    std::string where;

    const SkValue& next() {
        if (at >= count) throw std::runtime_error(where + ": too few values");
        return values[at++];
    }

    [[noreturn]] void mismatch(const char* want, const SkValue& v) {
        throw std::invalid_argument(where + ": expected " + want + ", got " + kind_name(v.kind));
    }

    template <class T> T read() {
        if constexpr (std::is_same_v<T, torch::Tensor>) {
            const SkValue& v = next();
            if (v.kind != SK_TENSOR) mismatch("a tensor", v);
            return torch::Tensor(v.tensor);
        } else if constexpr (is_tuple<T>::value) {
            const SkValue& v = next();
            constexpr int32_t n = static_cast<int32_t>(std::tuple_size<T>::value);
            if (v.kind != SK_TUPLE) mismatch(("a tuple of " + std::to_string(n)).c_str(), v);
            if (v.count != n)
                throw std::invalid_argument(where + ": expected a tuple of " + std::to_string(n) + ", got " +
                                            std::to_string(v.count) + " items");
            return read_items<T>(std::make_index_sequence<std::tuple_size<T>::value>{});
        } else {
            const SkValue& v = next();
            double f = v.kind == SK_FLOAT ? v.f : static_cast<double>(v.i);
            if (v.kind != SK_FLOAT && v.kind != SK_INT && v.kind != SK_BOOL) mismatch("a number", v);
            if constexpr (std::is_same_v<T, bool>) {
                return v.kind == SK_FLOAT ? v.f != 0.0 : v.i != 0;
            } else if constexpr (std::is_integral_v<T>) {
                if (v.kind == SK_FLOAT) mismatch("an int", v);
                return static_cast<T>(v.i);
            } else if constexpr (std::is_arithmetic_v<T>) {
                return static_cast<T>(f);
            } else {
                return T(static_cast<float>(f));   // half, as Slang's C++ prelude defines it
            }
        }
    }

    template <class T, size_t... I> T read_items(std::index_sequence<I...>) {
        // braced initialisation evaluates left to right: the items are read in order
        return T{read<std::tuple_element_t<I, T>>()...};
    }
};

struct Writer {
    void put(const SkValue& v) { ok(host().emit(&v)); }
    static SkValue blank(int32_t kind) {
        SkValue v;
        std::memset(&v, 0, sizeof v);
        v.kind = kind;
        return v;
    }

    template <class T> void write(const T& value) {
        if constexpr (std::is_same_v<T, torch::Tensor>) {
            SkValue v = blank(SK_TENSOR);
            v.tensor = value.info();
            put(v);
        } else if constexpr (is_tuple<T>::value) {
            SkValue v = blank(SK_TUPLE);
            v.count = static_cast<int32_t>(std::tuple_size<T>::value);
            put(v);
            std::apply([this](const auto&... item) { (write(item), ...); }, value);
        } else if constexpr (std::is_same_v<T, bool>) {
            SkValue v = blank(SK_BOOL);
            v.i = value ? 1 : 0;
            put(v);
        } else if constexpr (std::is_integral_v<T>) {
            SkValue v = blank(SK_INT);
            v.i = static_cast<int64_t>(value);
            put(v);
        } else if constexpr (std::is_arithmetic_v<T>) {
            SkValue v = blank(SK_FLOAT);
            v.f = static_cast<double>(value);
            put(v);
        } else if constexpr (std::is_convertible_v<T, const char*>) {
            SkValue v = blank(SK_STRING);
            v.s = static_cast<const char*>(value);
            put(v);
        } else {
            SkValue v = blank(SK_FLOAT);   // half
            v.f = static_cast<double>(static_cast<float>(value));
            put(v);
        }
    }
};

struct Module {                           // what pybind11's `m` is here: name -> caller
    std::vector<std::pair<std::string, std::function<void(Reader&, Writer&)>>> functions;

    template <class R, class... A> void def(const char* name, R (*fn)(A...), const char* = nullptr) {
        std::string fname = name;
        functions.emplace_back(fname, [fn, fname](Reader& in, Writer& out) {
            constexpr int32_t n = static_cast<int32_t>(sizeof...(A));
            if (in.count_args != n)
                throw std::invalid_argument(fname + "() takes " + std::to_string(n) + " argument(s), got " +
                                            std::to_string(in.count_args));
            std::tuple<std::decay_t<A>...> args = read_args<std::tuple<std::decay_t<A>...>>(
                in, fname, std::make_index_sequence<sizeof...(A)>{});
            if constexpr (std::is_void_v<R>) {
                std::apply(fn, std::move(args));
                out.put(Writer::blank(SK_NONE));
            } else {
                out.write(std::apply(fn, std::move(args)));
            }
        });
    }

    template <class T, size_t... I>
    static T read_args(Reader& in, const std::string& fname, std::index_sequence<I...>) {
        return T{read_arg<std::tuple_element_t<I, T>>(in, fname, I)...};
    }

    template <class T> static T read_arg(Reader& in, const std::string& fname, size_t index) {
        in.where = fname + "() argument " + std::to_string(index + 1);
        return in.read<T>();
    }
};
}  // namespace
}  // namespace sk

#define TORCH_EXTENSION_NAME sk_module
static void sk_bind(::sk::Module& m);
#define PYBIND11_MODULE(name, m) static void sk_bind(::sk::Module& m)

namespace sk {
namespace {
Module& module() {
    static Module m;
    static bool bound = (sk_bind(m), true);
    (void)bound;
    return m;
}
}  // namespace
}  // namespace sk

// Names of the module's functions, one per line; the buffer's needed size if it is too small.
SK_EXPORT int64_t sk_functions(char* buffer, int64_t size) {
    std::string names;
    for (auto& f : sk::module().functions) names += f.first + "\n";
    if (static_cast<int64_t>(names.size()) + 1 > size) return static_cast<int64_t>(names.size()) + 1;
    std::memcpy(buffer, names.c_str(), names.size() + 1);
    return 0;
}

// Call function `name` with `nargs` arguments (pre-order trees in `args`); the result is emitted
// through host->emit. Returns 0; 1 with a message in `error` (C++ exception); 2 if a callback failed.
SK_EXPORT int sk_call(const SkHost* host, const char* name, const SkValue* args, int32_t nvalues, int32_t nargs,
                      char* error, int32_t error_size) {
    auto fail = [&](const std::string& message) {
        std::strncpy(error, message.c_str(), static_cast<size_t>(error_size) - 1);
        error[error_size - 1] = 0;
    };
    sk::g_host = host;
    int rc = 0;
    try {
        bool found = false;
        for (auto& f : sk::module().functions) {
            if (f.first != name) continue;
            sk::Reader in{args, nvalues};
            in.count_args = nargs;
            sk::Writer out;
            f.second(in, out);
            found = true;
            break;
        }
        if (!found) {
            fail(std::string("no function ") + name + " in this module");
            rc = 1;
        }
    } catch (const sk::HostError&) {
        rc = 2;
    } catch (const std::invalid_argument& e) {
        fail(std::string("TypeError:") + e.what());
        rc = 1;
    } catch (const std::exception& e) {
        fail(e.what());
        rc = 1;
    }
    sk::g_host = nullptr;
    return rc;
}
