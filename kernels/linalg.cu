/* SPDX-License-Identifier: MIT */
// C++ kernels whose signatures a user reads: namespaces, templates with
// type and value parameters, references, const pointers, a struct by value.
// Their mangled names (nvcc 13):
//   _ZN6linalg4gemvIfLi4EEEvPKT_S3_PS1_ii      linalg::gemv<float, 4>
//   _ZN6linalg6detail5clampERKfPfi             linalg::detail::clamp
//   _ZN6linalg7saxpy_vENS_4pairEPKfPfi         linalg::saxpy_v
namespace linalg
{

struct pair {
    float a, b;
};

// y = A x for a rows x cols row-major A; UNROLL columns a step.
template <typename T, int UNROLL>
__global__ void
gemv(const T *A, const T *x, T *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    T s = 0;
    int c = 0;
    for (; c + UNROLL <= cols; c += UNROLL)
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            s += A[r * cols + c + u] * x[c + u];
    for (; c < cols; c++)
        s += A[r * cols + c] * x[c];
    y[r] = s;
}

template __global__ void gemv<float, 4>(const float *, const float *, float *,
                                        int, int);

namespace detail
{
// y[i] = min(y[i], hi): hi comes by reference (a pointer to the caller's
// argument bytes, which a kernel cannot use: cumod refuses a value for it).
__global__ void
clamp(const float &hi, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && y[i] > hi)
        y[i] = hi;
}
} // namespace detail

// y = p.a * x + p.b, the pair by value.
__global__ void
saxpy_v(pair p, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = p.a * x[i] + p.b;
}

} // namespace linalg
