/* SPDX-License-Identifier: MIT */
// A kernel for tests/image_meta_test.c whose parameters take more than
// 4 KiB: ptxas describes each parameter with EIATTR_KPARAM_INFO_V2 (the
// size in a whole word) instead of EIATTR_KPARAM_INFO.
struct blob5000 {
    char bytes[5000];
};

extern "C" __global__ void
wide(char c, struct blob5000 b, double d, const float *p, short s)
{
    ((double *)p)[threadIdx.x] = b.bytes[threadIdx.x * 7] + c + d + s;
}
