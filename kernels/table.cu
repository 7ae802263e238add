/* SPDX-License-Identifier: MIT */
// Module globals: a __constant__ table and a __device__ scale factor that
// clients set by name (cumodctl global), kept by cumodd across reloads.
// out[i] = table[in[i] % 16] * scale + bias.
__constant__ float table[16];
__device__ float scale = 1.0f;
__device__ int calls;

extern "C" __global__ void
lookup(const int *in, float *out, int n, float bias)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = table[in[i] & 15] * scale + bias;
    if (i == 0)
        atomicAdd(&calls, 1);
}
