// One spelling for "callable from host and device code": headers shared by the CPU executor and
// the CUDA kernels compile under g++ (macro empty) and nvcc (__host__ __device__) alike.
#pragma once

#ifndef OURO_HOST_DEVICE
#if defined(__CUDACC__)
#define OURO_HOST_DEVICE __host__ __device__
#else
#define OURO_HOST_DEVICE
#endif
#endif
