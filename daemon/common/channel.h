/* SPDX-License-Identifier: MIT */
/*
 * The channel between the front and the executor: a Unix SOCK_SEQPACKET
 * socketpair. Each message is one packet: a fixed header, then a payload
 * whose layout the op fixes (both ends are the same binary, so the layouts
 * are plain C structs). A file descriptor may ride along (SCM_RIGHTS).
 */
#ifndef CUMOD_CHANNEL_H
#define CUMOD_CHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Buckets of the launch latency histogram (cumod_launch_latency_seconds):
 * data/latency.h gives their bounds. */
#define CUMOD_LAT_BUCKETS 19

/* The largest packet either side sends; the receive buffer's size. */
#define CUMOD_CHAN_MAX (64 * 1024)

typedef enum cumod_chan_op {
    /* executor -> front, once, after the context is up: cumod_chan_device */
    CUMOD_CHAN_READY = 1,
    /* executor -> front, once, when it cannot start: cumod_chan_error */
    CUMOD_CHAN_FAILED = 2,
    /* front -> executor: no payload; reply: cumod_chan_meminfo */
    CUMOD_CHAN_MEMINFO = 3,
    /* front -> executor: cumod_chan_load, with the image's sealed memfd;
     * reply: cumod_chan_loaded and what follows it */
    CUMOD_CHAN_LOAD = 4,
    /* front -> executor: cumod_chan_unload; reply: no payload */
    CUMOD_CHAN_UNLOAD = 5,
    /* front -> executor: cumod_chan_alloc; reply: cumod_chan_alloc */
    CUMOD_CHAN_ALLOC = 6,
    /* front -> executor: cumod_chan_free, then its u64 stream keys; the
     * memory is freed once the work those streams have now has completed,
     * after what the session's reclaim queue already holds; reply: no
     * payload, once queued */
    CUMOD_CHAN_FREE = 7,
    /* front -> executor: cumod_chan_segment with the segment's fd;
     * reply: cumod_chan_segment (host address filled in) */
    CUMOD_CHAN_SEG_MAP = 8,
    /* front -> executor: cumod_chan_segment; unregistered and unmapped
     * after what the reclaim queue holds (when reclaim is not 0) and when
     * the device is idle (cuMemHostUnregister waits for the device and
     * holds every launch meanwhile: bench/bench_threads.c); reply: no
     * payload, once done */
    CUMOD_CHAN_SEG_UNMAP = 9,
    /* (10 was STREAM_DESTROY: a STREAMS_CLOSE of one stream now) */
    /* front -> executor: cumod_chan_work then its items. Reply, with the
     * same seq: CUMOD_CHAN_DONE (cumod_chan_done, then the bytes of a READ
     * item) once complete, or with the error of a failed submission. (The
     * front answers "enqueued" itself: the channel keeps stream order.) */
    CUMOD_CHAN_WORK = 11,
    CUMOD_CHAN_DONE = 13,
    /* front -> executor: cumod_chan_streams, then u64 stream keys: each
     * stream is closed, and goes back to the executor's pool once its work
     * has completed; later frees of the session wait for that work too.
     * With no keys: the session is gone, and its reclaim queue ends after
     * what it holds. Nothing waits on the submission thread. reply: no
     * payload */
    CUMOD_CHAN_STREAMS_CLOSE = 14,
    /* executor -> front, once, just before it exits on a CUDA error that
     * ends its context (whichever call met it): cumod_chan_error, the
     * message naming the CUDA error */
    CUMOD_CHAN_FAULT = 15,
    /* front -> executor: cumod_chan_unload (the loaded generation's
     * handle), then a globals spec (see cumod_chan_load): the kept writes
     * applied to it again, on the load lane, before it serves; reply: no
     * payload (an error names the global) */
    CUMOD_CHAN_GLOBALS = 16,
    /* executor -> front: cumod_chan_done_one of each WORK (cumod_chan_work
     * with CUMOD_CHAN_WORK_F_GROUP) that completed without error and read
     * nothing: each is answered as a DONE with an empty cumod_chan_done
     * (its gpu_ns the entry's) would be */
    CUMOD_CHAN_DONE_MANY = 17,
    /* front -> executor: no payload. cuBLAS loaded and a handle made, on
     * the load lane (the library is large: its dlopen and cublasCreate take
     * long enough to hold every launch); reply: cumod_chan_error, whose
     * message says which library and version, or why not. Before the first
     * CUMOD_WORK_GEMM of an executor. */
    CUMOD_CHAN_BLAS = 18,
    /* front -> executor: no payload; reply: a cumod_chan_device for every
     * device the driver lists, in ordinal order (free_memory 0: that needs
     * a context) */
    CUMOD_CHAN_DEVICES = 19,
    /* Direct launches (docs/architecture.md "The data path"): a session's
     * ring read by its executor, which launches what it can check against
     * the snapshot the front gives it (CUMOD_CHAN_SNAP) and forwards the
     * rest to the front in ring order.
     *
     * front -> executor: cumod_chan_ring (its session), with the ring's
     * state block (a memfd of the front's: cumod_dring_state); the
     * RING_ATTACH that follows uses it. No reply. */
    CUMOD_CHAN_RING_STATE = 27,
    /* executor -> front: cumod_chan_ring_msg, then a sentence: the ring
     * was given up (its client broke the rules); the front detaches it */
    CUMOD_CHAN_RING_BAD = 28,
    /* front -> executor: no payload, with the host's crowd (a memfd of the
     * front's: cumod_crowd), before the first RING_ATTACH; no reply */
    CUMOD_CHAN_CROWD = 29,
    /* front -> executor: no payload, with the unit's direct page (a memfd
     * of the front's: cumod_direct_page), before its first RING_ATTACH
     * and again to each new executor; no reply */
    CUMOD_CHAN_DIRECT_PAGE = 30,
    /* front -> executor: cumod_chan_ring, with the ring's shared memory (a
     * sealed memfd its client handed over): the executor reads the ring
     * from sq_head on and answers into it from cq_tail on, after fwd_out
     * records the front still answers; reply: status only (CUMOD_OK: the
     * front stops reading it) */
    CUMOD_CHAN_RING_ATTACH = 20,
    /* front -> executor: cumod_chan_ring (its session), with the ring's
     * doorbell (the client's pipe or FIFO): rung while nobody polls */
    CUMOD_CHAN_RING_BELL = 21,
    /* front -> executor: cumod_chan_ring (its session): no more records
     * are read; the reply (cumod_chan_ring: where the executor left sq_head
     * and cq_tail) comes once every direct launch of the ring is answered.
     * The front then owns the ring again. */
    CUMOD_CHAN_RING_DETACH = 22,
    /* front -> executor: cumod_chan_ring_msg (len 0): the front answered a
     * record the executor forwarded (writing the answer into the ring
     * itself, under the state block's lock) and whatever work it made is
     * in the channel ahead of this: once every forwarded record is
     * resumed so, the executor serves the ring's launches again; no
     * reply */
    CUMOD_CHAN_RING_RESUME = 23,
    /* executor -> front: cumod_chan_ring_msg, then the record's bytes: a
     * record the executor does not serve itself, in ring order */
    CUMOD_CHAN_RING_FWD = 24,
    /* front -> executor: cumod_chan_snap, then what its op says; no
     * reply */
    CUMOD_CHAN_SNAP = 25,
    /* executor -> front: cumod_chan_dstats, then its entries: what direct
     * launches completed since the last (their counts and times) */
    CUMOD_CHAN_DIRECT_STATS = 26,
    /* front -> executor: no payload, no reply: an orderly stop, so the
     * channel's close that follows ends the executor at once. A close
     * without it means the front died: with --orphan-grace the executor
     * waits to be adopted (exec/orphan.h). */
    CUMOD_CHAN_STOP = 31,
    /* front -> executor: no payload, with the sessions' ledger (a memfd
     * of the front's, front/state/sledger.h), at each start and after each
     * compaction; no reply. The executor holds it, so that it outlives
     * the front, and hands it to whoever adopts it (orphan.h). */
    CUMOD_CHAN_LEDGER = 32,
    /* front -> executor, from a front that adopted it (orphan.h): no
     * payload; every module loaded before the adoption is unloaded (the
     * old front's, whose rings were detached first); reply: a uint64_t,
     * how many */
    CUMOD_CHAN_FORGET = 33,
} cumod_chan_op;

/* Adopting an orphaned executor (exec/orphan.h): a new front connects to
 * its adoption socket (SOCK_SEQPACKET, DIR/exec-PID.sock, mode 0600, the
 * executor's uid only) and sends one cumod_adopt_req with its end of a new
 * channel (SCM_RIGHTS); the executor answers one cumod_adopt_reply (status
 * 0: the channel is taken, and READY follows on it, as after a start;
 * else detail says why, and it waits on). */
#define CUMOD_ADOPT_MAGIC 0x74706f64u /* "dopt" */
#define CUMOD_ADOPT_VERSION 1u
typedef struct cumod_adopt_req {
    uint32_t magic, version;
    int32_t front_pid;
    uint32_t pad;
} cumod_adopt_req;
typedef struct cumod_adopt_reply {
    uint32_t magic, version;
    int32_t status; /* 0, or a cumod_err */
    int32_t pid;    /* the executor's */
    int32_t device; /* its CUDA ordinal */
    uint32_t has_ledger;
    /* The largest command sequence number the old front sent: the new
     * front numbers its commands well past it, so that a late answer to
     * the old front's work can never be taken for one of its own. */
    uint64_t last_seq;
    char detail[240];
} cumod_adopt_reply;

typedef struct cumod_chan_hdr {
    uint32_t op;
    int32_t status; /* a cumod error, in replies */
    uint64_t seq;   /* chosen by the requester, echoed in the reply */
    uint32_t flags; /* CUMOD_CHAN_F_* */
    uint32_t pad;
    uint64_t len; /* payload bytes (in the packet, or in the memfd) */
} cumod_chan_hdr;

/* The payload did not fit a packet: it is the whole content of the passed
 * file descriptor (a sealed memfd) instead. */
#define CUMOD_CHAN_F_MEMFD 0x1u
/* With CUMOD_CHAN_F_MEMFD: the packet carries two descriptors, the
 * payload's memfd and then the command's own (an image whose load command
 * lists more globals than a packet holds). */
#define CUMOD_CHAN_F_FD2 0x2u

/* The cuBLAS workspace the executor gives each stream that runs GEMMs
 * (exec_blas.c), by the device's SM major: the front charges it to the
 * session's memory (gemm.c). */
#define CUMOD_BLAS_WORKSPACE(sm_major)                                         \
    ((uint64_t)((sm_major) >= 9 ? 32 : 4) << 20)

typedef struct cumod_chan_device {
    int32_t ordinal;
    int32_t driver_version;
    uint32_t sm_major;
    uint32_t sm_minor;
    uint32_t multiprocessors;
    /* CU_DEVICE_ATTRIBUTE_MPS_ENABLED: its contexts are MPS clients (a
     * pool's executors; any executor where the operator runs MPS). */
    uint32_t mps;
    uint64_t total_memory;
    uint64_t free_memory;
    char name[256];
    uint32_t max_threads_per_block;
    uint32_t max_block[3];
    uint32_t max_grid[3];
    uint32_t max_shared_per_block;
    /* What a kernel may opt into (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_
     * PER_BLOCK_OPTIN); the 48 KiB above is what it gets without. */
    uint32_t max_shared_per_block_optin;
    uint32_t cluster_launch;     /* CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH */
    uint32_t cooperative_launch; /* CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH */
    uint32_t device_count;       /* CUDA devices the driver lists */
    /* cuDeviceGetUuid as nvidia-smi writes it: "GPU-xxxxxxxx-xxxx-xxxx-
     * xxxx-xxxxxxxxxxxx"; "" when the driver would not say. */
    char uuid[48];
} cumod_chan_device;

typedef struct cumod_chan_error {
    int32_t code; /* a cumod error */
    char message[1020];
} cumod_chan_error;

typedef struct cumod_chan_meminfo {
    uint64_t free_memory;
    uint64_t total_memory;
} cumod_chan_meminfo;

/* After it, a globals spec: u32 count, then per global u16 name length,
 * the name, u64 the size the module's earlier generations had (0: not
 * known), u32 write count, then per write u64 offset, u32 length and the
 * bytes. The executor looks each global up (cuModuleGetGlobal); a global
 * with kept writes must be there at its earlier size, and gets the writes
 * before the generation serves. */
typedef struct cumod_chan_load {
    uint64_t generation;
    uint32_t kind; /* cumod_image_kind */
    uint32_t pad;
    cumod_jit_opts jit; /* PTX, fatbin: the JIT options (-1: not given) */
    uint64_t len;       /* bytes of the image in the memfd */
    char name[132];     /* the module's name, for the log */
    uint32_t spec_len;  /* bytes of globals spec that follow */
} cumod_chan_load;

/* A kernel's attributes as the driver gives them once loaded. */
typedef struct cumod_chan_kattr {
    int32_t static_shared;  /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    int32_t registers;      /* CU_FUNC_ATTRIBUTE_NUM_REGS */
    uint32_t max_threads;   /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
    uint32_t cluster[3];    /* CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_* */
    int32_t max_dyn_shared; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE */
    uint32_t cluster_must;  /* CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET */
} cumod_chan_kattr;

/* The reply to LOAD: this struct, then msg_len bytes of error message,
 * log_len bytes of JIT log (PTX), then table_len bytes of kernel table:
 * per kernel, u16 name length, the name, u16 parameter count, then per
 * parameter u32 offset and u32 size, then a cumod_chan_kattr; after the
 * kernels, u32 global count and per global u16 name length, the name, u64
 * device address and u64 size (host byte order: same binary). */
typedef struct cumod_chan_loaded {
    uint64_t handle; /* the executor's id of this loaded generation */
    uint32_t nkernels;
    uint32_t msg_len;
    uint32_t log_len;
    uint32_t table_len;
    uint64_t load_ns; /* load plus resolving every function */
} cumod_chan_loaded;

typedef struct cumod_chan_unload {
    uint64_t handle;
} cumod_chan_unload;

typedef struct cumod_chan_alloc {
    uint64_t size;
    uint64_t dptr; /* in the reply */
} cumod_chan_alloc;

/* Streams are named by the front: session << 20 | index, index 0 the
 * session's default stream. CUMOD_CHAN_RECLAIM names the session's reclaim
 * queue in the executor: what the session gives back (memory, streams,
 * segments), each once the work that may use it has completed, in order.
 * The executor gives a key its stream on first use. */
#define CUMOD_CHAN_STREAM_BITS 20
#define CUMOD_CHAN_RECLAIM ((1u << CUMOD_CHAN_STREAM_BITS) - 1)

typedef struct cumod_chan_free {
    uint64_t dptr;
    uint64_t reclaim; /* the session's reclaim queue */
    uint64_t count;   /* u64 keys follow: streams whose work goes first */
} cumod_chan_free;

typedef struct cumod_chan_segment {
    uint64_t size;
    uint64_t host;    /* the executor's mapping; in the reply and UNMAP */
    uint64_t reclaim; /* UNMAP: after this reclaim queue (0: none) */
} cumod_chan_segment;

typedef struct cumod_chan_streams {
    uint64_t reclaim; /* the session's reclaim queue */
    uint64_t count;   /* u64 keys that follow: the streams to close (0:
                         the session is gone) */
} cumod_chan_streams;

typedef enum cumod_work_op {
    CUMOD_WORK_LAUNCH = 1, /* a: module handle, b: kernel index;
                              extra: the parameter buffer */
    CUMOD_WORK_HTOD,       /* a: dst dptr, b: src host address, c: bytes */
    CUMOD_WORK_DTOH,       /* a: dst host address, b: src dptr, c: bytes */
    CUMOD_WORK_DTOD,       /* a: dst dptr, b: src dptr, c: bytes */
    CUMOD_WORK_MEMSET,     /* a: dptr, b: byte value, c: bytes */
    CUMOD_WORK_WRITE,      /* a: dst dptr; extra: the bytes */
    CUMOD_WORK_READ,       /* b: src dptr, c: bytes, returned with DONE */
    CUMOD_WORK_GEMM,       /* extra: a cumod_chan_gemm */
} cumod_work_op;

/* A GEMM's element types (the values of proto's GemmType). */
typedef enum cumod_chan_gemm_type {
    CUMOD_CHAN_GEMM_FP32 = 1,
    CUMOD_CHAN_GEMM_FP64 = 2,
    CUMOD_CHAN_GEMM_FP16 = 3,
    CUMOD_CHAN_GEMM_BF16 = 4,
} cumod_chan_gemm_type;

/* A GEMM type's name ("BF16") for messages; NULL for another value. */
static inline const char *
cumod__chan_gemm_type_name(uint32_t t)
{
    static const char *const names[] = {NULL, "FP32", "FP64", "FP16", "BF16"};
    return t < sizeof(names) / sizeof(names[0]) ? names[t] : NULL;
}

/* A GEMM as cuBLAS takes it: column-major (the front turned a row-major
 * one around: C^T = op(B)^T op(A)^T), device addresses, every figure
 * checked against the buffers (the executor trusts it). batch 1:
 * cublasGemmEx, else cublasGemmStridedBatchedEx. */
typedef struct cumod_chan_gemm {
    uint32_t type;   /* cumod_chan_gemm_type of A and B */
    uint32_t c_type; /* of C */
    uint32_t transa, transb;
    int32_t m, n, k;
    int32_t batch;
    int32_t lda, ldb, ldc;
    uint32_t row_major; /* as asked (turned around): for messages only */
    uint64_t a, b, c;   /* device addresses */
    int64_t stride_a, stride_b, stride_c; /* elements */
    double alpha, beta;
} cumod_chan_gemm;

/* Launch flags of a work item. */
enum {
    CUMOD_WORK_F_COOPERATIVE = 1 << 0, /* grid-wide synchronization */
    CUMOD_WORK_F_CARVEOUT = 1 << 1,    /* carveout says the preference */
};

typedef struct cumod_work_item {
    uint32_t op;
    uint32_t extra; /* bytes following the item, padded to 8 */
    uint64_t a, b, c;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shmem;
    uint32_t flags;      /* LAUNCH: CUMOD_WORK_F_* */
    uint32_t cluster[3]; /* LAUNCH: cluster shape; 0s: none */
    int32_t carveout;    /* LAUNCH, with F_CARVEOUT: percent 0-100 */
} cumod_work_item;

/* A WORK whose completion nobody waits for on its own (answered when
 * enqueued, no deadline, no fault suspect): the executor may record one
 * event for it and the work after it on its stream (exec_work.c). */
#define CUMOD_CHAN_WORK_F_GROUP 0x1u

typedef struct cumod_chan_work {
    uint64_t stream; /* key */
    uint32_t nitems;
    uint32_t flags; /* CUMOD_CHAN_WORK_F_* */
} cumod_chan_work;

typedef struct cumod_chan_done {
    int32_t failed_index; /* -1: none, or not one item's */
    uint32_t msg_len;     /* bytes of message that follow */
    uint64_t data_len;    /* READ: bytes that follow the message */
    /* Device time of the WORK, ns, by completion timestamps (exec_work.c,
     * work_gpu_ns): from its submission, or its stream's previous
     * completion if later, to its own completion; a group's split evenly
     * among its WORKs. 0: none measured. */
    uint64_t gpu_ns;
} cumod_chan_done;

/* An entry of CUMOD_CHAN_DONE_MANY. */
typedef struct cumod_chan_done_one {
    uint64_t seq;
    uint64_t gpu_ns; /* as cumod_chan_done's */
} cumod_chan_done_one;

/* --- Direct launches ------------------------------------------------------ */

typedef struct cumod_chan_ring {
    uint32_t session; /* its id: the high bits of its stream keys */
    int32_t pid, uid; /* for the log */
    uint32_t fwd_out; /* ATTACH: records the front took and has not answered */
    uint64_t sq_head, cq_tail; /* ATTACH: where to start; DETACH's reply:
                                  where the executor left them */
    uint64_t map_len;          /* ATTACH: the ring's bytes */
    uint32_t busy_poll_us;     /* ATTACH: --busy-poll-us */
    uint32_t crowded_at;       /* ATTACH: hot rings that make a crowd */
    char name[208];            /* for the log */
} cumod_chan_ring;

typedef struct cumod_chan_ring_msg {
    uint32_t session;
    uint32_t len; /* bytes that follow */
    uint64_t end; /* RING_FWD: the sq position after the record */
} cumod_chan_ring_msg;

/* The ring's state block: a memfd the front makes per attached ring and
 * both processes map, so that both write answers into the ring and the
 * front can take the ring back whatever way the executor ends: where the
 * answers got to (cq_tail, under cq_lock: a robust process-shared mutex,
 * held for a record's copy only), where the executor read to, and the
 * direct launches it took and has not answered. A slot's id is the
 * request's (0: free); answered_at is cq_tail once its answer is in, set
 * before cq_tail is published and the slot freed, so that a slot still
 * set whose answered_at is at or below the published cq_tail was
 * answered. The client never sees this memory. */
#define CUMOD_DRING_SLOTS 256
typedef struct cumod_dring_slot {
    _Atomic uint64_t id;
    uint64_t handle;   /* the module generation's executor handle */
    uint32_t kernel;   /* its function's index */
    uint32_t stream;   /* the stream's index in the session */
    uint64_t start_ms; /* CLOCK_MONOTONIC, when it was taken */
    uint64_t end;      /* the sq position after its record */
    _Atomic uint64_t answered_at;
    /* A launch answered when enqueued: its ticket (the slot stays taken,
     * answered, until the launch completes); posted 1 for one posted
     * (CUMOD_TICKET_POSTED: never answered). A Wait for one: its ticket,
     * wait 1 (never counted as work in flight). */
    uint64_t ticket;
    uint32_t wait;
    uint32_t posted;
} cumod_dring_slot;

/* The executor's tickets (launches answered when enqueued that it took
 * itself) have this bit: a space apart from the front's, so that either
 * may give them and both know whose a Wait is for. */
#define CUMOD_DRING_TICKET_BIT (1ull << 62)

/* Tickets of the executor whose launch failed on the device and that no
 * Wait reported yet, the newest CUMOD_DRING_FAILED: the front takes them
 * over with the ring. */
#define CUMOD_DRING_FAILED 64
typedef struct cumod_dring_failed {
    uint64_t ticket;
    int32_t code;
    char msg[244];
} cumod_dring_failed;

typedef struct cumod_dring_state {
    pthread_mutex_t cq_lock;
    _Atomic uint64_t sq_head; /* published by the executor */
    _Atomic uint64_t cq_tail; /* under cq_lock, by either writer */
    _Atomic uint32_t inflight;
    /* The session's calls in progress in the front (its limit counts
     * both). */
    _Atomic uint32_t front_inflight;
    _Atomic uint32_t hot; /* the executor polls it (counted in the crowd) */
    /* Answers the front wrote to records it was forwarded (or held at the
     * attach): when they are all written, the executor waits a moment for
     * their RING_RESUMEs before it takes the next record, rather than
     * forward it too. */
    _Atomic uint64_t fwd_answered;
    cumod_dring_slot slot[CUMOD_DRING_SLOTS];
    /* The next ticket the executor gives (the front sets it at the attach
     * and takes it back with the ring), and its failed ones (under the
     * executor's lock; read by the front once the executor let go). */
    _Atomic uint64_t ticket_next;
    uint32_t nfailed, failed_at;
    cumod_dring_failed failed[CUMOD_DRING_FAILED];
} cumod_dring_state;

/* How many rings are polled now, host-wide: the front's and every
 * executor's (each counts its own up and down), so that each tells its
 * clients whether the host is crowded (--crowded-at). */
typedef struct cumod_crowd {
    _Atomic uint32_t hot;
} cumod_crowd;

/* CUMOD_CHAN_SNAP's ops. Module entries are per executor; the others
 * name a session and reach the thread that serves its ring, in order
 * with its work. */
enum {
    /* name: the module; a: its executor handle; b: the generation's
     * number; c: kernels; then c cumod_chan_skernel, each followed by its
     * nparams u32 offsets, u32 sizes, u8 pindirect and u8 pvalue (the last
     * two 0s when the kernel has no C++ signature), padded to 8 */
    CUMOD_SNAP_MODULE_SET = 1,
    CUMOD_SNAP_MODULE_DEL = 2, /* name */
    /* a: handle, b: device address, c: size */
    CUMOD_SNAP_BUF_ADD = 3,
    CUMOD_SNAP_BUF_DEL = 4, /* a: handle */
    /* a: handle, b: stream key */
    CUMOD_SNAP_STREAM_ADD = 5,
    CUMOD_SNAP_STREAM_DEL = 6, /* a: handle */
    /* a: CUMOD_SNAP_F_*, b: --launch-deadline, c: --max-launch-deadline */
    CUMOD_SNAP_UNIT = 7,
    /* a: the session's --session-max-inflight */
    CUMOD_SNAP_LIMIT = 8,
    /* a: a stream handle (0: the session's default stream) whose cuBLAS
     * workspace the front charged to the session: its GEMMs may be
     * served directly (until CUMOD_SNAP_STREAM_DEL). */
    CUMOD_SNAP_GEMM = 9,
};

/* CUMOD_SNAP_UNIT's flags. */
enum {
    CUMOD_SNAP_F_DIRECT = 1 << 0,         /* launch directly (no suspects, not
                                             stopping) */
    CUMOD_SNAP_F_POINTER_VALUES = 1 << 1, /* --allow-pointer-values */
};

typedef struct cumod_chan_snap {
    uint32_t op;
    uint32_t session;
    uint64_t a, b, c;
    char name[132];
    uint32_t slot; /* MODULE_SET: its slot of the direct page (0: none) */
} cumod_chan_snap;

/* The unit's direct page: what a launch must see at once, which a message
 * cannot promise (the executor's submission threads read rings while its
 * dispatcher applies the snapshot's messages). The front writes it, in
 * its loop, before it answers anything that followed the change, so the
 * client's next launch finds it changed: the unit's flags
 * (CUMOD_SNAP_F_*), and per published module a slot holding the handle of
 * the generation that may be launched directly (0 when none: a module
 * taken back is refused at the next launch, whatever the messages). */
#define CUMOD_DIRECT_SLOTS 2048
typedef struct cumod_direct_page {
    _Atomic uint32_t flags;
    uint32_t pad;
    _Atomic uint64_t valid[CUMOD_DIRECT_SLOTS];
} cumod_direct_page;

typedef struct cumod_chan_skernel {
    char name[256];
    uint32_t index;
    uint32_t nparams;
    int32_t static_shared;
    uint32_t max_threads;
    uint32_t cluster[3];
    int32_t carveout; /* KernelSettings; -1: none */
    uint32_t typed;   /* pindirect and pvalue say something */
    uint32_t pad;
} cumod_chan_skernel;

/* CUMOD_CHAN_DIRECT_STATS: a ring's figures, then n entries. */
typedef struct cumod_chan_dstats {
    uint32_t session;
    uint32_t n;
    uint64_t requests;   /* records taken (launched or forwarded) */
    uint64_t lat_count;  /* launches answered, and their request-to-answer */
    uint64_t lat_sum_ns; /* times (buckets as data/latency.h's) */
    uint64_t lat_bucket[CUMOD_LAT_BUCKETS];
} cumod_chan_dstats;

typedef struct cumod_chan_dstat {
    uint64_t handle;
    uint32_t kernel;
    uint32_t pad;
    uint64_t ok, failed; /* launches completed, failed on the device */
    uint64_t gpu_ns;     /* their device time */
} cumod_chan_dstat;

/* The answer to a command, on the side that sent it: the reply's header and
 * payload, or, when the executor went away first, a header whose status
 * says why (CUMOD_ECTXLOST, CUMOD_ESHUTDOWN) and a NULL payload. */
typedef void (*cumod_chan_reply_cb)(void *arg, const cumod_chan_hdr *hdr,
                                    const void *payload, size_t len);

/* Creates the socketpair, both ends close-on-exec. 0 or -errno. */
int cumod__chan_pair(int fds[2]);

/* One packet of len bytes at p with descriptor fd (-1: none), not a
 * channel packet (the adoption's request and answer); flags for sendmsg
 * beside MSG_NOSIGNAL. 0 or -errno. */
int cumod__fd_send(int sock, const void *p, size_t len, int fd, int flags);

/* One packet into buf (cap bytes) and up to two descriptors (fds, -1 when
 * none; more are closed), whatever its bytes: its length, 0 at the end,
 * or -errno; *trunc set when it or its descriptors did not fit. An
 * ECONNRESET said before the peer's last packets is read past. */
long cumod__fd_recv(int sock, void *buf, size_t cap, int fds[2], int flags,
                    int *trunc);

/* Sends one packet (header, payload, optionally fd >= 0). Retries on EINTR;
 * on a non-blocking socket that is full returns -EAGAIN. 0 or -errno. */
int cumod__chan_send(int sock, const cumod_chan_hdr *hdr, const void *payload,
                     size_t len, int fd);

/* Sends header and payload however large: in the packet when it fits,
 * else in a sealed memfd passed along (CUMOD_CHAN_F_MEMFD). Sets hdr->len
 * and hdr->flags. Cannot also pass another descriptor. 0 or -errno. */
int cumod__chan_send_any(int sock, cumod_chan_hdr *hdr, const void *payload,
                         size_t len);

/* cumod__chan_send_any with the command's own descriptor cmd_fd (-1:
 * none), passed beside the payload's memfd when the payload does not fit
 * (CUMOD_CHAN_F_FD2). 0 or -errno. */
int cumod__chan_send_any_fd(int sock, cumod_chan_hdr *hdr, const void *payload,
                            size_t len, int cmd_fd);

/* A received payload, wherever it came: in the packet or mapped from the
 * memfd of a CUMOD_CHAN_F_MEMFD packet. */
typedef struct cumod_chan_payload {
    const void *data;
    size_t len;
    void *map; /* the mapping to undo, or NULL */
    size_t map_len;
} cumod_chan_payload;

/* Finds the payload of packet buf (n bytes, as cumod__chan_recv returned,
 * with its descriptor fd). For a memfd payload it maps fd (and takes
 * ownership of fd: closes it); otherwise fd is left alone. 0 or -errno
 * (-EPROTO when the lengths disagree). */
int cumod__chan_payload(const void *buf, size_t n, int fd,
                        cumod_chan_payload *out);

/* Unmaps what cumod__chan_payload mapped. Accepts a zeroed payload. */
void cumod__chan_payload_fini(cumod_chan_payload *p);

/* Receives one packet into buf (at least CUMOD_CHAN_MAX bytes). On success
 * returns the packet's length (>= sizeof(cumod_chan_hdr)) and *fdp holds a
 * received descriptor or -1. 0 means the peer closed; -errno otherwise
 * (-EPROTO for a short or truncated packet). */
long cumod__chan_recv(int sock, void *buf, size_t cap, int *fdp);

/* The same with recvmsg flags (MSG_DONTWAIT: -EAGAIN when nothing is
 * there). A second descriptor (CUMOD_CHAN_F_FD2) is closed. */
long cumod__chan_recv_flags(int sock, void *buf, size_t cap, int *fdp,
                            int flags);

/* The same taking up to two descriptors: fds[0] the first (for a
 * CUMOD_CHAN_F_MEMFD packet, the payload's), fds[1] the second or -1. */
long cumod__chan_recv2(int sock, void *buf, size_t cap, int fds[2], int flags);

#endif
