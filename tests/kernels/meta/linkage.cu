/* SPDX-License-Identifier: MIT */
// Kernels for tests/image_meta_test.c: which functions of a cubin are
// kernels. Built with -rdc and linked by nvlink, so the device functions
// are global symbols with sections of their own (.text.<name>,
// .nv.info.<name>) like kernels; and kernels with internal linkage (static,
// an anonymous namespace), whose symbols are local.
__device__ __noinline__ float
twice(float x)
{
    return x * 2.0f + 1.0f;
}

extern "C" __device__ __noinline__ float
thrice(float x)
{
    return x * 3.0f;
}

static __global__ void
hidden(float *x)
{
    x[threadIdx.x] = twice(x[threadIdx.x]);
}

namespace
{
__global__ void
unnamed(float *x, int n)
{
    if ((int)threadIdx.x < n)
        x[threadIdx.x] = thrice(x[threadIdx.x]);
}
} // namespace

extern "C" __global__ void
shown(float *x)
{
    x[threadIdx.x] = twice(x[threadIdx.x]) + thrice(x[0]);
}

// Host code that names the internal kernels, so that they are kept.
void
linkage_launch(float *x)
{
    hidden<<<1, 1>>>(x);
    unnamed<<<1, 1>>>(x, 1);
}
