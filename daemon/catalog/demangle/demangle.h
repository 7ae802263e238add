/* SPDX-License-Identifier: MIT */
/*
 * Kernel names as a person reads them: a demangler for the C++ function
 * names nvcc emits (the Itanium C++ ABI), so that the catalog can show a
 * C++ kernel by its signature and name its parameters in error messages.
 *
 * The output reads like CUDA source rather than like c++filt: const is
 * written before what it qualifies ("const float*", "const float* const*"),
 * the return type is dropped (kernels return void), template arguments are
 * "<float, 4>", literals are "true", "-3", "7" (no "u" or "ll" suffix;
 * characters and enumerators keep a cast: "(char)97", "(ns::mode)1"), and
 * "__restrict__" is left out. Types nvcc writes as classes (__half,
 * __nv_bfloat16, float4) come out as their source names.
 *
 * What is understood: functions at namespace scope, plain or templated,
 * with parameters of builtin, class, enum, pointer, reference (& and &&),
 * cv-qualified, array and function-pointer types; template arguments that
 * are types, integer/bool/char/enum/nullptr literals, template parameters
 * (X T_ E), packs (J...E) and pack expansions (Dp); substitutions and the
 * std abbreviations (St, Sa, Sb, Ss, Si, So, Sd); ABI tags; anonymous
 * namespaces. What is refused (-1): extern "C" names (no _Z prefix), data
 * and special names (vtables, guards), local names (Z...E, and so lambdas
 * and the closures CUB/Thrust get from them), unnamed types (Ut_, Ul),
 * operators, constructors, destructors, member functions (N K...E),
 * pointers to members, decltype, vector and complex types, floating-point
 * literals, and template arguments that are expressions other than a bare
 * template parameter or literal.
 *
 * Nothing here keeps state between calls: any thread may call at any time,
 * and nothing blocks.
 */
#ifndef CUMOD_DEMANGLE_H
#define CUMOD_DEMANGLE_H

#include <stddef.h>

/* Names longer than this are refused (-1) without being read further. The
 * longest CUTLASS/CUB kernel names are a few KiB. */
#define CUMOD_DM_MANGLED_MAX 32768

/* The most bytes one call may print, over all its strings together: a name
 * whose substitutions expand past it is refused. */
#define CUMOD_DM_OUT_MAX (1u << 20)

/* One parameter of a demangled signature. */
typedef struct cumod_dm_param {
    /* As a person writes it: "const float*", "float&", "int",
     * "linalg::pair", "__half". Owned by the cumod_demangled. */
    char *type;
    int indirect;  /* 1 for a pointer or a reference: the kernel receives an
                      address (8 bytes) */
    int reference; /* 1 for a reference (& or &&) */
} cumod_dm_param;

/* A demangled kernel name. Every string is NUL-terminated and owned here. */
typedef struct cumod_demangled {
    /* The qualified name with its template arguments:
     * "linalg::gemv<float, 4>". */
    char *name;
    /* name(params): "linalg::gemv<float, 4>(const float*, const float*,
     * float*, int, int)"; "f()" for no parameters. */
    char *signature;
    size_t nparams;
    cumod_dm_param *params; /* nparams of them; NULL when nparams is 0 */
} cumod_demangled;

/* Demangles one kernel name. 0 with *out filled (owned by the caller, freed
 * with cumod__demangled_fini) when mangled is an Itanium mangled function
 * name this demangler understands (see above); -1 with *out untouched and
 * nothing allocated for a plain extern "C" name (no _Z prefix), for any
 * name it cannot parse completely, for names over CUMOD_DM_MANGLED_MAX and
 * for results over CUMOD_DM_OUT_MAX, and when memory runs out. Never a
 * partial result. Any input is safe: nothing past its NUL is read, and
 * recursion, node count, output and work are bounded (a few milliseconds
 * at worst, microseconds for real names). Any thread; never blocks. */
int cumod__demangle(const char *mangled, cumod_demangled *out);

/* Frees what cumod__demangle put in d and zeroes it. Accepts a zeroed d,
 * and d == NULL. */
void cumod__demangled_fini(cumod_demangled *d);

#endif
