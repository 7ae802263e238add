/* SPDX-License-Identifier: MIT */
// A kernel whose PTX takes the JIT a long time: thousands of straight-line,
// data-dependent steps. For measuring what a slow module load holds up.
#define STEP                                                                   \
    a = a * 1.0001f + __sinf(a) * b;                                           \
    b = b * 0.9999f + __cosf(a) * p[(int)b & 255];
#define S10 STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP
#define S100 S10 S10 S10 S10 S10 S10 S10 S10 S10 S10
#define S1000 S100 S100 S100 S100 S100 S100 S100 S100 S100 S100

extern "C" __global__ void
heavy(float *p)
{
    float a = p[threadIdx.x & 255], b = p[(threadIdx.x + 1) & 255];
    S100 S100 S100 S100 S100 p[threadIdx.x & 255] = a + b;
}
