/* SPDX-License-Identifier: MIT */
/*
 * Preloaded into a client (LD_PRELOAD) by shutdown_test: with
 * CUMOD_TEST_HANG_CLOSE set, nng_close never returns, as it can in nng
 * 1.5 to 1.7 when a reply lands on a closing connection (nng #1813).
 * Without it, nng's own nng_close runs.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <nng/nng.h>

int
nng_close(nng_socket s)
{
    if (getenv("CUMOD_TEST_HANG_CLOSE") != NULL)
        for (;;)
            pause();
    int (*real)(nng_socket) =
        (int (*)(nng_socket))dlsym(RTLD_NEXT, "nng_close");
    return real != NULL ? real(s) : NNG_ENOTSUP;
}
