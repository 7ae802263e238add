/* SPDX-License-Identifier: MIT */
// Kernels whose one parameter is a struct of 16 B to 4 KiB: launch cost
// against argument bytes (cumod_bench "args"). They read a byte so the
// parameter is kept.
template <int N> struct Bytes {
    unsigned char b[N];
};

template <int N>
__device__ void
touch(const Bytes<N> &a, unsigned char *out)
{
    if (out != nullptr)
        *out = a.b[N - 1];
}

extern "C" __global__ void
args16(Bytes<16> a)
{
    touch(a, nullptr);
}
extern "C" __global__ void
args64(Bytes<64> a)
{
    touch(a, nullptr);
}
extern "C" __global__ void
args256(Bytes<256> a)
{
    touch(a, nullptr);
}
extern "C" __global__ void
args1024(Bytes<1024> a)
{
    touch(a, nullptr);
}
extern "C" __global__ void
args4096(Bytes<4096> a)
{
    touch(a, nullptr);
}
