/* SPDX-License-Identifier: MIT */
// A kernel that takes a struct by value: y[i] = p.a * x[i] + p.b, with the
// struct's mixed alignment (float, double, int, char) laid out as the ABI does.
struct affine_params {
    float a;
    double b;
    int n;
    char tag;
};

extern "C" __global__ void
affine(struct affine_params p, const double *x, double *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n)
        y[i] = p.a * x[i] + p.b;
}
