/* SPDX-License-Identifier: MIT */
// A C++ function template, explicitly instantiated for float and double, so
// the module holds two kernels with mangled names:
//   _Z4axpyIfEvT_PKS0_PS0_i  axpy<float>
//   _Z4axpyIdEvT_PKS0_PS0_i  axpy<double>
template <typename T>
__global__ void
axpy(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

template __global__ void axpy<float>(float, const float *, float *, int);
template __global__ void axpy<double>(double, const double *, double *, int);
