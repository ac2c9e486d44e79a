# The torch extension lowbit._C: TORCH_LIBRARY(lowbit) registrations and a pybind11 module.
find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
if(NOT Torch_DIR)
  execute_process(COMMAND ${Python_EXECUTABLE} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  list(APPEND CMAKE_PREFIX_PATH ${torch_prefix})
endif()
if(NOT pybind11_DIR)
  execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir
    OUTPUT_VARIABLE pybind11_DIR OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
endif()
find_package(pybind11 CONFIG REQUIRED)
find_package(Torch REQUIRED)

# torch built with CUDA exposes torch_cuda; only then can the CUDA op implementations link.
set(LOWBIT_TORCH_CUDA OFF)
if(LOWBIT_HAS_CUDA AND TARGET torch_cuda)
  set(LOWBIT_TORCH_CUDA ON)
endif()
message(STATUS "lowbit: torch ${Torch_VERSION}; CUDA op implementations ${LOWBIT_TORCH_CUDA}")

file(GLOB torch_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/csrc/torch/*.cpp)
file(GLOB torch_cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/csrc/torch/cuda/*.cpp)
if(LOWBIT_TORCH_CUDA)
  list(APPEND torch_sources ${torch_cuda_sources})
endif()
# NO_EXTRAS: no LTO, stripping or hidden visibility: the module shares C++ types (c10::Error, ...)
# with libtorch and must be built exactly as a plain torch extension is.
pybind11_add_module(_C MODULE NO_EXTRAS ${torch_sources})
# C++17 like torch's own build; recent torch headers note C++20 extensions, harmlessly
target_compile_options(_C PRIVATE -Wno-c++20-extensions)
target_link_libraries(_C PRIVATE lowbit ${TORCH_LIBRARIES})
target_include_directories(_C PRIVATE ${PROJECT_SOURCE_DIR}/csrc ${PROJECT_SOURCE_DIR}/csrc/torch ${TORCH_INCLUDE_DIRS})
target_compile_options(_C PRIVATE ${TORCH_CXX_FLAGS})
target_compile_definitions(_C PRIVATE TORCH_EXTENSION_NAME=_C
  $<$<BOOL:${LOWBIT_TORCH_CUDA}>:LOWBIT_TORCH_CUDA=1>)
# libtorch is loaded by `import torch` before lowbit._C; resolve against it at run time.
set_target_properties(_C PROPERTIES INSTALL_RPATH "$ORIGIN")

if(LOWBIT_HAS_CUDA AND NOT LOWBIT_TORCH_CUDA AND torch_cuda_sources)
  # CPU-only torch: still compile the CUDA op glue (headers ship with every torch) so that a
  # CPU-only CI catches build breaks in it. Nothing links these objects.
  # A CPU wheel ships c10/cuda headers but not the header its CUDA build generates; supply it.
  set(shim ${PROJECT_BINARY_DIR}/torch_cuda_shim)
  file(WRITE ${shim}/c10/cuda/impl/cuda_cmake_macros.h "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
  add_library(lowbit_torch_cuda_compile_check OBJECT ${torch_cuda_sources})
  target_link_libraries(lowbit_torch_cuda_compile_check PRIVATE lowbit)
  target_include_directories(lowbit_torch_cuda_compile_check PRIVATE ${PROJECT_SOURCE_DIR}/csrc ${PROJECT_SOURCE_DIR}/csrc/torch ${TORCH_INCLUDE_DIRS}
    ${CUDAToolkit_INCLUDE_DIRS} ${shim})
  target_compile_options(lowbit_torch_cuda_compile_check PRIVATE ${TORCH_CXX_FLAGS})
  target_compile_options(lowbit_torch_cuda_compile_check PRIVATE -Wno-c++20-extensions)
  target_compile_definitions(lowbit_torch_cuda_compile_check PRIVATE LOWBIT_TORCH_CUDA=1)
endif()

if(LOWBIT_PYTHON_INPLACE)
  set_target_properties(_C PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_SOURCE_DIR}/python/lowbit)
endif()
install(TARGETS _C LIBRARY DESTINATION lowbit)
