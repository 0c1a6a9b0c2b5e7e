// The first out-of-range access of a CUDA launch, recorded where it happens (index, element count, the
// buffer's data pointer, the thread) and redirected to a scratch block, so the kernel runs to the end and
// the host raises BoundsError instead of the context dying with CUDA_ERROR_ILLEGAL_ADDRESS. Shared by the
// CUDA backend's checked prelude (backends/cuda/cuda_prelude.h) and checked slangtorch launches
// (torch/slangtorch/_debug.py); both read the struct back as 7 unsigned 64-bit words.
struct SkBoundsReport { unsigned long long count, index, size, data, thread[3]; };  // thread: SV_DispatchThreadID
extern "C" __device__ SkBoundsReport sk_bounds_report;  // zeroed by the host before each launch
__device__ __align__(64) unsigned char sk_scratch[1 << 16];

__device__ inline void* sk_oob_slot(unsigned long long bytes, unsigned long long index, unsigned long long count,
                                   const void* data)
{
    if (atomicAdd(&sk_bounds_report.count, 1ULL) == 0ULL) {
        sk_bounds_report.index = index;
        sk_bounds_report.size = count;
        sk_bounds_report.data = (unsigned long long)data;
        sk_bounds_report.thread[0] = blockIdx.x * blockDim.x + threadIdx.x;
        sk_bounds_report.thread[1] = blockIdx.y * blockDim.y + threadIdx.y;
        sk_bounds_report.thread[2] = blockIdx.z * blockDim.z + threadIdx.z;
    }
    return sk_scratch;
}
