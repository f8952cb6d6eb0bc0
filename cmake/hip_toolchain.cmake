# HIP build of the single-source GPU kernels with Debian's hipcc.
#
# Why not CMake's HIP language: CMake 3.25 looks for ROCm's hip-lang package under <root>/lib/cmake,
# where Debian does not put it (it lives under lib/<triplet>/cmake). So each .cu file is compiled here
# by hipcc as HIP into an object, and everything else stays with the project's C++ compiler.

find_program(HD_HIPCC hipcc REQUIRED)
find_library(HD_AMDHIP64 amdhip64 REQUIRED)
set(HD_HIP_ARCHITECTURES "gfx90a;gfx1030" CACHE STRING "AMD GPU targets of the HIP build")

function(hd_compile_as_hip target)
  set(arch_flags)
  foreach(arch ${HD_HIP_ARCHITECTURES})
    list(APPEND arch_flags --offload-arch=${arch})
  endforeach()
  set(build_flags -O3)
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(build_flags -O0 -g)
  endif()
  set(objects)
  foreach(src ${ARGN})
    get_filename_component(name ${src} NAME_WE)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/hip_objects/${name}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${HD_HIPCC} -x hip -std=c++20 -fPIC -Wall ${build_flags} ${arch_flags}
              -I${PROJECT_SOURCE_DIR}/src -DHD_WITH_GPU -MD -MF ${obj}.d
              -c ${PROJECT_SOURCE_DIR}/${src} -o ${obj}
      DEPENDS ${PROJECT_SOURCE_DIR}/${src}
      DEPFILE ${obj}.d
      COMMENT "hipcc ${src} (${HD_HIP_ARCHITECTURES})"
      VERBATIM)
    list(APPEND objects ${obj})
  endforeach()
  # The .cu files were listed as sources to keep them visible to IDEs; the objects replace them.
  set_source_files_properties(${ARGN} PROPERTIES HEADER_FILE_ONLY ON)
  target_sources(${target} PRIVATE ${objects})
  target_link_libraries(${target} PUBLIC ${HD_AMDHIP64})
endfunction()
