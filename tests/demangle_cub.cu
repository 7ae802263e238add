/* SPDX-License-Identifier: MIT */
// CUB and Thrust kernels, for demangle_test: instantiating these host calls
// makes nvcc emit the library's kernels (reductions, a scan, a radix sort, a
// transform), whose names carry what real libraries put there: deep
// namespaces with versioned inline names, policy classes, enumerators as
// template arguments, packs and pack expansions. The test needs every one of
// them to demangle; it checks exact signatures on a copy of the names as
// nvcc 13.0 wrote them (the version is part of the names).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

void
host_cub(const float *in, float *out, int n, void *tmp, size_t bytes)
{
    cub::DeviceReduce::Sum(tmp, bytes, in, out, n);
    cub::DeviceReduce::Max(tmp, bytes, in, out, n);
    cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, n);
    cub::DeviceRadixSort::SortKeys(tmp, bytes, (const unsigned *)in,
                                   (unsigned *)out, n);
}

void
host_thrust(thrust::device_vector<float> &a, thrust::device_vector<float> &b)
{
    thrust::transform(a.begin(), a.end(), b.begin(), b.begin(),
                      thrust::plus<float>());
}
