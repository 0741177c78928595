/* ouro: collective communication between processes (host buffers over shared memory and TCP;
 * CUDA and InfiniBand where built and present). The contract is docs/API.md: names, values and
 * semantics here follow NCCL's so that code written for NCCL ports by renaming.
 *
 * Every function returns ouroSuccess or an error code; ouroGetLastError gives the full message
 * (what failed, on which rank, in which call, and what to do). */
#ifndef OURO_OURO_H_
#define OURO_OURO_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OURO_MAJOR 0
#define OURO_MINOR 1
#define OURO_PATCH 0
#define OURO_VERSION_CODE (OURO_MAJOR * 10000 + OURO_MINOR * 100 + OURO_PATCH)

typedef enum {
  ouroSuccess = 0,
  ouroUnhandledCudaError = 1,
  ouroSystemError = 2,
  ouroInternalError = 3,
  ouroInvalidArgument = 4,
  ouroInvalidUsage = 5,
  ouroRemoteError = 6,
  ouroInProgress = 7,
  ouroTimeout = 8,
  ouroUnavailable = 9,
  /* Extension (issue #34, ouro/diagnostics.h): bytes that must be identical on every rank are not;
   * the message names the ranks that differ from the majority. */
  ouroReplicaMismatch = 10,
  ouroNumResults = 11
} ouroResult_t;

typedef enum {
  ouroInt8 = 0,
  ouroChar = 0,
  ouroUint8 = 1,
  ouroInt32 = 2,
  ouroInt = 2,
  ouroUint32 = 3,
  ouroInt64 = 4,
  ouroUint64 = 5,
  ouroFloat16 = 6,
  ouroHalf = 6,
  ouroFloat32 = 7,
  ouroFloat = 7,
  ouroFloat64 = 8,
  ouroDouble = 8,
  ouroBfloat16 = 9,
  ouroFloat8e4m3 = 10, /* OCP FP8 E4M3 ("fn"): no infinities, NaN 0x7f/0xff, largest 448 */
  ouroFloat8e5m2 = 11, /* OCP FP8 E5M2: IEEE-like, infinities, largest finite 57344 */
  ouroNumTypes = 12
} ouroDataType_t;

/* Reproducible reductions: every reduced element is one fixed binary tree over the ranks'
 * contributions, decided by the number of ranks n alone (OURO_ORDER=tree, the default: the first
 * 2(n-P) ranks combined in pairs, P the largest power of two <= n, then a complete binary tree over
 * the P leaves in rank order; n <= 3 is the left fold), or, with OURO_ORDER=rank, the left fold
 *   r = op(...op(op(x[0], x[1]), x[2])..., x[n-1]),
 * rounded to the dtype after every op (fp16/bf16/fp8 combined in fp32, rounded to nearest even;
 * fp8 saturates a finite result past its largest value to that value), and for ouroAvg divided
 * by n once at the end (integers truncate toward zero). So a result depends only
 * on the inputs, the dtype, the op and the number of ranks -- never on the algorithm (OURO_ALGO),
 * the transport, the collective (allreduce == allgather(reducescatter) == reduce, bit for bit), the
 * element's position or the call's count. docs/API.md "Reproducible reductions". */
/* ouroNumOps is also the first value ouroRedOpCreatePreMulSum hands out; ouroMaxRedOp keeps such
 * values inside the enum's range in C++ (as NCCL's ncclMaxRedOp does). */
typedef enum {
  ouroSum = 0,
  ouroProd = 1,
  ouroMax = 2,
  ouroMin = 3,
  ouroAvg = 4,
  ouroNumOps = 5,
  ouroMaxRedOp = 0x7fffffff
} ouroRedOp_t;

/* Where the scalar of ouroRedOpCreatePreMulSum lives (NCCL's ncclScalarResidence_t values). */
typedef enum {
  ouroScalarDevice = 0,       /* read when the reduction runs: device memory, or host memory for host calls */
  ouroScalarHostImmediate = 1 /* host memory, read before ouroRedOpCreatePreMulSum returns */
} ouroScalarResidence_t;

typedef struct ouroComm* ouroComm_t;
typedef struct ouroStream* ouroStream_t; /* NULL: the call blocks until done (host buffers) */

#define OURO_SPLIT_NOCOLOR (-1)

/* ---- results and version ---- */
const char* ouroGetErrorString(ouroResult_t result);
/* Full message of the last failure on comm; comm may be NULL: the last failure of this thread. */
const char* ouroGetLastError(ouroComm_t comm);
ouroResult_t ouroGetVersion(int* version); /* major*10000 + minor*100 + patch */

/* ---- communicators ---- */
/* init_method: "tcp://HOST:PORT" (rank 0 serves the rendezvous store there unless
 * OURO_STORE_HOSTED=1), "file:///PATH" (a shared file system), "env://" (as ouroCommInitFromEnv). */
ouroResult_t ouroCommInitRank(ouroComm_t* comm, int nranks, int rank, const char* init_method);
/* Rank, size and local rank from OURO_*, torchrun, Slurm, Open MPI or MPICH variables (in that
 * order); the rendezvous is OURO_INIT if set, else tcp://MASTER_ADDR:MASTER_PORT. */
ouroResult_t ouroCommInitFromEnv(ouroComm_t* comm);
/* Collective over comm; color OURO_SPLIT_NOCOLOR gives *newcomm = NULL. Ranks of a new
 * communicator are ordered by key, then by rank in comm. */
ouroResult_t ouroCommSplit(ouroComm_t comm, int color, int key, ouroComm_t* newcomm);
/* NCCL's ncclCommShrink: a new communicator of comm's ranks less the nexclude ranks in
 * excluded_ranks, ordered as in comm (new rank = old rank less the excluded ranks below it).
 * Called by every remaining rank with the same list (in any order); usable after comm failed (a
 * peer died, aborted or timed out): the ranks agree through the rendezvous store, never over
 * comm's links. Different lists: ouroInvalidUsage on the callers, naming the lists; an excluded
 * rank that calls it: ouroInvalidUsage saying it is excluded. comm is left as it was (destroy it).
 * docs/API.md "Shrinking a communicator". */
ouroResult_t ouroCommShrink(ouroComm_t comm, int nexclude, const int* excluded_ranks, ouroComm_t* newcomm);
ouroResult_t ouroCommDestroy(ouroComm_t comm); /* waits for queued work, frees everything */
ouroResult_t ouroCommAbort(ouroComm_t comm);   /* local and immediate; peers then fail with ouroRemoteError */
/* NCCL's ncclCommRevoke: stops comm's work now as ouroCommAbort does (calls waiting on other threads
 * and queued work fail at once, peers fail with ouroRemoteError), but keeps comm for ouroCommShrink
 * and ouroCommDestroy. Later calls on it get ouroInvalidUsage. An extension of the API. */
ouroResult_t ouroCommRevoke(ouroComm_t comm);
ouroResult_t ouroCommCount(ouroComm_t comm, int* count);
ouroResult_t ouroCommUserRank(ouroComm_t comm, int* rank);
ouroResult_t ouroCommLocalRank(ouroComm_t comm, int* local_rank); /* rank among processes on this host */
ouroResult_t ouroCommLocalCount(ouroComm_t comm, int* local_count);
/* What the planner does with a host all-reduce of count elements of datatype on comm (runs
 * nothing; every rank gets the same answer): the algorithm's name ("pairwise", "gather-fold", ...;
 * cut to algorithm_len-1 bytes) and the cost model's predicted time in microseconds, -1 where the
 * model is off (OURO_MODEL=off) or has no formula for the plan (one rank). algorithm and
 * predicted_us may be NULL. docs/API.md "Plans". */
ouroResult_t ouroCommPlanAllReduce(ouroComm_t comm, size_t count, ouroDataType_t datatype, char* algorithm,
                                   size_t algorithm_len, double* predicted_us);
/* The cost model's parameters in words and where they came from (the probe, its cache, OURO_MODEL,
 * the defaults), or "off"; cut to text_len-1 bytes. */
ouroResult_t ouroCommModelDescribe(ouroComm_t comm, char* text, size_t text_len);

/* ---- reduction operators (an extension of the API, as NCCL's ncclRedOpCreatePreMulSum) ---- */
/* A sum whose every input element is first multiplied by *scalar (of datatype) on its own rank and
 * rounded to datatype (fp16/bf16/fp8 multiplied in fp32), then folded in rank order as ouroSum.
 * The op is a value >= ouroNumOps, valid on comm and for datatype only, until ouroRedOpDestroy.
 * Each rank may pass its own scalar. docs/API.md "Pre-multiplied sums". */
ouroResult_t ouroRedOpCreatePreMulSum(ouroRedOp_t* op, void* scalar, ouroDataType_t datatype,
                                      ouroScalarResidence_t residence, ouroComm_t comm);
ouroResult_t ouroRedOpDestroy(ouroRedOp_t op, ouroComm_t comm);

/* ---- streams ---- */
ouroResult_t ouroStreamCreate(ouroComm_t comm, ouroStream_t* stream); /* host work queue, in issue order */
ouroResult_t ouroStreamFromCuda(ouroComm_t comm, void* cuda_stream, ouroStream_t* stream); /* device buffers */
ouroResult_t ouroStreamQuery(ouroStream_t stream);       /* ouroSuccess when all done, ouroInProgress otherwise */
ouroResult_t ouroStreamSynchronize(ouroStream_t stream); /* waits; returns the first error of queued work */
ouroResult_t ouroStreamDestroy(ouroStream_t stream);

/* ---- collectives (layouts and in-place rules are NCCL's; count 0 is a valid no-op) ---- */
ouroResult_t ouroAllReduce(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype,
                           ouroRedOp_t op, ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ouroDataType_t datatype,
                               ouroRedOp_t op, ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ouroDataType_t datatype,
                           ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroBroadcast(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype, int root,
                           ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroReduce(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype, ouroRedOp_t op,
                        int root, ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroAllToAll(const void* sendbuff, void* recvbuff, size_t count /* per peer */,
                          ouroDataType_t datatype, ouroComm_t comm, ouroStream_t stream);
ouroResult_t ouroSend(const void* sendbuff, size_t count, ouroDataType_t datatype, int peer, ouroComm_t comm,
                      ouroStream_t stream);
ouroResult_t ouroRecv(void* recvbuff, size_t count, ouroDataType_t datatype, int peer, ouroComm_t comm,
                      ouroStream_t stream);
/* Receives the next send to this rank from any other rank (MPI_ANY_SOURCE; torch's recv without
 * src): the first rank found with such a send waiting, which *peer is set to. An extension of
 * NCCL's API. Blocking: stream must be NULL (it runs on the caller's thread), and it cannot be
 * part of a group. Host memory; over shared memory and TCP (ouroInvalidUsage where a link to a
 * possible sender is InfiniBand). count and datatype must match the send's, as for ouroRecv.
 * Ranks that have exited are passed over; it fails when every other rank has, or one failed. */
ouroResult_t ouroRecvAny(void* recvbuff, size_t count, ouroDataType_t datatype, int* peer, ouroComm_t comm,
                         ouroStream_t stream);
ouroResult_t ouroGroupStart(void); /* sends/recvs issued until ouroGroupEnd run together */
ouroResult_t ouroGroupEnd(void);
ouroResult_t ouroBarrier(ouroComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* OURO_OURO_H_ */
