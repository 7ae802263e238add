# SPDX-License-Identifier: MIT
# cumod_kernel_images(<target> OUTPUT_DIR <dir> CUBIN <src...> [CUBIN90 <src...>]
#                     [FATBIN <src> <stem>] [PTX <src> <stem>])
#
# Compiles .cu sources with nvcc into the images cumodd loads, all into one
# folder the daemon can watch:
#   <stem>.cubin            for each CUBIN source and each SM of CUMOD_CUDA_ARCHS
#                           (with more than one SM, <stem>.sm_NN.cubin);
#                           CUBIN90 sources (clusters) only for SMs of 90 and up
#   <stem>.fatbin           SASS for each SM of CUMOD_FATBIN_ARCHS plus PTX of the
#                           highest, uncompressed so any reader can look inside
#   <stem>.ptx              PTX for the lowest SM of CUMOD_CUDA_ARCHS
include_guard(GLOBAL)

function(cumod_kernel_images target)
  cmake_parse_arguments(K "" "OUTPUT_DIR" "CUBIN;CUBIN90;FATBIN;PTX" ${ARGN})
  file(MAKE_DIRECTORY ${K_OUTPUT_DIR})
  set(outputs)
  list(LENGTH CUMOD_CUDA_ARCHS narch)
  set(nvflags -O3 -std=c++17)

  foreach(src IN LISTS K_CUBIN K_CUBIN90)
    get_filename_component(stem ${src} NAME_WE)
    get_filename_component(abs ${src} ABSOLUTE)
    foreach(sm IN LISTS CUMOD_CUDA_ARCHS)
      if(src IN_LIST K_CUBIN90 AND sm LESS 90)
        continue()
      endif()
      if(narch GREATER 1)
        set(out ${K_OUTPUT_DIR}/${stem}.sm_${sm}.cubin)
      else()
        set(out ${K_OUTPUT_DIR}/${stem}.cubin)
      endif()
      add_custom_command(OUTPUT ${out}
        COMMAND ${CUMOD_NVCC} ${nvflags} -cubin -arch=sm_${sm} -o ${out} ${abs}
        DEPENDS ${abs} VERBATIM
        COMMENT "nvcc -cubin sm_${sm} ${stem}")
      list(APPEND outputs ${out})
    endforeach()
  endforeach()

  if(K_FATBIN)
    list(GET K_FATBIN 0 src)
    list(GET K_FATBIN 1 stem)
    get_filename_component(abs ${src} ABSOLUTE)
    set(gencode)
    set(top 0)
    foreach(sm IN LISTS CUMOD_FATBIN_ARCHS)
      list(APPEND gencode -gencode arch=compute_${sm},code=sm_${sm})
      if(sm GREATER top)
        set(top ${sm})
      endif()
    endforeach()
    list(APPEND gencode -gencode arch=compute_${top},code=compute_${top})
    set(out ${K_OUTPUT_DIR}/${stem}.fatbin)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CUMOD_NVCC} ${nvflags} -fatbin --compress-mode=none ${gencode} -o ${out} ${abs}
      DEPENDS ${abs} VERBATIM
      COMMENT "nvcc -fatbin ${stem}")
    list(APPEND outputs ${out})
  endif()

  if(K_PTX)
    list(GET K_PTX 0 src)
    list(GET K_PTX 1 stem)
    get_filename_component(abs ${src} ABSOLUTE)
    list(GET CUMOD_CUDA_ARCHS 0 sm)
    set(out ${K_OUTPUT_DIR}/${stem}.ptx)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CUMOD_NVCC} ${nvflags} -ptx -arch=compute_${sm} -o ${out} ${abs}
      DEPENDS ${abs} VERBATIM
      COMMENT "nvcc -ptx compute_${sm} ${stem}")
    list(APPEND outputs ${out})
  endif()

  add_custom_target(${target} ALL DEPENDS ${outputs})
endfunction()
