/* SPDX-License-Identifier: MIT */
// Kernels for tests/image_meta_test.c: what the example kernels lack, so
// that every fact cumod__imeta_describe reads has an image to be checked on
// (and the driver report compares each with the real driver): launch
// bounds, a cluster shape in two dimensions, static shared memory, module
// globals of several sizes in both banks. sm_90 and up (clusters).
struct config {
    int mode;
    double gain;
};

__constant__ config cfg;
__constant__ char banner[100];
__device__ double hist[33];
__device__ int hits = 7;

extern "C" __global__ void __launch_bounds__(256, 2) bounded256(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * (float)cfg.gain + (float)banner[i % 100];
}

extern "C" __global__ void __cluster_dims__(2, 2, 1)
    quad(double *out, char tag, short s)
{
    __shared__ double stage[8];
    stage[threadIdx.x % 8] = hist[threadIdx.x % 33] + tag + s;
    __syncthreads();
    out[blockIdx.x] = stage[(threadIdx.x + 1) % 8];
    if (threadIdx.x == 0)
        atomicAdd(&hits, 1);
}
