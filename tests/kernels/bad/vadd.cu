/* SPDX-License-Identifier: MIT */
// A bad generation of kernels/vadd.cu: the same signature, but thread 0
// also writes through a wild pointer, so every launch faults the context
// (CUDA_ERROR_ILLEGAL_ADDRESS) on a real GPU. cumod_fake_poison is never
// launched: its presence makes tests/fakecuda fault every launch of this
// image (CUMOD_FAKE_FAULT=poison:cumod_fake_poison), so the fault follows
// these bytes on the fake driver too. The fault suites copy it over a good
// vadd to test quarantine and rollback.
extern "C" __global__ void
vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
    if (i == 0)
        *(volatile float *)(unsigned long long)0x10 = 1.0f;
}

extern "C" __global__ void
cumod_fake_poison(void)
{
}
