/* SPDX-License-Identifier: MIT */
// A replacement of table.cu without its `scale` global: a reload to it
// must fail while clients have written scale, the old generation serving.
__constant__ float table[16];
__device__ int calls;

extern "C" __global__ void
lookup(const int *in, float *out, int n, float bias)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = table[in[i] & 15] + bias;
    if (i == 0)
        atomicAdd(&calls, 1);
}
