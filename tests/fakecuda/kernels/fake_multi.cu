/* SPDX-License-Identifier: MIT */
// Test kernels for tests/fakecuda: several kernels in one module, declared
// out of name order, with parameters of every size and alignment class, a
// non-inlined device function, static shared memory and a local array, so
// the fake's parser and the real driver can be compared on more than the
// examples in kernels/.
struct odd3 {
    char a, b, c;
};
struct mix16 {
    double d;
    int i;
};
struct __align__(16) vec32
{
    float v[5];
};
struct blob {
    char bytes[4000];
};

__device__ __noinline__ float
fake_helper(float x, int k)
{
    float acc = x;
    for (int i = 0; i < k; i++)
        acc = acc * 1.5f + (float)i;
    return acc;
}

extern "C" __global__ void
zeta(char c, short s, int i, long long l, float f, double d, const void *p)
{
    if (p != nullptr && threadIdx.x == 0)
        ((double *)p)[0] = c + s + i + l + f + d;
}

extern "C" __global__ void
alpha(struct odd3 a, struct mix16 b, char c, struct vec32 v, float *out)
{
    out[threadIdx.x] = a.a + a.b + a.c + b.d + b.i + c + v.v[0] + v.v[4];
}

extern "C" __global__ void
middle(float *out, int k)
{
    __shared__ float tile[256];
    float local[64];
    for (int i = 0; i < 64; i++)
        local[i] = fake_helper((float)(threadIdx.x + i), k);
    tile[threadIdx.x % 256] = local[k & 63];
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % 256];
}

extern "C" __global__ void
big(struct blob b, unsigned char *out)
{
    out[threadIdx.x] = b.bytes[threadIdx.x % 4000];
}

extern "C" __global__ void __launch_bounds__(128) bounded(int *out)
{
    out[threadIdx.x] = (int)threadIdx.x;
}
