// Prepended to Slang's generated CUDA when the session is checked (Session(checked=True)): an
// out-of-range buffer index is recorded (first one: index, element count, the buffer's data
// pointer, which the host maps back to the parameter) and redirected to a scratch block, so the
// kernel runs to the end and the host raises BoundsError instead of the context dying with
// CUDA_ERROR_ILLEGAL_ADDRESS. Without checked, Slang's CUDA is left as it is (no checks, fastest).
// (the report struct and sk_oob_slot come first: backends/common/cuda_bounds_report.h)

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
