/* SPDX-License-Identifier: MIT */
// A second generation of vadd.cu with the same signature that computes
// something else (c = a - b), so that a client can see a hot reload change
// its results. Built to build/kernels/variants/vadd.cubin, outside the
// folder the daemon watches; the demo and the tests copy it in.
extern "C" __global__ void
vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] - b[i];
}
