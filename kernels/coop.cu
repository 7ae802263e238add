/* SPDX-License-Identifier: MIT */
// A cooperative kernel: every block adds its part, the grid synchronizes
// (which only a cooperative launch allows), then block 0 sums the parts.
// out[0] is the sum of in[0..n).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void
grid_sum(const int *in, int *parts, int *out, int n)
{
    cg::grid_group g = cg::this_grid();
    int s = 0;
    for (int i = (int)g.thread_rank(); i < n; i += (int)g.size())
        s += in[i];
    atomicAdd(&parts[blockIdx.x], s);
    g.sync();
    if (g.thread_rank() == 0) {
        int t = 0;
        for (unsigned b = 0; b < gridDim.x; b++)
            t += parts[b];
        out[0] = t;
    }
}
