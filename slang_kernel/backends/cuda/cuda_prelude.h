// Prepended to Slang's generated CUDA when the session is checked (Session(checked=True)): an
// out-of-range buffer index is recorded (first one: index, element count, the buffer's data
// pointer, which the host maps back to the parameter) and redirected to a scratch block, so the
// kernel runs to the end and the host raises BoundsError instead of the context dying with
// CUDA_ERROR_ILLEGAL_ADDRESS. Without checked, Slang's CUDA is left as it is (no checks, fastest).
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

__device__ inline unsigned long long sk_oob_byte_index(unsigned long long index, unsigned long long bytes,
                                                       const void* data)
{
    sk_oob_slot(0, index / 4, bytes / 4, data);
    return (unsigned long long)sk_scratch - (unsigned long long)data;
}

#define SLANG_BOUND_CHECK(index, count) \
    if ((unsigned long long)(index) >= (unsigned long long)(count)) \
        return *(T*)sk_oob_slot(sizeof(T), (unsigned long long)(index), (unsigned long long)(count), this->data);

#define SLANG_BOUND_CHECK_FIXED_ARRAY(index, count) \
    if ((unsigned long long)(index) >= (unsigned long long)(count)) \
        return *(T*)sk_oob_slot(sizeof(T), (unsigned long long)(index), (unsigned long long)(count), 0);

#define SLANG_BOUND_CHECK_BYTE_ADDRESS(index, elemSize, sizeInBytes) \
    if ((unsigned long long)(sizeInBytes) < (unsigned long long)(elemSize) || \
        (unsigned long long)(index) > (unsigned long long)(sizeInBytes) - (unsigned long long)(elemSize)) \
        index = sk_oob_byte_index((unsigned long long)(index), (unsigned long long)(sizeInBytes), this->data);
