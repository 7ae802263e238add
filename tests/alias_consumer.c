/* SPDX-License-Identifier: MIT */
/* A program of a project that builds cumod with add_subdirectory() and
 * links cumod::cumod (the ALIAS of the shared libcumod): it compiles
 * against the public headers only and calls the library (tests/
 * CMakeLists.txt, test alias_consumer). */
#include <cumod/cumod.h>
#include <cumod/version.h>
#include <stdio.h>

int
main(void)
{
    cumod_client *c = NULL;
    int rv = cumod_open("ipc:///nonexistent/cumodd.sock", 100, &c);

    printf("%s %s\n", CUMOD_VERSION_STRING, cumod_errname(rv));
    return c == NULL ? 0 : 1;
}
