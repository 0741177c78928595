// PLACEHOLDER scalar reductions (to be replaced by the vectorised implementation).
#include "kernels/cpu/reduce.hpp"

#include <cstdint>
#include <cstring>

namespace ouro::kernels {
namespace {
template <typename T>
T apply(T a, T b, RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return T(a + b);
    case RedOp::kProd: return T(a * b);
    case RedOp::kMax: return a > b ? a : b;
    case RedOp::kMin: return a < b ? a : b;
  }
  return a;
}
template <typename T>
void two(T* d, const T* a, const T* b, size_t n, RedOp op) {
  for (size_t i = 0; i < n; i++) d[i] = apply(a[i], b[i], op);
}
}  // namespace

void reduceTwo(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  switch (dtype) {
    case DataType::kFloat32: two((float*)dst, (const float*)a, (const float*)b, count, op); break;
    case DataType::kFloat64: two((double*)dst, (const double*)a, (const double*)b, count, op); break;
    case DataType::kInt32: two((int32_t*)dst, (const int32_t*)a, (const int32_t*)b, count, op); break;
    case DataType::kUint32: two((uint32_t*)dst, (const uint32_t*)a, (const uint32_t*)b, count, op); break;
    case DataType::kInt64: two((int64_t*)dst, (const int64_t*)a, (const int64_t*)b, count, op); break;
    case DataType::kUint64: two((uint64_t*)dst, (const uint64_t*)a, (const uint64_t*)b, count, op); break;
    case DataType::kInt8: two((int8_t*)dst, (const int8_t*)a, (const int8_t*)b, count, op); break;
    case DataType::kUint8: two((uint8_t*)dst, (const uint8_t*)a, (const uint8_t*)b, count, op); break;
    default: break;
  }
}
void reduceInPlace(void* dst, const void* src, size_t count, DataType dtype, RedOp op) {
  reduceTwo(dst, dst, src, count, dtype, op);
}
void reduceMany(void* dst, const void* const* srcs, int n, size_t count, DataType dtype, RedOp op) {
  if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * dataTypeSize(dtype));
  for (int i = 1; i < n; i++) reduceInPlace(dst, srcs[i], count, dtype, op);
}
void finishAvg(void* dst, size_t count, DataType dtype, int nranks) {
  if (dtype == DataType::kFloat32)
    for (size_t i = 0; i < count; i++) ((float*)dst)[i] /= float(nranks);
}
}  // namespace ouro::kernels
