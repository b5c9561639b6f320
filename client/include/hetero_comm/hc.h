/* hetero_comm/hc.h: the C API of libhcclient.so.1.
 *
 * A training process links libhcclient and talks to the node's hetero-commd, which executes the
 * collectives over the ranks' buffers. Each NCCL call maps onto one hc_* call with the same
 * arguments plus an optional request handle; enum values equal NCCL's.
 *
 * Asynchrony: every operation returns once it is submitted. Pass a request pointer to get a
 * handle for hc_test / hc_wait; pass NULL to let the communicator track it (hc_comm_finalize
 * waits for such operations and hc_comm_get_async_error reports their failures). Operations of
 * one communicator execute in the order they were issued on each rank.
 *
 * Threads: every function may be called from any thread. hc_comm_abort may be called while
 * other threads wait on the communicator; their waits return HC_UNAVAILABLE.
 *
 * Memory: memory from hc_mem_alloc is zero-copy: the daemon maps it once and reads and writes it
 * in place. Any other host memory works too, at the cost of one copy each way: the library
 * copies send data into a staging area of its segment when the operation is submitted, and
 * copies results back into the receive buffer before the request reports done (hc_test,
 * hc_wait) or, for operations issued with req == NULL, before hc_comm_finalize returns. In-place
 * calls stay in place on the staged copy. An operation on such memory that an earlier, unfinished
 * operation has yet to write waits for it when issued, so results still follow issue order. A
 * buffer that straddles the edge of hc_mem_alloc memory is rejected with HC_INVALID_ARGUMENT.
 *
 * Cross-memory attach (opt-in): with HC_CROSS_MEMORY_ATTACH=1 in the environment, the library
 * asks the daemon, when it connects, to read and write this process's memory itself, through
 * this process's /proc/self/mem, which the library opens and hands over. That takes the daemon's
 * session.cross_memory_attach setting and no ptrace rights; the descriptor reaches this process's
 * address space only, and nothing once the process calls exec. The library checks the path with
 * a probe. When it passes, other host memory goes to the daemon by address and the library
 * copies nothing: as with hc_mem_alloc memory, the daemon reads send data when the operation
 * runs and has written the results when the request reports done, so buffers must stay mapped
 * and untouched until then (for operations issued with req == NULL, until hc_comm_finalize
 * returns). Otherwise the library stages as above, without printing anything;
 * hc_get_memory_path says which path is in use and why.
 *
 * Groups: between hc_group_start and hc_group_end (nesting like NCCL's, per thread) operations
 * are recorded and their requests returned at once; the outermost hc_group_end submits them,
 * matched as one unit per communicator, so sends and receives may be posted in any order. A
 * call that fails inside a group fails the whole group: hc_group_end then returns that error
 * and the group's requests complete with it. hc_wait on a request of the calling thread's open
 * group fails with HC_INVALID_ARGUMENT (it would never be submitted).
 */
#ifndef HETERO_COMM_HC_H_
#define HETERO_COMM_HC_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; everything declared here is its interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define HC_MAJOR 0
#define HC_MINOR 1
#define HC_PATCH 0
#define HC_VERSION_CODE (HC_MAJOR * 10000 + HC_MINOR * 100 + HC_PATCH)

#define HC_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[HC_UNIQUE_ID_BYTES];
} hc_unique_id_t;

typedef struct hc_comm* hc_comm_t;
typedef struct hc_request* hc_request_t;
/* A device stream (cudaStream_t / hipStream_t) for device buffers; NULL for host memory. On a
 * communicator ordered on streams (hc_comm_order_on_streams) every operation takes its stream,
 * and NULL is the runtime's legacy default stream. */
typedef void* hc_stream_t;

/* A GPU runtime of the calling process, as hc_comm_order_on_streams names it. */
typedef enum { HC_RUNTIME_CUDA = 1, HC_RUNTIME_HIP = 2 } hc_runtime_t;

typedef enum {
  HC_OK = 0,
  HC_IN_PROGRESS = 1,
  HC_NO_RESOURCE = 2,
  HC_INVALID_ARGUMENT = 3,
  HC_NOT_FOUND = 4,
  HC_PERMISSION_DENIED = 5,
  HC_UNAVAILABLE = 6, /* the daemon, a peer rank or the communicator went away or was aborted */
  HC_TIMEOUT = 7,
  HC_REMOTE_ERROR = 8, /* another rank failed or disagreed */
  HC_DEVICE_ERROR = 9,
  HC_TRANSPORT_ERROR = 10,
  HC_INTERNAL = 11,
  HC_UNSUPPORTED = 12, /* a valid call hc cannot carry out here (a stream being graph-captured) */
  HC_NUM_STATUS = 13
} hc_status_t;

/* Values equal ncclDataType_t. */
typedef enum {
  HC_INT8 = 0,
  HC_UINT8 = 1,
  HC_INT32 = 2,
  HC_UINT32 = 3,
  HC_INT64 = 4,
  HC_UINT64 = 5,
  HC_FLOAT16 = 6,
  HC_FLOAT32 = 7,
  HC_FLOAT64 = 8,
  HC_BFLOAT16 = 9,
  HC_FLOAT8E4M3 = 10,
  HC_FLOAT8E5M2 = 11,
  HC_NUM_DTYPES = 12
} hc_dtype_t;

/* Values equal ncclRedOp_t; ids from HC_NUM_OPS on are pre-multiplied sums made by
 * hc_redop_create_premul_sum. */
typedef enum {
  HC_SUM = 0,
  HC_PROD = 1,
  HC_MAX = 2,
  HC_MIN = 3,
  HC_AVG = 4,
  HC_NUM_OPS = 5,
  HC_MAX_REDOP = 0x7fffffff
} hc_redop_t;

typedef enum { HC_SCALAR_DEVICE = 0, HC_SCALAR_HOST_IMMEDIATE = 1 } hc_scalar_residence_t;

#define HC_SPLIT_NOCOLOR (-1)
#define HC_CONFIG_UNDEF_INT INT_MIN
#define HC_API_MAGIC 0x48434346u

typedef struct {
  size_t size;       /* sizeof(hc_config_t) */
  unsigned magic;    /* HC_API_MAGIC */
  unsigned version;  /* HC_VERSION_CODE */
  int blocking;      /* 0: init returns HC_IN_PROGRESS; poll hc_comm_get_async_error */
  int timeout_ms;    /* init deadline; default 120000 */
  const char* comm_name;
  /* 1: small collectives (at most 4 KiB per rank) on host memory without a stream combine among
   * the ranks in a shared area, without a round trip through the daemon, when every rank of the
   * communicator asked, all sit on one daemon and share one uid. An operation then waits, when
   * issued, for this rank's earlier operations on the communicator to finish, so every rank must
   * issue the operations of its communicators in one order. Small collectives on device memory,
   * on a stream or in a group still work: they take the daemon, and the other ranks' follow them
   * there. Inherited by splits. Default 0. */
  int host_small_ops;
} hc_config_t;

#define HC_CONFIG_INITIALIZER                                                                     \
  {                                                                                               \
    sizeof(hc_config_t), HC_API_MAGIC, HC_VERSION_CODE, HC_CONFIG_UNDEF_INT, HC_CONFIG_UNDEF_INT, \
        NULL, HC_CONFIG_UNDEF_INT                                                                 \
  }

/* ---- library and communicators ---- */
hc_status_t hc_get_version(int* version);
const char* hc_get_error_string(hc_status_t status);
/* The last error message of this thread's last failed call on comm (NULL: of any call). */
const char* hc_get_last_error(hc_comm_t comm);

hc_status_t hc_get_unique_id(hc_unique_id_t* id);
hc_status_t hc_comm_init_rank(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank);
hc_status_t hc_comm_init_rank_config(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank,
                                     hc_config_t* config);
/* One communicator of ndev ranks, all in this process, as ncclCommInitAll makes one: rank i in
 * comms[i], on device devlist[i] (NULL devlist: device i). A device is the number the caller's
 * GPU runtime gives it (the CUDA or HIP ordinal); hc_comm_device reports it. hc finds each
 * buffer's device by its address, so the number only has to be >= 0 and name one rank only; it is
 * not checked against the runtime's devices. Blocks until every rank is ready: the ranks join
 * together under a fresh id of this daemon alone. On failure every comms[i] is NULL and nothing
 * of the communicator remains: HC_INVALID_ARGUMENT for comms NULL, ndev < 1, a negative or
 * repeated device, or the daemon's refusal (e.g. more ranks than its session.max_ranks); the
 * daemon's error otherwise. Operations then follow the usual rules: a collective waits for every
 * rank, so one thread issues the ranks' calls inside hc_group_start / hc_group_end, or each rank
 * runs on a thread of its own. */
hc_status_t hc_comm_init_all(hc_comm_t* comms, int ndev, const int* devlist);
/* Collective over comm: ranks of one color form a new communicator, ordered by key (ties by
 * rank in comm). color >= 0, or HC_SPLIT_NOCOLOR to get *newcomm = NULL. Blocks like init unless
 * config->blocking == 0 (then HC_IN_PROGRESS; poll hc_comm_get_async_error on *newcomm). Not
 * allowed inside a group. */
hc_status_t hc_comm_split(hc_comm_t comm, int color, int key, hc_comm_t* newcomm,
                          hc_config_t* config);
/* Survivors carry on (NCCL's ncclCommShrink): a communicator of comm's ranks not in
 * exclude_ranks (exclude_count of them, any order), numbered in comm's order. Collective over
 * the survivors only: every survivor passes the same list (else every one gets
 * HC_INVALID_ARGUMENT; where lists name different lowest survivors, those whose lists agree get
 * what they describe and the others HC_TIMEOUT), and an excluded rank does not call. It forms even
 * when comm failed or the daemon that rooted comm is gone: the daemon of the lowest surviving rank
 * roots the new one. HC_SHRINK_ABORT first stops comm's outstanding operations on every survivor;
 * HC_SHRINK_DEFAULT needs comm idle (no operation outstanding on this daemon's ranks), else
 * HC_INVALID_ARGUMENT. Blocks like init unless config->blocking == 0; config->timeout_ms bounds how
 * long survivors wait for each other. Not allowed inside a group. */
#define HC_SHRINK_DEFAULT 0
#define HC_SHRINK_ABORT 1
hc_status_t hc_comm_shrink(hc_comm_t comm, const int* exclude_ranks, int exclude_count,
                           hc_comm_t* newcomm, hc_config_t* config, int flags);
/* Stops comm's operations on every rank (NCCL's ncclCommRevoke): those outstanding, here and on
 * the other ranks, fail with HC_UNAVAILABLE, and so do later ones. comm stays a parent for
 * hc_comm_shrink, and for hc_comm_split once every rank revoked it (the others call it too
 * when their operations fail; such a split blocks whatever its config says); hc_comm_finalize
 * is then refused (HC_UNSUPPORTED): destroy or abort it. flags must be 0. Returns once the
 * operations stopped on this daemon. */
hc_status_t hc_comm_revoke(hc_comm_t comm, int flags);
/* Waits for every operation issued on comm, then quiesces it. */
hc_status_t hc_comm_finalize(hc_comm_t comm);
/* Frees the local handle; the communicator must be finalized or idle. */
hc_status_t hc_comm_destroy(hc_comm_t comm);
/* Fails every pending operation of comm on every rank, then frees the handle. Never blocks on
 * other ranks, nor on calls in flight on comm in other threads: those keep the handle until they
 * return (a wait among them returns HC_UNAVAILABLE). A second abort of comm returns HC_OK.
 * After hc_comm_destroy or hc_comm_abort, a call that still reaches the handle (a thread started
 * before it) fails: HC_UNAVAILABLE when it was aborted, HC_INVALID_ARGUMENT when destroyed, and
 * hc_comm_get_async_error of an aborted handle gives HC_UNAVAILABLE. Such calls are safe while
 * fewer than 256 other communicators of the process have ended since; later ones must not be
 * made, as with any freed handle. */
hc_status_t hc_comm_abort(hc_comm_t comm);
/* The first failure of an operation comm tracks (one issued without a request), or HC_OK; a
 * failure's words become the calling thread's hc_get_last_error. A local read: no round trip. */
hc_status_t hc_comm_get_async_error(hc_comm_t comm, hc_status_t* async_error);
hc_status_t hc_comm_count(hc_comm_t comm, int* count);
/* The device hc_comm_init_all put this rank on (a split inherits it); -1 for a communicator made
 * otherwise. */
hc_status_t hc_comm_device(hc_comm_t comm, int* device);
hc_status_t hc_comm_user_rank(hc_comm_t comm, int* rank);
/* Stream ordering as NCCL defines it, for NCCL-like callers (the shim sets it on every
 * communicator it makes). From this call on, every operation on comm is ordered on the stream it
 * is given, of `runtime`, whatever memory its buffers are in: it starts once the work queued on
 * the stream before it completed, later work waits for its result, and the call returns once it
 * is enqueued (a failure found later is comm's asynchronous error). A NULL stream is the legacy
 * default stream of the calling thread's current context. A stream being captured into a graph
 * is refused with HC_UNSUPPORTED. HC_NOT_FOUND when `runtime` is not loaded in this process:
 * then nothing changes (a NULL stream still means none). Communicators split from comm inherit
 * it. */
hc_status_t hc_comm_order_on_streams(hc_comm_t comm, hc_runtime_t runtime);

/* ---- the node's GPUs ---- */
/* One GPU of the node as its hetero-commd found it at start. Text fields are NUL-terminated; a
 * value the daemon does not know is "" (text), 0 (memory_bytes, figures) or -1 (numa_node). */
typedef struct {
  char id[32];      /* "nvidia:0", "sim-amd:1", "pci-intel:0" (on the bus, no runtime) */
  char vendor[16];  /* "nvidia", "amd", "intel", ... */
  char backend[16]; /* "cuda", "hip", "sim", or "none": the daemon cannot drive it */
  char model[96];
  char pci_bus_id[16]; /* "0000:3b:00.0"; "" for a simulated device */
  uint64_t memory_bytes;
  int numa_node;
  int measured; /* 1 when the figures below were measured; 0 while pending or when skipped */
  /* The device's staging + kernel rate (rate_gbps) relative to the node's fastest measured GPU,
   * which has 1.0: a share of the work in proportion to it keeps the GPUs equally busy. 0 when
   * not measured; note says why. */
  double weight;
  double h2d_gbps;    /* host -> device staging copies, GB/s (1e9 bytes) */
  double d2h_gbps;    /* device -> host staging copies */
  double reduce_gbps; /* the device's float32 sum of two buffers, bytes of one input per second */
  double rate_gbps;   /* 1 / (1/h2d + 1/d2h + 1/reduce): one byte through staging and the kernel */
  char note[96];      /* why it was not measured ("measuring", ...), or "" */
} hc_device_info_t;

/* The node's GPUs, in the daemon's order, connecting first if needed: fills devices[0 ..
 * min(capacity, total) - 1] and sets *count to the total, so a call with capacity 0 (devices may
 * then be NULL) learns how many there are. The list is fixed while the daemon runs; the daemon
 * measures the figures in the background shortly after it starts, so a call right after start
 * may see measured == 0 with note "measuring", and a later call other figures. One round trip
 * per device. HC_INVALID_ARGUMENT for count NULL, capacity < 0, or devices NULL with capacity >
 * 0; HC_UNSUPPORTED when the daemon predates the query (protocol 1.5). Nothing is written on
 * failure. */
hc_status_t hc_get_devices(hc_device_info_t* devices, int capacity, int* count);

/* ---- memory ---- */
/* Allocates size bytes of host memory shared with the daemon (page aligned, pre-faulted). */
hc_status_t hc_mem_alloc(void** ptr, size_t size);
/* Allocates size bytes of device memory of `runtime` on the calling thread's current device, as
 * cudaMalloc / hipMalloc do (ncclMemAlloc's memory); operations take it through the device path.
 * HC_NOT_FOUND when that runtime is not loaded in this process. Freed by hc_mem_free. */
hc_status_t hc_mem_alloc_device(void** ptr, size_t size, hc_runtime_t runtime);
/* Frees memory of hc_mem_alloc or hc_mem_alloc_device. */
hc_status_t hc_mem_free(void* ptr);
/* How host memory not from hc_mem_alloc reaches the daemon on this process's connection,
 * connecting first if needed: "cross-memory attach", or "segment staging (...)" with the reason,
 * such as not requested, off in the daemon's configuration, or refused by the kernel (the
 * daemon's words). The string belongs to the library and stays valid for the life of the
 * process. A forked child gets a connection, and a probe, of its own. */
hc_status_t hc_get_memory_path(const char** description);
/* Registration (ncclCommRegister): optional; an operation on memory never registered works too.
 * Device memory (CUDA, HIP, sim): the daemon imports the allocation now, so the first operation
 * on it imports nothing, and keeps it while registered (memory an operation merely used may be
 * released when the process passes the daemon's devices.max_imported_bytes_per_client).
 * hc_mem_alloc memory: a handle only (zero copy already). Other host memory: with cross-memory
 * attach the range is checked to be mapped readable and writable in this process; without it a
 * handle only: such memory is still staged through the segment on every operation, not zero
 * copy. *handle is valid until hc_comm_deregister on the same communicator; a handle that is not
 * live there is HC_INVALID_ARGUMENT. Deregistration never disturbs an operation still using the
 * buffer: the daemon keeps the memory mapped until such operations complete (it waits for
 * them, without blocking the caller). Freeing registered device memory (hc_mem_free,
 * hc_sim_free, or the runtime's own free) releases the daemon's import as well. */
hc_status_t hc_comm_register(hc_comm_t comm, void* buff, size_t size, void** handle);
hc_status_t hc_comm_deregister(hc_comm_t comm, void* handle);

/* ---- reduction operators ---- */
/* HC_SCALAR_HOST_IMMEDIATE: *scalar is read now. HC_SCALAR_DEVICE: scalar points into memory
 * from hc_mem_alloc (host ranks keep "device" scalars there), or into CUDA or HIP device memory
 * of this process; it is read each time an operation using op runs, as NCCL reads a device
 * scalar. A scalar in CUDA or HIP memory is read in stream order (copied on the operation's
 * stream just before the operation), so the operation must be ordered on a stream of that
 * runtime (a device-buffer operation on one of its streams, or any operation of a communicator
 * ordered by hc_comm_order_on_streams); other operations using op fail with
 * HC_INVALID_ARGUMENT. The operation's dtype must be dtype. */
hc_status_t hc_redop_create_premul_sum(hc_redop_t* op, void* scalar, hc_dtype_t dtype,
                                       hc_scalar_residence_t residence, hc_comm_t comm);
hc_status_t hc_redop_destroy(hc_redop_t op, hc_comm_t comm);

/* ---- collectives (req may be NULL) ---- */
hc_status_t hc_allreduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         hc_redop_t op, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
hc_status_t hc_broadcast(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
hc_status_t hc_reduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                      hc_redop_t op, int root, hc_comm_t comm, hc_stream_t stream,
                      hc_request_t* req);
hc_status_t hc_allgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                         hc_dtype_t dtype, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
hc_status_t hc_reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                              hc_dtype_t dtype, hc_redop_t op, hc_comm_t comm, hc_stream_t stream,
                              hc_request_t* req);
/* count elements to and from every peer: sendbuff and recvbuff hold nranks * count. */
hc_status_t hc_alltoall(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                        hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
/* Counts and displacements in elements, one per peer. Runs as a group of hc_send/hc_recv (inside
 * the caller's group if one is open; peers with count 0 get none); *req completes when every
 * part has, with the first failure among them. Elements between the parts of recvbuff are left
 * as they were. */
hc_status_t hc_alltoallv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                         void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                         hc_dtype_t dtype, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
/* count elements per rank; only the root's recvbuff (gather) / sendbuff (scatter) is used, and
 * it holds nranks * count, rank r's part at r * count. */
hc_status_t hc_gather(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                      int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
hc_status_t hc_scatter(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                       int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
/* Point to point; a send to oneself must be in a group with the matching hc_recv. */
hc_status_t hc_send(const void* sendbuff, size_t count, hc_dtype_t dtype, int peer,
                    hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
hc_status_t hc_recv(void* recvbuff, size_t count, hc_dtype_t dtype, int peer, hc_comm_t comm,
                    hc_stream_t stream, hc_request_t* req);
hc_status_t hc_barrier(hc_comm_t comm, hc_stream_t stream, hc_request_t* req);
/* See "Groups" above. hc_group_end without hc_group_start returns HC_INVALID_ARGUMENT; a group
 * of more than 65536 operations on one communicator fails at hc_group_end with it. */
hc_status_t hc_group_start(void);
hc_status_t hc_group_end(void);

/* ---- requests ---- */
/* Sets *done to 1 and frees the request when the operation finished; returns its status then
 * (HC_OK while not done). */
hc_status_t hc_test(hc_request_t* req, int* done);
/* Blocks until the operation completes, fails, or its communicator is aborted; frees the
 * request and sets *req to NULL. */
hc_status_t hc_wait(hc_request_t* req);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* HETERO_COMM_HC_H_ */
