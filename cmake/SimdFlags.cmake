# SIMD kernels: a file named *_avx2.cc or *_avx512.cc is compiled for that
# ISA and only called after a CPUID check (see src/mover/kernels.h). On a
# target other than x86-64 (the aarch64 cross build) those files are taken
# out of the list named `sources_var`: dispatch.h leaves their levels out.
# Used by the main build and by the fuzz build (tests/fuzz), which compiles
# the kernels again with clang.
function(deputy_simd_sources sources_var)
  set(sources ${${sources_var}})
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    list(FILTER sources EXCLUDE REGEX "_avx(2|512)\\.cc$")
    set(${sources_var} ${sources} PARENT_SCOPE)
    return()
  endif()
  foreach(f ${sources})
    if(f MATCHES "_avx512\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(f MATCHES "_avx2\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    endif()
  endforeach()
endfunction()
