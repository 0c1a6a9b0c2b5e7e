
__device__ float cu_get_my_const()
{
    return %CONST_VAL%;
}