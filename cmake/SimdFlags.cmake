# SIMD kernels: a file named *_avx2.cc or *_avx512.cc is compiled for that
# ISA and only called after a CPUID check (see src/mover/kernels.h). Used by
# the main build and by the fuzz build (tests/fuzz), which compiles the
# kernels again with clang.
function(deputy_simd_flags)
  foreach(f ${ARGN})
    if(f MATCHES "_avx512\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(f MATCHES "_avx2\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    endif()
  endforeach()
endfunction()
