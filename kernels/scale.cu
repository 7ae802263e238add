/* SPDX-License-Identifier: MIT */
// In place: x[i] *= s for i < n.
extern "C" __global__ void
scale(float *x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}
