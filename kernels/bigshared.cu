/* SPDX-License-Identifier: MIT */
// A block reduction that keeps its whole tile in dynamic shared memory:
// launched with more than the 48 KiB a kernel gets without opting in (the
// H100 allows 227 KiB per block to one that does). Each block sums
// blockDim.x * per_thread floats of in and writes one partial sum; the
// tile size is the dynamic shared memory the launch asks for.
extern "C" __global__ void
tile_sum(const float *in, float *partial, int n, int per_thread)
{
    extern __shared__ float tile[];
    int tile_len = blockDim.x * per_thread;
    int base = blockIdx.x * tile_len;
    for (int k = threadIdx.x; k < tile_len; k += blockDim.x)
        tile[k] = base + k < n ? in[base + k] : 0.0f;
    __syncthreads();
    // Each thread sums its stripe, then thread 0 sums the stripes.
    float s = 0.0f;
    for (int k = threadIdx.x; k < tile_len; k += blockDim.x)
        s += tile[k];
    __syncthreads();
    tile[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int k = 0; k < (int)blockDim.x; k++)
            t += tile[k];
        partial[blockIdx.x] = t;
    }
}
