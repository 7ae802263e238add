/* SPDX-License-Identifier: MIT */
// Writes through a null pointer: an illegal-address fault, for measuring
// how fast cumodd serves again after one. Not in the example folder.
extern "C" __global__ void
fault(int *p)
{
    p[threadIdx.x] = 1;
}
