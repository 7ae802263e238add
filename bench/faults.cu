/* SPDX-License-Identifier: MIT */
// Kernels that end a CUDA context, one way each, for the fault suites and
// benchmarks (gpu_fault_test, cumod_bench): none of them is in the example
// folder. Each takes the same one pointer argument, so a test can launch
// any of them alike.
#include <assert.h>

// Writes 2^40 bytes past p: an address nothing maps, so the context dies
// with CUDA_ERROR_ILLEGAL_ADDRESS.
extern "C" __global__ void
oob(float *p)
{
    p[threadIdx.x + (1ull << 38)] = 1.0f;
}

// A device-side assert that fails: CUDA_ERROR_ASSERT.
extern "C" __global__ void
dev_assert(float *p)
{
    assert(p == nullptr);
}

// A trap instruction: CUDA_ERROR_LAUNCH_FAILED (or ILLEGAL_INSTRUCTION).
extern "C" __global__ void
trap(float *p)
{
    (void)p;
    __trap();
}

// Spins until *p becomes nonzero, which nobody does: a kernel that never
// returns, for deadlines.
extern "C" __global__ void
hang(float *p)
{
    while (*(volatile float *)p == 0.0f)
        __nanosleep(1000);
}
