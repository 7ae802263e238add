/* SPDX-License-Identifier: MIT */
/*
 * The tables of demangle_cases.h, and what every result must hold.
 */
#include "demangle_cases.h"

#include <string.h>

#define DM_COUNT(a) (sizeof(a) / sizeof((a)[0]))

const dm_case dm_nvcc_cases[] = {
    /* kernels/linalg.cu and kernels/axpy.cu. */
    {"_ZN6linalg6detail5clampERKfPfi",
     "linalg::detail::clamp(const float&, float*, int)"},
    {"_ZN6linalg7saxpy_vENS_4pairEPKfPfi",
     "linalg::saxpy_v(linalg::pair, const float*, float*, int)"},
    {"_ZN6linalg4gemvIfLi4EEEvPKT_S3_PS1_ii",
     "linalg::gemv<float, 4>(const float*, const float*, float*, int, int)"},
    {"_Z4axpyIdEvT_PKS0_PS0_i",
     "axpy<double>(double, const double*, double*, int)"},
    {"_Z4axpyIfEvT_PKS0_PS0_i",
     "axpy<float>(float, const float*, float*, int)"},
    /* tests/demangle_kernels.cu. */
    {"_Z2ttI1WEvT_IiE", "tt<W>(W<int>)"},
    {"_Z2vnIJLi1ELi2ELi3EEEvPi", "vn<1, 2, 3>(int*)"},
    {"_Z3depIbLb1EEvPT_", "dep<bool, true>(bool*)"},
    {"_Z3depIiLi5EEvPT_", "dep<int, 5>(int*)"},
    {"_Z3lamIZ15launch_internalvEUlPiE_EvT_S0_", NULL},
    {"_Z3varIJEEvDpT_", "var<>()"},
    {"_Z3varIJiPfPKdEEvDpT_",
     "var<int, float*, const double*>(int, float*, const double*)"},
    {"_Z4arrtIfLi4EEvPAT0__T_RS1_",
     "arrt<float, 4>(float (*)[4], float (&)[4])"},
    {"_Z4litsILc97ELsn5ELh200ELm18446744073709551615EEvPi",
     "lits<(char)97, -5, (unsigned char)200, 18446744073709551615>(int*)"},
    {"_Z4ptrtIXadL_Z4gdevEEEvPi", NULL},
    {"_Z4statPf", "stat(float*)"},
    {"_Z4toptI13__nv_bfloat16EvT_PS1_PKS1_RS1_",
     "topt<__nv_bfloat16>(__nv_bfloat16, __nv_bfloat16*, const __nv_bfloat16*, "
     "__nv_bfloat16&)"},
    {"_Z4toptI6__halfEvT_PS1_PKS1_RS1_",
     "topt<__half>(__half, __half*, const __half*, __half&)"},
    {"_Z4toptIPfEvT_PS1_PKS1_RS1_",
     "topt<float*>(float*, float**, float* const*, float*&)"},
    {"_Z4toptIyEvT_PS0_PKS0_RS0_",
     "topt<unsigned long long>(unsigned long long, unsigned long long*, const "
     "unsigned long long*, unsigned long long&)"},
    {"_Z4varpIJf1WIiEEEviDpPKT_",
     "varp<float, W<int>>(int, const float*, const W<int>*)"},
    {"_Z5plainPi", "plain(int*)"},
    {"_Z8stdtypesSt17integral_constantIiLi3EESt5arrayIfLm4EEPSt4pairIifE",
     "stdtypes(std::integral_constant<int, 3>, std::array<float, 4>, "
     "std::pair<int, float>*)"},
    {"_ZN5outer5inner4fptrEPFviEPFfPKfiEi",
     "outer::inner::fptr(void (*)(int), float (*)(const float*, int), int)"},
    {"_ZN5outer5inner4intsEjhxyacstlmbno",
     "outer::inner::ints(unsigned int, unsigned char, long long, unsigned long "
     "long, signed char, char, short, unsigned short, long, unsigned long, "
     "bool, __int128, unsigned __int128)"},
    {"_ZN5outer5inner4ptrsEPPfPKPKfS1_S4_PPPi",
     "outer::inner::ptrs(float**, const float* const*, float*, const float*, "
     "int***)"},
    {"_ZN5outer5inner4refsERKfRiPViPVKi",
     "outer::inner::refs(const float&, int&, volatile int*, const volatile "
     "int*)"},
    {"_ZN5outer5inner5byvalENS0_4vec3ES1_PS1_RKS1_",
     "outer::inner::byval(outer::inner::vec3, outer::inner::vec3, "
     "outer::inner::vec3*, const outer::inner::vec3&)"},
    {"_ZN5outer5inner5enumsENS0_4modeEPS1_",
     "outer::inner::enums(outer::inner::mode, outer::inner::mode*)"},
    {"_ZN5outer5inner5modedILNS0_4modeE1EEEvPf",
     "outer::inner::moded<(outer::inner::mode)1>(float*)"},
    {"_ZN5outer5inner5multiINS0_4vec3ES2_Li0ELb0ELj0ELxn1EEEvPT_PKT0_RS3_i",
     "outer::inner::multi<outer::inner::vec3, outer::inner::vec3, 0, false, 0, "
     "-1>(outer::inner::vec3*, const outer::inner::vec3*, outer::inner::vec3&, "
     "int)"},
    {"_ZN5outer5inner5multiIfdLin3ELb1ELj7ELx100000000000EEEvPT_PKT0_RS2_i",
     "outer::inner::multi<float, double, -3, true, 7, 100000000000>(float*, "
     "const double*, float&, int)"},
    {"_ZN5outer5inner5nullpEDnPi",
     "outer::inner::nullp(decltype(nullptr), int*)"},
    {"_ZN5outer5inner5restrEPfPKfPrS1_i",
     "outer::inner::restr(float*, const float*, float**, int)"},
    {"_ZN5outer5inner6floatsEfd6__half13__nv_bfloat167__half2PKS1_PS2_PK14__nv_"
     "bfloat1626float4",
     "outer::inner::floats(float, double, __half, __nv_bfloat16, __half2, "
     "const __half*, __nv_bfloat16*, const __nv_bfloat162*, float4)"},
    {"_ZN5outer5inner6stdintEahstijlmmlwDsDi",
     "outer::inner::stdint(signed char, unsigned char, short, unsigned short, "
     "int, unsigned int, long, unsigned long, unsigned long, long, wchar_t, "
     "char16_t, char32_t)"},
    {"_ZN5outer5inner7witharrIfLi3EEEvNS0_3arrIT_XT0_EEEPS3_",
     "outer::inner::witharr<float, 3>(outer::inner::arr<float, 3>, float*)"},
    {"_ZN5outer5inner8nested_tIjEEvNS0_6holderINS2_IT_EEEEPS4_",
     "outer::inner::nested_t<unsigned "
     "int>(outer::inner::holder<outer::inner::holder<unsigned int>>, "
     "outer::inner::holder<unsigned int>*)"},
    {"cname", NULL},
};
const size_t dm_nvcc_ncases = DM_COUNT(dm_nvcc_cases);

const char *const dm_nvcc_anon[] = {
    "uses((anonymous namespace)::S)",
    "(anonymous namespace)::hidden(int*)",
};
const size_t dm_nvcc_nanon = DM_COUNT(dm_nvcc_anon);

const dm_case dm_cub_cases[] = {
    {"_ZN3cub17CUB_300001_SM_9006detail10radix_"
     "sort29DeviceRadixSortOnesweepKernelINS1_5radix10policy_hubIjNS0_"
     "8NullTypeEjE10Policy1000ELNS0_9SortOrderE0EjS6_jiiNS1_21identity_"
     "decomposer_tEEEvPT5_SC_PT3_PKSD_PT1_PKSH_PT2_PKSL_T4_iiT6_",
     "cub::CUB_300001_SM_900::detail::radix_sort::"
     "DeviceRadixSortOnesweepKernel<cub::CUB_300001_SM_900::detail::radix::"
     "policy_hub<unsigned int, cub::CUB_300001_SM_900::NullType, unsigned "
     "int>::Policy1000, (cub::CUB_300001_SM_900::SortOrder)0, unsigned int, "
     "cub::CUB_300001_SM_900::NullType, unsigned int, int, int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t>(int*, int*, "
     "unsigned int*, const unsigned int*, unsigned int*, const unsigned int*, "
     "cub::CUB_300001_SM_900::NullType*, const "
     "cub::CUB_300001_SM_900::NullType*, int, int, int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t)"},
    {"_ZN3cub17CUB_300001_SM_9006detail10radix_"
     "sort30DeviceRadixSortHistogramKernelINS1_5radix10policy_hubIjNS0_"
     "8NullTypeEjE10Policy1000ELNS0_9SortOrderE0EjjNS1_21identity_decomposer_"
     "tEEEvPT2_PKT1_SB_iiT3_",
     "cub::CUB_300001_SM_900::detail::radix_sort::"
     "DeviceRadixSortHistogramKernel<cub::CUB_300001_SM_900::detail::radix::"
     "policy_hub<unsigned int, cub::CUB_300001_SM_900::NullType, unsigned "
     "int>::Policy1000, (cub::CUB_300001_SM_900::SortOrder)0, unsigned int, "
     "unsigned int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t>(unsigned int*, "
     "const unsigned int*, unsigned int, int, int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t)"},
    {"_ZN3cub17CUB_300001_SM_9006detail10radix_"
     "sort31DeviceRadixSortSingleTileKernelINS1_5radix10policy_hubIjNS0_"
     "8NullTypeEjE10Policy1000ELNS0_9SortOrderE0EjS6_jNS1_21identity_"
     "decomposer_tEEEvPKT1_PSB_PKT2_PSF_T3_iiT4_",
     "cub::CUB_300001_SM_900::detail::radix_sort::"
     "DeviceRadixSortSingleTileKernel<cub::CUB_300001_SM_900::detail::radix::"
     "policy_hub<unsigned int, cub::CUB_300001_SM_900::NullType, unsigned "
     "int>::Policy1000, (cub::CUB_300001_SM_900::SortOrder)0, unsigned int, "
     "cub::CUB_300001_SM_900::NullType, unsigned int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t>(const unsigned "
     "int*, unsigned int*, const cub::CUB_300001_SM_900::NullType*, "
     "cub::CUB_300001_SM_900::NullType*, unsigned int, int, int, "
     "cub::CUB_300001_SM_900::detail::identity_decomposer_t)"},
    {"_ZN3cub17CUB_300001_SM_9006detail10radix_"
     "sort33DeviceRadixSortExclusiveSumKernelINS1_5radix10policy_hubIjNS0_"
     "8NullTypeEjE10Policy1000EjEEvPT0_",
     "cub::CUB_300001_SM_900::detail::radix_sort::"
     "DeviceRadixSortExclusiveSumKernel<cub::CUB_300001_SM_900::detail::radix::"
     "policy_hub<unsigned int, cub::CUB_300001_SM_900::NullType, unsigned "
     "int>::Policy1000, unsigned int>(unsigned int*)"},
    {"_ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv",
     "cub::CUB_300001_SM_900::detail::EmptyKernel<void>()"},
    {"_ZN3cub17CUB_300001_SM_9006detail4scan16DeviceScanKernelINS2_10policy_"
     "hubIfffjN4cuda3std3__44plusIvEEE10Policy1000EPKfPfNS0_"
     "13ScanTileStateIfLb1EEES9_NS1_10InputValueIfSE_EEjfLb0EfEEvT0_T1_T2_iT3_"
     "T4_T5_",
     "cub::CUB_300001_SM_900::detail::scan::DeviceScanKernel<cub::CUB_300001_"
     "SM_900::detail::scan::policy_hub<float, float, float, unsigned int, "
     "cuda::std::__4::plus<void>>::Policy1000, const float*, float*, "
     "cub::CUB_300001_SM_900::ScanTileState<float, true>, "
     "cuda::std::__4::plus<void>, "
     "cub::CUB_300001_SM_900::detail::InputValue<float, float*>, unsigned int, "
     "float, false, float>(const float*, float*, "
     "cub::CUB_300001_SM_900::ScanTileState<float, true>, int, "
     "cuda::std::__4::plus<void>, "
     "cub::CUB_300001_SM_900::detail::InputValue<float, float*>, unsigned "
     "int)"},
    {"_ZN3cub17CUB_300001_SM_9006detail4scan20DeviceScanInitKernelINS0_"
     "13ScanTileStateIfLb1EEEEEvT_i",
     "cub::CUB_300001_SM_900::detail::scan::DeviceScanInitKernel<cub::CUB_"
     "300001_SM_900::ScanTileState<float, "
     "true>>(cub::CUB_300001_SM_900::ScanTileState<float, true>, int)"},
    {"_ZN3cub17CUB_300001_SM_9006detail6reduce18DeviceReduceKernelINS2_"
     "10policy_hubIfjN4cuda3__47maximumIvEEE10Policy1000EPKfjS8_fNS5_3std3__"
     "410__identityEEEvT0_PT3_T1_NS0_13GridEvenShareISJ_EET2_T4_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceKernel<cub::CUB_"
     "300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::__4::maximum<void>>::Policy1000, const float*, unsigned int, "
     "cuda::__4::maximum<void>, float, cuda::std::__4::__identity>(const "
     "float*, float*, unsigned int, "
     "cub::CUB_300001_SM_900::GridEvenShare<unsigned int>, "
     "cuda::__4::maximum<void>, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_9006detail6reduce18DeviceReduceKernelINS2_"
     "10policy_hubIfjN4cuda3std3__44plusIvEEE10Policy1000EPKfjS9_fNS7_10__"
     "identityEEEvT0_PT3_T1_NS0_13GridEvenShareISI_EET2_T4_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceKernel<cub::CUB_"
     "300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::std::__4::plus<void>>::Policy1000, const float*, unsigned int, "
     "cuda::std::__4::plus<void>, float, cuda::std::__4::__identity>(const "
     "float*, float*, unsigned int, "
     "cub::CUB_300001_SM_900::GridEvenShare<unsigned int>, "
     "cuda::std::__4::plus<void>, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_"
     "9006detail6reduce28DeviceReduceSingleTileKernelINS2_10policy_"
     "hubIfjN4cuda3__47maximumIvEEE10Policy1000EPKfPfjS8_ffNS5_3std3__410__"
     "identityEEEvT0_T1_T2_T3_T4_T6_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceSingleTileKernel<cub:"
     ":CUB_300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::__4::maximum<void>>::Policy1000, const float*, float*, unsigned "
     "int, cuda::__4::maximum<void>, float, float, "
     "cuda::std::__4::__identity>(const float*, float*, unsigned int, "
     "cuda::__4::maximum<void>, float, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_"
     "9006detail6reduce28DeviceReduceSingleTileKernelINS2_10policy_"
     "hubIfjN4cuda3__47maximumIvEEE10Policy1000EPfSB_iS8_ffNS5_3std3__410__"
     "identityEEEvT0_T1_T2_T3_T4_T6_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceSingleTileKernel<cub:"
     ":CUB_300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::__4::maximum<void>>::Policy1000, float*, float*, int, "
     "cuda::__4::maximum<void>, float, float, "
     "cuda::std::__4::__identity>(float*, float*, int, "
     "cuda::__4::maximum<void>, float, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_"
     "9006detail6reduce28DeviceReduceSingleTileKernelINS2_10policy_"
     "hubIfjN4cuda3std3__44plusIvEEE10Policy1000EPKfPfjS9_ffNS7_10__"
     "identityEEEvT0_T1_T2_T3_T4_T6_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceSingleTileKernel<cub:"
     ":CUB_300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::std::__4::plus<void>>::Policy1000, const float*, float*, unsigned "
     "int, cuda::std::__4::plus<void>, float, float, "
     "cuda::std::__4::__identity>(const float*, float*, unsigned int, "
     "cuda::std::__4::plus<void>, float, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_"
     "9006detail6reduce28DeviceReduceSingleTileKernelINS2_10policy_"
     "hubIfjN4cuda3std3__44plusIvEEE10Policy1000EPfSC_iS9_ffNS7_10__"
     "identityEEEvT0_T1_T2_T3_T4_T6_",
     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceSingleTileKernel<cub:"
     ":CUB_300001_SM_900::detail::reduce::policy_hub<float, unsigned int, "
     "cuda::std::__4::plus<void>>::Policy1000, float*, float*, int, "
     "cuda::std::__4::plus<void>, float, float, "
     "cuda::std::__4::__identity>(float*, float*, int, "
     "cuda::std::__4::plus<void>, float, cuda::std::__4::__identity)"},
    {"_ZN3cub17CUB_300001_SM_9006detail9transform16transform_kernelINS2_"
     "10policy_hubILb0EN4cuda3std3__45tupleIJN6thrust23THRUST_300001_SM_900_"
     "NS6detail15normal_iteratorINSA_10device_ptrIfEEEESF_"
     "EEEE10policy1000EiNS7_4plusIfEESF_JPfSL_EEEvT0_iT1_T2_DpNS2_10kernel_"
     "argIT3_EE",
     "cub::CUB_300001_SM_900::detail::transform::transform_kernel<cub::CUB_"
     "300001_SM_900::detail::transform::policy_hub<false, "
     "cuda::std::__4::tuple<thrust::THRUST_300001_SM_900_NS::detail::normal_"
     "iterator<thrust::THRUST_300001_SM_900_NS::device_ptr<float>>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>>>::policy1000, int, "
     "cuda::std::__4::plus<float>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>, float*, float*>(int, int, "
     "cuda::std::__4::plus<float>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>, "
     "cub::CUB_300001_SM_900::detail::transform::kernel_arg<float*>, "
     "cub::CUB_300001_SM_900::detail::transform::kernel_arg<float*>)"},
    {"_ZN3cub17CUB_300001_SM_9006detail9transform16transform_kernelINS2_"
     "10policy_hubILb0EN4cuda3std3__45tupleIJN6thrust23THRUST_300001_SM_900_"
     "NS6detail15normal_iteratorINSA_10device_ptrIfEEEESF_"
     "EEEE10policy1000ElNS7_4plusIfEESF_JPfSL_EEEvT0_iT1_T2_DpNS2_10kernel_"
     "argIT3_EE",
     "cub::CUB_300001_SM_900::detail::transform::transform_kernel<cub::CUB_"
     "300001_SM_900::detail::transform::policy_hub<false, "
     "cuda::std::__4::tuple<thrust::THRUST_300001_SM_900_NS::detail::normal_"
     "iterator<thrust::THRUST_300001_SM_900_NS::device_ptr<float>>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>>>::policy1000, long, "
     "cuda::std::__4::plus<float>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>, float*, float*>(long, int, "
     "cuda::std::__4::plus<float>, "
     "thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_"
     "300001_SM_900_NS::device_ptr<float>>, "
     "cub::CUB_300001_SM_900::detail::transform::kernel_arg<float*>, "
     "cub::CUB_300001_SM_900::detail::transform::kernel_arg<float*>)"},
};
const size_t dm_cub_ncases = DM_COUNT(dm_cub_cases);

const dm_case dm_hand_cases[] = {
    /* Qualifiers and declarators: const before what it qualifies, after a
     * pointer's '*'; restrict dropped; references to references collapse. */
    {"_Z1fOf", "f(float&&)"},
    {"_Z1fRKPKf", "f(const float* const&)"},
    {"_Z1fPKPKf", "f(const float* const*)"},
    {"_Z1fKPKf", "f(const float* const)"},
    {"_Z1fPVKPVf", "f(volatile float* const volatile*)"},
    {"_Z1fPrKf", "f(const float*)"},
    {"_Z1fPrVKi", "f(const volatile int*)"},
    {"_Z1fIPfEvKT_", "f<float*>(float* const)"},
    {"_Z1fIPfEvPKT_", "f<float*>(float* const*)"},
    {"_Z1fIPKcEvT_", "f<const char*>(const char*)"},
    {"_Z1fIKPcEvT_", "f<char* const>(char* const)"},
    {"_Z1fIiEvRKT_", "f<int>(const int&)"},
    {"_Z1fIRiEvOT_", "f<int&>(int&)"},
    {"_Z1fIOiEvRT_", "f<int&&>(int&)"},
    {"_Z1fIOiEvOT_", "f<int&&>(int&&)"},
    /* Arrays and functions: declarators wrapped around their pointer. */
    {"_Z4arrtIfLi4EEvPAT0__T_", "arrt<float, 4>(float (*)[4])"},
    {"_Z1fRA4_i", "f(int (&)[4])"},
    {"_Z1fRA_i", "f(int (&)[])"},
    {"_Z1fPA4_A8_f", "f(float (*)[4][8])"},
    {"_Z1fPA3_PKi", "f(const int* (*)[3])"},
    {"_Z1fPFvvE", "f(void (*)())"},
    {"_Z1fPFvizE", "f(void (*)(int, ...))"},
    {"_Z1fRFviE", "f(void (&)(int))"},
    {"_Z1fPPFviE", "f(void (**)(int))"},
    {"_Z1fPFPFviEiE", "f(void (*(*)(int))(int))"},
    {"_Z1fPFPA3_ivE", "f(int (*(*)())[3])"},
    {"_Z1fIA4_iEvv", "f<int[4]>()"},
    {"_Z1fIFviEEvv", "f<void(int)>()"},
    {"_Z1fIPFviEEvPT_", "f<void (*)(int)>(void (**)(int))"},
    /* std: St, the abbreviations, libc++'s inline namespace. */
    {"_Z1fSt6vectorIiSaIiEE", "f(std::vector<int, std::allocator<int>>)"},
    {"_ZNSt6vectorIiSaIiEE4sizeEv",
     "std::vector<int, std::allocator<int>>::size()"},
    {"_Z1fSs", "f(std::string)"},
    {"_Z1fRKSs", "f(const std::string&)"},
    {"_Z1fSaIcES_", "f(std::allocator<char>, std::allocator<char>)"},
    {"_Z1fRSoRSiRSd", "f(std::ostream&, std::istream&, std::iostream&)"},
    {"_Z1fSbIcE", "f(std::basic_string<char>)"},
    {"_ZSt1fv", "std::f()"},
    {"_ZSt4swapIiEvRT_S1_", "std::swap<int>(int&, int&)"},
    {"_Z1fNSt3__14pairIifEE", "f(std::__1::pair<int, float>)"},
    {"_Z1fNSt6chrono8durationIlEE", "f(std::chrono::duration<long>)"},
    /* Names: ABI tags, internal linkage, anonymous namespaces, elaborated
     * types, members of class templates. */
    {"_ZN12_GLOBAL__N_11fEv", "(anonymous namespace)::f()"},
    {"_Z1fN12_GLOBAL__N_11SE", "f((anonymous namespace)::S)"},
    {"_Z1fN3foo3barB5cxx11E", "f(foo::bar[abi:cxx11])"},
    {"_Z3fooB5cxx11v", "foo[abi:cxx11]()"},
    {"_ZN5outer5innerL6hiddenEPi", "outer::inner::hidden(int*)"},
    {"_ZL4statPf", "stat(float*)"},
    {"_Z1fTs1ATu1BTe1C", "f(A, B, C)"},
    {"_ZN1a1bIiE1cIfEEvT_", "a::b<int>::c<float>(float)"},
    {"_ZN1a1bIiE1cEv", "a::b<int>::c()"},
    /* Builtins nvcc does not use for CUDA's own types. */
    {"_Z1fDh", "f(half)"},
    {"_Z1fDF16_", "f(_Float16)"},
    {"_Z1fDF16b", "f(std::bfloat16_t)"},
    {"_Z1fDu", "f(char8_t)"},
    {"_Z1fu6__fp16", "f(__fp16)"},
    {"_Z1fv", "f()"},
    /* Literals. */
    {"_Z1fILb0ELb1ELb2EEvv", "f<false, true, (bool)2>()"},
    {"_Z1fILin2147483648EEvv", "f<-2147483648>()"},
    {"_Z1fILj4294967295ELm0ELxn9223372036854775808EEvv",
     "f<4294967295, 0, -9223372036854775808>()"},
    {"_Z1fILs5ELt6ELl7ELm8ELx9ELy10ELn11ELo12EEvv",
     "f<5, 6, 7, 8, 9, 10, 11, 12>()"},
    {"_Z1fILc65ELa66ELh67ELw68ELDs69ELDi70EEvv",
     "f<(char)65, (signed char)66, (unsigned char)67, (wchar_t)68, "
     "(char16_t)69, (char32_t)70>()"},
    {"_Z1fI3FooLS0_1EEvv", "f<Foo, (Foo)1>()"},
    {"_Z1fILDnEEvv", "f<nullptr>()"},
    {"_Z1fILDn0EEvv", "f<nullptr>()"},
    {"_Z1fIXLi3EEEvv", "f<3>()"},
    /* Substitutions: prefixes, templates, and seq-ids past 9 (SA_...). */
    {"_Z1fN1a1b1c1d1eE", "f(a::b::c::d::e)"},
    {"_Z1fN1a1bES0_S_", "f(a::b, a::b, a)"},
    {"_Z1fN1a1bIiEES1_S0_", "f(a::b<int>, a::b<int>, a::b)"},
    {"_Z1fIN1a1bEEvT_S1_S2_", "f<a::b>(a::b, a::b, a::b)"},
    {"_Z1fPKcS0_", "f(const char*, const char*)"},
    {"_Z1fPKcS_", "f(const char*, const char)"},
    {"_Z1fP1AP1BP1CP1DP1EP1FP1GP1HP1IP1JP1KP1LS_S0_S1_S2_S3_S4_S5_S6_S7_S8_S9_"
     "SA_SB_SC_SD_SE_SF_SG_SH_SI_SJ_SK_SL_SM_",
     "f(A*, B*, C*, D*, E*, F*, G*, H*, I*, J*, K*, L*, A, A*, B, B*, C, C*, "
     "D, D*, E, E*, F, F*, G, G*, H, H*, I, I*, J, J*, K, K*, L, L*)"},
    {"_Z1fiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii",
     "f(int, int, int, int, int, int, int, int, int, int, int, int, int, int, "
     "int, int, int, int, int, int, int, int, int, int, int, int, int, int, "
     "int, int, int, int, int, int, int, int, int, int, int, int, int, int, "
     "int, int, int, int, int, int, int, int, int, int)"},
    /* Template template parameters and packs. */
    {"_Z2ttI1WEvT_IiE", "tt<W>(W<int>)"},
    {"_Z1fI1AJEEvT_", "f<A>(A)"},
    {"_Z1fIJEEvDpT_i", "f<>(int)"},
    {"_Z1fIJifEEvDpPT_", "f<int, float>(int*, float*)"},
    {"_Z1fIJifEEvDpRKT_", "f<int, float>(const int&, const float&)"},
    {"_Z1fIJifEEvDpN1a1bIT_EE", "f<int, float>(a::b<int>, a::b<float>)"},
    {"_Z1fIJiEJfdEEvDpT_DpT0_", "f<int, float, double>(int, float, double)"},
    /* Refused: what the header says is not understood, and what is no
     * function name at all. */
    {"_Z1fIL_Z1gEEvv", NULL},
    {"_Z1fIXplLi1ELi2EEEvv", NULL},
    {"_Z1fILf3f800000EEvv", NULL},
    {"_ZZ4mainE1x", NULL},
    {"_ZZ4mainEN1S1fEv", NULL},
    {"_Z3lamIZ4mainEUlPiE_EvT_S0_", NULL},
    {"_Z1fN1aUt_E", NULL},
    {"_ZN1SC1Ev", NULL},
    {"_ZN1SD1Ev", NULL},
    {"_ZN1SplERKS_", NULL},
    {"_ZNK1S1fEv", NULL},
    {"_Z1fM1Si", NULL},
    {"_Z1fDv4_f", NULL},
    {"_Z1fCf", NULL},
    {"_Z1fPU3AS1i", NULL},
    {"_ZTV1S", NULL},
    {"cname", NULL},
    {"", NULL},
    {"_Z", NULL},
    {"Z1fv", NULL},
    {"__Z1fv", NULL},
    {"_ZGVZ4mainE1x", NULL},
    {"_Z1f", NULL},
    {"_ZN1a1bE", NULL},
    {"_Z1fiv", NULL},
    {"_Z1fi.constprop.0", NULL},
    {"_Z1fIiiEvT0_T1_", NULL},
    {"_Z1fT_", NULL},
    {"_Z1fIT_EvT_", NULL},
    {"_Z1fDpT_", NULL},
};
const size_t dm_hand_ncases = DM_COUNT(dm_hand_cases);

/* 1 if d holds together: the signature is the name and the parameters'
 * types, no string is empty, the flags are 0 or 1, a reference is
 * indirect. */
int
dm_consistent(const cumod_demangled *d)
{
    const char *s = d->signature;
    size_t i, at;

    if (d->name == NULL || s == NULL || d->name[0] == '\0' ||
        (d->nparams > 0 && d->params == NULL))
        return 0;
    at = strlen(d->name);
    if (strncmp(s, d->name, at) != 0 || s[at++] != '(')
        return 0;
    for (i = 0; i < d->nparams; i++) {
        const cumod_dm_param *p = &d->params[i];
        size_t n;

        if (p->type == NULL || p->type[0] == '\0' || p->indirect < 0 ||
            p->indirect > 1 || p->reference < 0 || p->reference > 1 ||
            (p->reference && !p->indirect))
            return 0;
        if (i > 0) {
            if (strncmp(s + at, ", ", 2) != 0)
                return 0;
            at += 2;
        }
        n = strlen(p->type);
        if (strncmp(s + at, p->type, n) != 0)
            return 0;
        at += n;
    }
    return strcmp(s + at, ")") == 0;
}
