/* SPDX-License-Identifier: MIT */
// Spins for ns nanoseconds of the GPU's global timer: a long kernel that
// holds one block, for measuring what waits behind device work.
extern "C" __global__ void
spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
