/* SPDX-License-Identifier: MIT */
// Kernels whose mangled names tests/demangle_test.c reads back from the
// cubin nvcc makes of this file (-cubin -arch=sm_90 --extended-lambda) and
// checks against the signatures it expects: what C++ kernels put in their
// names. nvcc refuses __global__ member functions (static ones too) and
// rvalue reference parameters, so neither appears; the test's hand-written
// names cover those parts of the grammar. Bodies are empty: only the names
// matter.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace outer
{
namespace inner
{

struct vec3 {
    float x, y, z;
};
enum class mode { fast, exact };

template <typename T> struct holder {
    T *p;
};
template <typename T, int N> struct arr {
    T v[N];
};

// Type and value parameters of each kind; the second and third parameters
// repeat types (substitutions).
template <typename A, typename B, int N, bool F, unsigned M, long long Q>
__global__ void
multi(A *a, const B *b, A &r, int n)
{
}
template __global__ void
multi<float, double, -3, true, 7u, 100000000000ll>(float *, const double *,
                                                   float &, int);
template __global__ void
multi<vec3, vec3, 0, false, 0u, -1ll>(vec3 *, const vec3 *, vec3 &, int);

// References; const and volatile pointees.
__global__ void
refs(const float &a, int &b, volatile int *v, const volatile int *cv)
{
}

// Pointers to pointers; const pointers (a parameter's own const is not part
// of its type, and is not in the name).
__global__ void
ptrs(float **pp, const float *const *cpp, float *const p, const float *const q,
     int ***ppp)
{
}

// Structs by value and by pointer.
__global__ void
byval(vec3 v, vec3 w, vec3 *pv, const vec3 &rv)
{
}

__global__ void
ints(unsigned int a, unsigned char b, long long c, unsigned long long d,
     signed char e, char f, short g, unsigned short h, long i, unsigned long j,
     bool k, __int128 l, unsigned __int128 m)
{
}

__global__ void
floats(float a, double b, __half c, __nv_bfloat16 d, __half2 e, const __half *f,
       __nv_bfloat16 *g, const __nv_bfloat162 *h, float4 i)
{
}

// __restrict__ on a parameter is its own qualifier and leaves the name;
// deeper in, it stays (and is not printed).
__global__ void
restr(float *__restrict__ a, const float *__restrict__ b,
      float *__restrict__ *c, int n)
{
}

__global__ void
stdint(int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e, uint32_t f,
       int64_t g, uint64_t h, size_t s, ptrdiff_t p, wchar_t w, char16_t c16,
       char32_t c32)
{
}

__global__ void
nullp(decltype(nullptr) n, int *p)
{
}

__global__ void
fptr(void (*f)(int), float (*g)(const float *, int), int x)
{
}

template <typename T, int N>
__global__ void
witharr(arr<T, N> a, T *out)
{
}
template __global__ void witharr<float, 3>(arr<float, 3>, float *);

template <typename T>
__global__ void
nested_t(holder<holder<T>> h, holder<T> *p)
{
}
template __global__ void nested_t<unsigned>(holder<holder<unsigned>>,
                                            holder<unsigned> *);

template <mode M>
__global__ void
moded(float *p)
{
}
template __global__ void moded<mode::exact>(float *);

__global__ void
enums(mode m, mode *pm)
{
}

} // namespace inner
} // namespace outer

// std types (St...) by value.
__global__ void
stdtypes(std::integral_constant<int, 3> c, std::array<float, 4> a,
         std::pair<int, float> *p)
{
}

template <typename T>
__global__ void
topt(T a, T *b, const T *c, T &d)
{
}
template __global__ void topt<__half>(__half, __half *, const __half *,
                                      __half &);
template __global__ void topt<__nv_bfloat16>(__nv_bfloat16, __nv_bfloat16 *,
                                             const __nv_bfloat16 *,
                                             __nv_bfloat16 &);
template __global__ void topt<unsigned long long>(unsigned long long,
                                                  unsigned long long *,
                                                  const unsigned long long *,
                                                  unsigned long long &);
template __global__ void topt<float *>(float *, float **, float *const *,
                                       float *&);

template <char C, short S, unsigned char UC, unsigned long UL>
__global__ void
lits(int *p)
{
}
template __global__ void lits<'a', -5, 200, 18446744073709551615ul>(int *);

__global__ void
plain(int *x)
{
}

extern "C" __global__ void
cname(int *x)
{
}

// An array's bound from a template parameter.
template <typename T, int N>
__global__ void
arrt(T (*p)[N], T (&r)[N])
{
}
template __global__ void arrt<float, 4>(float (*)[4], float (&)[4]);

// A template template parameter.
template <typename T> struct W {
    T t;
};
template <template <typename> class C>
__global__ void
tt(C<int> c)
{
}
template __global__ void tt<W>(W<int>);

// Packs: types (one empty), values, and a pattern around the pack.
template <typename... Ts>
__global__ void
var(Ts... ts)
{
}
template __global__ void var<int, float *, const double *>(int, float *,
                                                           const double *);
template __global__ void var<>();

template <typename... Ts>
__global__ void
varp(int n, const Ts *...ts)
{
}
template __global__ void varp<float, W<int>>(int, const float *,
                                             const W<int> *);

template <int... Ns>
__global__ void
vn(int *p)
{
}
template __global__ void vn<1, 2, 3>(int *);

template <typename T, T v>
__global__ void
dep(T *p)
{
}
template __global__ void dep<int, 5>(int *);
template __global__ void dep<bool, true>(bool *);

// What is refused: an address as a template argument, a lambda's closure.
__device__ int gdev;
template <int *P>
__global__ void
ptrt(int *p)
{
}
template __global__ void ptrt<&gdev>(int *);

template <typename F>
__global__ void
lam(F f, int *p)
{
}

// Internal linkage: an anonymous namespace (whose mangled name carries a
// hash of the file: the test matches these by signature), and static.
namespace
{
struct S {
    int a;
};
__global__ void
hidden(int *p)
{
}
} // namespace
__global__ void
uses(S s)
{
}
static __global__ void
stat(float *p)
{
}

void
launch_internal(void)
{
    auto l = [] __device__(int *p) { *p = 1; };
    lam<<<1, 1>>>(l, nullptr);
    hidden<<<1, 1>>>(nullptr);
    stat<<<1, 1>>>(nullptr);
}
