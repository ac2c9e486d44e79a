# CUDA detection and the kernel sources of the core library.
#   LOWBIT_CUDA=AUTO: build the kernels when a CUDA compiler is found and, for a build of the torch
#     extension, the installed torch can run them (a CPU-only torch never can: the kernels would
#     take minutes per architecture to compile for nothing); ON: require them; OFF: skip.
# Sets LOWBIT_HAS_CUDA.
set(LOWBIT_HAS_CUDA OFF)
set(lowbit_cuda_wanted ON)
if(LOWBIT_CUDA STREQUAL "OFF")
  set(lowbit_cuda_wanted OFF)
elseif(LOWBIT_CUDA STREQUAL "AUTO" AND LOWBIT_BUILD_PYTHON)
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter)
  execute_process(COMMAND ${Python_EXECUTABLE} -c "import torch; print(torch.version.cuda or '')"
    OUTPUT_VARIABLE lowbit_torch_cuda OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE lowbit_torch_rc)
  if(NOT lowbit_torch_rc EQUAL 0 OR lowbit_torch_cuda STREQUAL "")
    set(lowbit_cuda_wanted OFF)
    message(STATUS "lowbit: the installed torch has no CUDA: CUDA kernels skipped "
      "(LOWBIT_CUDA=ON compiles them anyway, about 2 minutes per architecture on 2 cores)")
  endif()
endif()
if(lowbit_cuda_wanted)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(LOWBIT_HAS_CUDA ON)
  elseif(LOWBIT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LOWBIT_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

if(LOWBIT_HAS_CUDA)
  # Hopper-only instructions (wgmma, setmaxnreg) need the sm_90a target, i.e.
  # -gencode=arch=compute_90a,code=sm_90a; CMake spells it "90a" (CUDA_ARCHITECTURES).
  set(CMAKE_CUDA_ARCHITECTURES ${LOWBIT_CUDA_ARCHS})
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "lowbit: CUDA kernels ON for architectures ${LOWBIT_CUDA_ARCHS}")
else()
  message(STATUS "lowbit: CUDA kernels OFF")
endif()

# The kernel sources of csrc/cuda, by role in its folders (common/, dequant/, mmvq/, mmq/, moe/,
# instances/, api/). A source named *_sm90a.cu holds Hopper-only code (wgmma, setmaxnreg, TMA): it
# compiles for sm_90a alone, into an object library of its own, and only where 90a is in
# LOWBIT_CUDA_ARCHS (LOWBIT_WITH_SM90A is then defined), instead of __CUDA_ARCH__ guards throughout.
# Every other source compiles for every architecture listed (Blackwell: 100a, 120 run the generic
# paths).
function(lowbit_add_cuda_sources target)
  if(NOT LOWBIT_HAS_CUDA)
    return()
  endif()
  file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/csrc/cuda/*.cu)
  set(hopper_sources ${cuda_sources})
  list(FILTER hopper_sources INCLUDE REGEX "_sm90a\\.cu$")
  list(FILTER cuda_sources EXCLUDE REGEX "_sm90a\\.cu$")
  if(NOT cuda_sources)
    return()
  endif()
  set(cuda_options --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills)
  target_sources(${target} PRIVATE ${cuda_sources})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/csrc)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${cuda_options}>)
  if(hopper_sources AND "90a" IN_LIST LOWBIT_CUDA_ARCHS)
    add_library(${target}_sm90a OBJECT ${hopper_sources})
    set_target_properties(${target}_sm90a PROPERTIES CUDA_ARCHITECTURES 90a POSITION_INDEPENDENT_CODE ON)
    target_include_directories(${target}_sm90a PRIVATE ${PROJECT_SOURCE_DIR}/csrc ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(${target}_sm90a PRIVATE ${cuda_options})
    target_compile_definitions(${target}_sm90a PRIVATE LOWBIT_WITH_CUDA=1 LOWBIT_WITH_SM90A=1)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${target}_sm90a>)
    target_compile_definitions(${target} PUBLIC LOWBIT_WITH_SM90A=1)
    message(STATUS "lowbit: Hopper-only sources for sm_90a: ${hopper_sources}")
  elseif(hopper_sources)
    message(STATUS "lowbit: 90a is not in LOWBIT_CUDA_ARCHS: Hopper-only sources skipped")
  endif()
  target_compile_definitions(${target} PUBLIC LOWBIT_WITH_CUDA=1)
  target_link_libraries(${target} PUBLIC CUDA::cudart)
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF CUDA_RESOLVE_DEVICE_SYMBOLS ON)
  string(REPLACE ";" "," archs "${LOWBIT_CUDA_ARCHS}")
  target_compile_definitions(${target} PUBLIC LOWBIT_CUDA_ARCHS="${archs}")
endfunction()
