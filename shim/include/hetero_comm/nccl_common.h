/* hetero_comm/nccl_common.h: the body of the shim's nccl.h and rccl.h (NCCL 2.30.7's C API).
 *
 * Include <nccl.h> (CUDA flavour) or <rccl/rccl.h> (ROCm flavour), not this file. Names, enum
 * values and struct layouts are NCCL's, so programs built against NVIDIA's or AMD's headers run
 * against the shim unchanged. Before including it, the flavour header defines HC_NCCL_STREAM_T
 * (the stream type of the prototypes) and, for RCCL, HC_NCCL_RCCL_FLAVOUR.
 */
#ifndef HETERO_COMM_NCCL_COMMON_H_
#define HETERO_COMM_NCCL_COMMON_H_

#if !defined(HC_NCCL_STREAM_T)
#error "include <nccl.h> or <rccl/rccl.h>, not hetero_comm/nccl_common.h"
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
/* Codes before 2.9 had two decimal digits for the minor version. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

/* Which library implements these declarations (a program may test it). */
#define HETERO_COMM_NCCL_SHIM 1

#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00
#define NCCL_SUSPEND_MEM 0x01

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct ncclParamHandle* ncclParamHandle_t;

typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
#if defined(HC_NCCL_RCCL_FLAVOUR)
  ncclNumResults = 8
#else
  ncclTimeout = 8,
  ncclNumResults = 9
#endif
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* The dummy enum fixes the size the int-sized ncclRedOp_t must keep for the ABI. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* ids from here on are made by ncclRedOpCreatePreMulSum */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* size, magic and version tell the library which fields a caller's struct has. */
#if defined(HC_NCCL_RCCL_FLAVOUR)
typedef struct ncclConfig_v22800 {
#else
typedef struct ncclConfig_v23000 {
#endif
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
#if !defined(HC_NCCL_RCCL_FLAVOUR)
  int graphStreamOrdering;
#endif
} ncclConfig_t;

#define HC_NCCL_UNDEF3 NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT
#if defined(HC_NCCL_RCCL_FLAVOUR)
#define HC_NCCL_CONFIG_TAIL
#else
#define HC_NCCL_CONFIG_TAIL , NCCL_CONFIG_UNDEF_INT /* graphStreamOrdering */
#endif
#define NCCL_CONFIG_INITIALIZER                                                                   \
  {                                                                                               \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,               \
        HC_NCCL_UNDEF3, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_PTR, HC_NCCL_UNDEF3, HC_NCCL_UNDEF3, HC_NCCL_UNDEF3 HC_NCCL_CONFIG_TAIL \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* Every function exists as ncclX and as its profiling twin pncclX. */
#define HC_NCCL_API(ret, name, params) \
  ret name params;                     \
  ret p##name params;

typedef HC_NCCL_STREAM_T hcNcclStream_t;
#define HC_S hcNcclStream_t

/* ---- library, memory, communicators ---- */
HC_NCCL_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
HC_NCCL_API(ncclResult_t, ncclMemFree, (void* ptr))
HC_NCCL_API(ncclResult_t, ncclGetVersion, (int* version))
HC_NCCL_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
HC_NCCL_API(ncclResult_t, ncclCommInitRankConfig,
            (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
HC_NCCL_API(ncclResult_t, ncclCommInitRank,
            (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
HC_NCCL_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
HC_NCCL_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
HC_NCCL_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
HC_NCCL_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
HC_NCCL_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
HC_NCCL_API(ncclResult_t, ncclCommSplit,
            (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
HC_NCCL_API(ncclResult_t, ncclCommShrink,
            (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
             ncclConfig_t* config, int shrinkFlags))
HC_NCCL_API(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId))
HC_NCCL_API(ncclResult_t, ncclCommGrow,
            (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
             ncclComm_t* newcomm, ncclConfig_t* config))
HC_NCCL_API(ncclResult_t, ncclCommInitRankScalable,
            (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
             ncclConfig_t* config))
HC_NCCL_API(const char*, ncclGetErrorString, (ncclResult_t result))
HC_NCCL_API(const char*, ncclGetLastError, (ncclComm_t comm))
HC_NCCL_API(void, ncclResetDebugInit, (void))
HC_NCCL_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
HC_NCCL_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
HC_NCCL_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
HC_NCCL_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))
HC_NCCL_API(ncclResult_t, ncclCommRegister,
            (const ncclComm_t comm, void* buff, size_t size, void** handle))
HC_NCCL_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
HC_NCCL_API(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags))
HC_NCCL_API(ncclResult_t, ncclCommResume, (ncclComm_t comm))
HC_NCCL_API(ncclResult_t, ncclCommMemStats,
            (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value))
HC_NCCL_API(ncclResult_t, ncclCommWindowRegister,
            (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
HC_NCCL_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))
HC_NCCL_API(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr))
HC_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum,
            (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype,
             ncclScalarResidence_t residence, ncclComm_t comm))
HC_NCCL_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

/* ---- collectives and point to point ---- */
HC_NCCL_API(ncclResult_t, ncclReduce,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, int root, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclBcast,
            (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
             HC_S stream))
HC_NCCL_API(ncclResult_t, ncclBroadcast,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclAllReduce,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclReduceScatter,
            (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclAllGather,
            (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclAlltoAll,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclGather,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclScatter,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclSend,
            (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             HC_S stream))
HC_NCCL_API(ncclResult_t, ncclRecv,
            (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             HC_S stream))
HC_NCCL_API(ncclResult_t, ncclPutSignal,
            (const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
             ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclSignal,
            (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclWaitSignal,
            (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclGroupStart, (void))
HC_NCCL_API(ncclResult_t, ncclGroupEnd, (void))
HC_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

/* RCCL's all-to-all spellings; counts and displacements are in elements. */
HC_NCCL_API(ncclResult_t, ncclAllToAll,
            (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclAllToAllv,
            (const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
             ncclDataType_t datatype, ncclComm_t comm, HC_S stream))
HC_NCCL_API(ncclResult_t, ncclAlltoAllv,
            (const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
             ncclDataType_t datatype, ncclComm_t comm, HC_S stream))

/* ---- NCCL parameters (2.30.4); the shim has none yet ---- */
HC_NCCL_API(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key))
HC_NCCL_API(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out))
HC_NCCL_API(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out))
HC_NCCL_API(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len))
HC_NCCL_API(ncclResult_t, ncclParamGetParameter,
            (const char* key, const char** value, int* valueLen))
HC_NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen))
HC_NCCL_API(void, ncclParamDumpAll, (void))

#undef HC_S

#ifdef __cplusplus
}
#endif

#endif /* HETERO_COMM_NCCL_COMMON_H_ */
