/* SPDX-License-Identifier: MIT */
/*
 * What demangle_test expects: mangled names and the signatures
 * cumod__demangle must give for them (NULL: it must refuse). The nvcc and
 * CUB tables hold names nvcc 13.0 (V13.0.88) wrote; their signatures are
 * c++filt's with the house format applied (const first, no return type, no
 * literal suffixes, ">>"), and so are the hand-written ones'. Nothing here
 * runs c++filt.
 */
#ifndef CUMOD_DEMANGLE_CASES_H
#define CUMOD_DEMANGLE_CASES_H

#include <stddef.h>

#include "catalog/demangle/demangle.h"

typedef struct dm_case {
    const char *mangled;
    const char *signature; /* NULL: refused */
} dm_case;

/* The kernels of tests/demangle_kernels.cu, kernels/linalg.cu and
 * kernels/axpy.cu, but for those in an anonymous namespace (their names
 * carry a hash of the file): dm_nvcc_anon has their signatures. */
extern const dm_case dm_nvcc_cases[];
extern const size_t dm_nvcc_ncases;
extern const char *const dm_nvcc_anon[];
extern const size_t dm_nvcc_nanon;

/* CUB and Thrust kernels (tests/demangle_cub.cu) as nvcc 13.0 named them. */
extern const dm_case dm_cub_cases[];
extern const size_t dm_cub_ncases;

/* Hand-written names for the parts of the grammar nvcc's kernels do not
 * reach (rvalue references, std abbreviations, function types...) and for
 * what must be refused. */
extern const dm_case dm_hand_cases[];
extern const size_t dm_hand_ncases;

/* 1 if d holds together: the signature is the name and the parameters'
 * types, no string is empty, the flags are 0 or 1, a reference is
 * indirect. */
int dm_consistent(const cumod_demangled *d);

#endif
