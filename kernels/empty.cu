/* SPDX-License-Identifier: MIT */
// Does nothing: the floor for launch overhead.
extern "C" __global__ void
empty(void)
{
}
