// NCCL 2.28's ABI as numbers: every enum value and the layout of ncclUniqueId and ncclConfig_t.
// Included by the NCCL-API test program, which is built both against ouro's nccl/include/nccl.h
// and against NVIDIA's nccl.h where one is installed, so the two headers agree with these numbers
// and with each other, or the build fails.
#pragma once

#include <cstddef>

static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 && ncclInternalError == 3 &&
              ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7 &&
              ncclNumResults == 8);
static_assert(ncclInt8 == 0 && ncclChar == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt == 2 && ncclUint32 == 3 &&
              ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 && ncclHalf == 6 && ncclFloat32 == 7 &&
              ncclFloat == 7 && ncclFloat64 == 8 && ncclDouble == 8 && ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 &&
              ncclFloat8e5m2 == 11 && ncclNumTypes == 12);
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4 && ncclNumOps == 5 &&
              ncclMaxRedOp == 0x7fffffff);
static_assert(sizeof(ncclRedOp_t) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclResult_t) == 4);
static_assert(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1);
static_assert(NCCL_UNIQUE_ID_BYTES == 128 && sizeof(ncclUniqueId) == 128);
static_assert(NCCL_SPLIT_NOCOLOR == -1 && NCCL_CONFIG_UNDEF_INT == INT_MIN);
static_assert(NCCL_SHRINK_DEFAULT == 0 && NCCL_SHRINK_ABORT == 1 && NCCL_REVOKE_DEFAULT == 0);
static_assert(NCCL_WIN_DEFAULT == 0 && NCCL_WIN_COLL_SYMMETRIC == 1 && NCCL_WIN_REQUIRED_ALIGNMENT == 4096);
static_assert(NCCL_CTA_POLICY_DEFAULT == 0 && NCCL_CTA_POLICY_EFFICIENCY == 1 && NCCL_CTA_POLICY_ZERO == 2);
static_assert(NCCL_VERSION_CODE == 22809 && NCCL_VERSION(2, 28, 9) == 22809 && NCCL_VERSION(2, 8, 4) == 2804);

static_assert(sizeof(ncclConfig_t) == 80);
static_assert(offsetof(ncclConfig_t, size) == 0 && offsetof(ncclConfig_t, magic) == 8 &&
              offsetof(ncclConfig_t, version) == 12 && offsetof(ncclConfig_t, blocking) == 16 &&
              offsetof(ncclConfig_t, cgaClusterSize) == 20 && offsetof(ncclConfig_t, minCTAs) == 24 &&
              offsetof(ncclConfig_t, maxCTAs) == 28 && offsetof(ncclConfig_t, netName) == 32 &&
              offsetof(ncclConfig_t, splitShare) == 40 && offsetof(ncclConfig_t, trafficClass) == 44 &&
              offsetof(ncclConfig_t, commName) == 48 && offsetof(ncclConfig_t, collnetEnable) == 56 &&
              offsetof(ncclConfig_t, CTAPolicy) == 60 && offsetof(ncclConfig_t, shrinkShare) == 64 &&
              offsetof(ncclConfig_t, nvlsCTAs) == 68 && offsetof(ncclConfig_t, nChannelsPerNetPeer) == 72 &&
              offsetof(ncclConfig_t, nvlinkCentricSched) == 76);
static_assert(sizeof(ncclSimInfo_t) == 24 && offsetof(ncclSimInfo_t, estimatedTime) == 16);

// NCCL_CONFIG_INITIALIZER's values.
inline constexpr ncclConfig_t kInitialConfig = NCCL_CONFIG_INITIALIZER;
static_assert(kInitialConfig.size == sizeof(ncclConfig_t) && kInitialConfig.magic == 0xcafebeef &&
              kInitialConfig.version == 22809 && kInitialConfig.blocking == INT_MIN &&
              kInitialConfig.netName == nullptr && kInitialConfig.nvlinkCentricSched == INT_MIN);
