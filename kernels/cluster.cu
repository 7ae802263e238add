/* SPDX-License-Identifier: MIT */
// Thread block clusters (sm_90): a kernel compiled for clusters of 2
// blocks, and one that takes its cluster shape at launch. Each block writes
// its rank in the cluster and the cluster's size, and the first block of a
// cluster reads its partner's shared memory through distributed shared
// memory, so a wrong cluster shape gives wrong numbers.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_pair(int *out)
{
    __shared__ int mine;
    cg::cluster_group c = cg::this_cluster();
    if (threadIdx.x == 0)
        mine = (int)blockIdx.x * 10;
    c.sync();
    if (threadIdx.x == 0) {
        int *peer = c.map_shared_rank(&mine, c.block_rank() ^ 1);
        out[3 * blockIdx.x + 0] = (int)c.block_rank();
        out[3 * blockIdx.x + 1] = (int)c.num_blocks();
        out[3 * blockIdx.x + 2] = *peer;
    }
    c.sync();
}

extern "C" __global__ void
cluster_any(int *out)
{
    cg::cluster_group c = cg::this_cluster();
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x + 0] = (int)c.block_rank();
        out[2 * blockIdx.x + 1] = (int)c.num_blocks();
    }
}
