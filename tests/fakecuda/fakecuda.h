/* SPDX-License-Identifier: MIT */
/*
 * fakecuda: a fake CUDA driver for tests (libfakecuda.so).
 *
 * The library exports cuGetProcAddress, cuGetProcAddress_v2 and every driver
 * entry point cumodd uses (daemon/exec/driver_syms.h), with cuda.h's
 * prototypes and the real driver's error codes, backed by host memory. It
 * parses real nvcc output (cubin, fatbin, PTX) to learn each module's kernels
 * and their parameter layouts; it runs no kernel code. Device pointers are
 * host allocations, so bytes copied in can be read back.
 *
 * A test controls it in one of two ways:
 *   - in-process, through the functions below (link libfakecuda.so);
 *   - in another process (cumodd's executor), through environment variables
 *     read at cuInit and through files:
 *
 *     CUMOD_FAKE_SM       compute capability as major*10+minor: "90" (the
 *                         default, an H100), "80", "86", "100", ...
 *     CUMOD_FAKE_MEM      device memory in bytes (default 80 GiB); a suffix
 *                         k, m or g multiplies by 1024, 1024^2 or 1024^3.
 *                         It is accounting only: every allocation is a real
 *                         host allocation of its size, so allocate small.
 *     CUMOD_FAKE_DEVICES  device count, 0..16 (default 1); 0 makes cuInit
 *                         fail with CUDA_ERROR_NO_DEVICE.
 *     CUMOD_FAKE_LOG      a file the fake appends one line to per event (the
 *                         format is below); each line is one write(2) to an
 *                         O_APPEND descriptor, so another process may read
 *                         the file while the daemon runs.
 *     CUMOD_FAKE_HOLD     a file path, best absolute (a relative one is
 *                         looked up from the process's working directory).
 *                         While the file exists, work is held (see Holding
 *                         below): an empty file (or one with only blank
 *                         lines) holds all work; otherwise each non-blank
 *                         line, trimmed of white space, names a kernel
 *                         function (as cuFuncGetName gives it, mangled for
 *                         C++) whose launches are held, and all else runs.
 *                         Deleting the file releases the work. The fake
 *                         reads the file again whenever it looks for work
 *                         to complete: at every asynchronous call, query
 *                         and synchronize, and every 5 ms while a call
 *                         waits; so its names may change while it exists.
 *                         Replace it whole (write another file, rename it
 *                         over this one): a file caught half written may
 *                         hold all work, or the wrong functions, meanwhile.
 *     CUMOD_FAKE_LOAD_HOLD  a file path: while the file exists, module loads
 *                         (cuModuleLoadData, cuModuleLoadDataEx) and
 *                         cuLinkComplete block, looking for the file every
 *                         5 ms, without holding the fake's lock: the other
 *                         threads' calls (launches, copies, queries,
 *                         synchronizes) go on meanwhile, as they do while a
 *                         real driver JITs. A load logs `load-waiting`
 *                         when it starts to wait and `load-held` when it
 *                         goes on.
 *     CUMOD_FAKE_COPY_HOLD  a file path: while the file exists, copies
 *                         (cuMemcpy*, not memsets) block in the calling
 *                         thread, looking for the file every 1 ms, the
 *                         fake's lock released: an executor whose serving
 *                         thread submits a copy stops taking commands, so
 *                         that its channel fills. Logs `copy-waiting`.
 *     CUMOD_FAKE_EVENT_HOLD  a file path: an event recorded while the file
 *                         exists is not complete (cuEventQuery says
 *                         CUDA_ERROR_NOT_READY, cuEventSynchronize waits)
 *                         until the file is gone, whatever its stream did;
 *                         events recorded before or after are not held. For
 *                         work gated on events (an executor's reclaim
 *                         queues) that must stay gated while the work
 *                         itself is long done. Logs `event-released`.
 *     CUMOD_FAKE_FAULT    a comma list of faults, counted from cuInit:
 *                           launch:N       the Nth launch (1-based) faults;
 *                           launch:NAME    every launch of NAME faults;
 *                           poison:NAME    every launch of any function of
 *                                          a module image that has a
 *                                          function NAME faults (so that a
 *                                          fault follows an image's bytes:
 *                                          build a bad variant with an
 *                                          extra, never launched, NAME);
 *                           alloc:N        the Nth allocation (cuMemAlloc
 *                                          or cuMemAllocAsync) fails with
 *                                          CUDA_ERROR_OUT_OF_MEMORY;
 *                           load:N[:CODE]  the Nth module load (of any
 *                                          image, a cuLinkComplete one
 *                                          too; the cuLink* calls do not
 *                                          count) fails with CODE, a number
 *                                          or a name such as
 *                                          CUDA_ERROR_INVALID_PTX (default:
 *                                          CUDA_ERROR_INVALID_IMAGE);
 *                           refuse:NAME    every cuLaunchKernel of NAME
 *                                          returns CUDA_ERROR_LAUNCH_OUT_
 *                                          OF_RESOURCES (nothing runs),
 *                                          as a kernel whose registers do
 *                                          not fit its block does.
 *
 *     CUMOD_FAKE_FAULT_ONCE  a file path: a counted fault (launch:N,
 *                         alloc:N, load:N) fires only in the process that
 *                         creates this file first (O_EXCL), so that an
 *                         executor restarted after it, which counts from
 *                         cuInit again, does not meet it again. Faults by
 *                         name are not affected.
 *
 *     CUMOD_FAKE_CRASH    a file path: while the file exists, cuInit
 *                         aborts the process (SIGABRT), as a broken driver
 *                         or a bad GPU may kill every process that starts
 *                         on it (cumodd's crash-loop backoff is tested so).
 *
 *     CUMOD_FAKE_INIT_DELAY_MS  cuInit sleeps this long first, as a real
 *                         driver takes a while to come up (cumodd must not
 *                         tell systemd it is ready before).
 *
 *   A bad value in any of them makes cuInit fail with CUDA_ERROR_INVALID_VALUE
 *   and print one line to stderr naming the variable. Values set through the
 *   functions below since the last fakecuda_reset() win over the environment
 *   (holds add up: work is held if either the API or the file holds it).
 *
 * Streams: launches, asynchronous copies and memsets, cuMemFreeAsync and
 * cuStreamWaitEvent queue on their stream and complete in order per stream,
 * independently across streams, each as soon as nothing holds it: not a
 * hold, not an earlier item of its stream, not an event it waits for. An
 * event marks the point its stream had reached at cuEventRecord; a
 * cuStreamWaitEvent makes everything queued on the stream after it wait for
 * the event's point as it was at the call (recording the event again later
 * does not change that wait), whatever stream the point is on. The legacy
 * stream (NULL, CU_STREAM_LEGACY; CU_STREAM_PER_THREAD is treated as it)
 * syncs as the driver's does: its work waits for the blocking streams' work
 * queued before it, and theirs for its. cuStreamQuery and cuStreamSynchronize
 * answer for one stream (the legacy stream: with the blocking streams' work
 * so far), cuEventQuery and cuEventSynchronize for the event's point, and
 * cuCtxSynchronize for every stream of the context. cuStreamDestroy returns
 * at once; its queued work still completes and its events still answer.
 * Synchronous copies and memsets are never held: they run at once, like a
 * copy on a stream with nothing in front of it.
 *
 * Holding: a held launch (one named in the hold file or by
 * fakecuda_hold_functions) does not complete, nor does what follows it on
 * its stream or what waits for it through an event; when all work is held
 * (fakecuda_hold(1), an empty hold file), nothing completes. Held work
 * makes cuStreamQuery and cuEventQuery answer CUDA_ERROR_NOT_READY and
 * cuStreamSynchronize, cuEventSynchronize and cuCtxSynchronize block until
 * it is released; an asynchronous copy moves its bytes when it completes.
 * Allocations are never held (cuMemAllocAsync allocates at the call).
 *
 * Faults: a faulting launch is accepted (cuLaunchKernel returns
 * CUDA_SUCCESS, as the real driver's asynchronous launch does); when it
 * completes, at once or when held work is released, the context is lost:
 * from then on nothing completes, on any stream, and every call fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS, primary-context release and retain and cuInit
 * included, except cuGetErrorName, cuGetErrorString, cuDriverGetVersion,
 * cuGetProcAddress and the functions below. Work still queued then never
 * completes.
 *
 * The stream-ordered allocator: each device has one default pool
 * (cuDeviceGetDefaultMemPool). cuMemAllocAsync allocates at the call, from
 * the stream's device (the legacy stream: the current context's), counted
 * by cuMemGetInfo and fakecuda_allocated_bytes like cuMemAlloc's memory.
 * cuMemFreeAsync queues a free on its stream: the memory goes (and `free`
 * is logged) when the stream reaches it. Either kind of memory may be freed
 * either way, as the driver allows; memory with a free queued may not be
 * freed again (CUDA_ERROR_INVALID_VALUE), and freeing 0 does nothing.
 * cuMemPoolSetAttribute keeps the three reuse flags (ints, default 1) and
 * the release threshold (a cuuint64_t, default 0) for cuMemPoolGetAttribute;
 * the high watermarks may only be reset (to 0, which sets them to the
 * current size); the current sizes are read-only. The pool keeps no memory
 * back, so its reserved sizes equal its used ones.
 *
 * The linker: cuLinkCreate, cuLinkAddData, cuLinkComplete, cuLinkDestroy,
 * for CU_JIT_INPUT_PTX inputs (any other input type answers
 * CUDA_ERROR_NOT_SUPPORTED: a limit of the fake, not of the driver).
 * cuLinkAddData checks the PTX as cuModuleLoadDataEx does (the same codes,
 * and the same lines in the error log given to cuLinkCreate through
 * CU_JIT_ERROR_LOG_BUFFER / _SIZE_BYTES, whose sizes are written back to
 * cuLinkCreate's option values after each call, as cuda.h says); a failed
 * input is not kept. It refuses the options cuda.h says it does not accept
 * (CU_JIT_WALL_TIME, the log buffers, CU_JIT_TARGET, _TARGET_FROM_CUCONTEXT)
 * with CUDA_ERROR_INVALID_VALUE. cuLinkComplete returns an image, owned by
 * the state until cuLinkDestroy, that cuModuleLoadData and
 * cuModuleLoadDataEx accept: it gives the functions and parameter layouts
 * its PTX inputs would, all in one module (the `load` line says kind=ptx).
 * The image is no cubin: a container of the PTX texts that only this fake
 * reads. The fake's own choices where cuda.h says nothing: cuLinkComplete
 * without inputs and cuLinkAddData after cuLinkComplete answer
 * CUDA_ERROR_INVALID_VALUE, two inputs defining one kernel make
 * cuLinkComplete answer CUDA_ERROR_INVALID_IMAGE.
 *
 * The log (CUMOD_FAKE_LOG): one line per event, fields `key=value` separated
 * by single spaces, the event first and the process id last. Pointers and
 * handles are 0x-prefixed hex, sizes decimal, bytes lower-case hex pairs.
 *
 *   init sm=90 devices=1 mem=85899345920 pid=P
 *   load module=0xH result=CUDA_SUCCESS kind=cubin|fatbin-cubin|fatbin-ptx|ptx
 *        sm=90 functions=NAME,NAME pid=P
 *   load result=CUDA_ERROR_INVALID_IMAGE pid=P           (a failed load)
 *   load-waiting call=cuModuleLoadData|cuModuleLoadDataEx|cuLinkComplete
 *        pid=P                       (a load begins to wait for the hold)
 *   load-held call=cuModuleLoadData|cuModuleLoadDataEx|cuLinkComplete ms=N
 *        pid=P                       (a load that waited for the load hold)
 *   link inputs=N size=N pid=P               (a cuLinkComplete that worked)
 *   unload module=0xH pid=P
 *   launch fn=NAME module=0xH grid=X,Y,Z block=X,Y,Z shmem=N stream=0xH
 *          params=HEX pid=P
 *   fault fn=NAME result=CUDA_ERROR_ILLEGAL_ADDRESS pid=P   (when it completes)
 *   call fn=NAME stream=0xH spans=N pid=P   (fakecuda_enqueue: a library's
 *                                            work, e.g. cublasGemmEx)
 *   call-skipped fn=NAME pid=P        (its memory was freed before it ran)
 *   copy-skipped dst=0xH bytes=N pid=P  (a queued copy whose memory was freed)
 *   alloc ptr=0xH bytes=N pid=P
 *   alloc ptr=0xH bytes=N stream=0xH async=1 pid=P          (cuMemAllocAsync)
 *   alloc result=CUDA_ERROR_OUT_OF_MEMORY bytes=N [stream=0xH async=1] pid=P
 *   free-queued ptr=0xH stream=0xH pid=P                    (cuMemFreeAsync)
 *   free ptr=0xH pid=P               (when the memory goes, either way freed)
 *   copy kind=htod|dtoh|dtod dst=0xH src=0xH bytes=N stream=0xH async=0|1
 *        pid=P
 *   memset dst=0xH value=0xNN bytes=N stream=0xH async=0|1 pid=P
 *   register ptr=0xH bytes=N flags=0xN pid=P
 *   hostalloc ptr=0xH bytes=N pid=P     (cuMemHostAlloc: pinned host memory)
 *   hostfree ptr=0xH pid=P
 *   unregister ptr=0xH pid=P
 *   retain device=D refs=N pid=P
 *   release device=D refs=N pid=P
 *
 * (load, load-waiting, load-held, launch and copy are each one line;
 * wrapped here to fit.)
 *
 * What the fake cannot know: a PTX kernel's register count before a real JIT
 * (CU_FUNC_ATTRIBUTE_NUM_REGS says 16), and what a compressed fatbin entry
 * holds (it is skipped as if absent). Everything else cumod_driver_report
 * prints matches driver 580 on an H100 (tests/gpu/driver_report.c).
 *
 * Every function below is thread-safe and never blocks on held work.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define FAKECUDA_API __attribute__((visibility("default")))

/* The driver version cuDriverGetVersion reports; cuGetProcAddress refuses a
 * cudaVersion above it. */
#define FAKECUDA_DRIVER_VERSION 13000

/* Back to a fresh, uninitialised state, as if the library had just been
 * loaded: every module, allocation, stream, event, record, fault and setting
 * is dropped, and the next cuInit reads the environment again. Calls blocked
 * in a synchronize return CUDA_ERROR_DEINITIALIZED. Handles from before the
 * reset are stale (CUDA_ERROR_INVALID_HANDLE / _INVALID_CONTEXT). */
FAKECUDA_API void fakecuda_reset(void);

/* The device's compute capability, major * 10 + minor (10..199). Takes
 * effect at once, also after cuInit. Returns 0, or -1 if out of range. */
FAKECUDA_API int fakecuda_set_sm(int sm);

/* Each device's memory size in bytes (> 0). Returns 0, or -1. */
FAKECUDA_API int fakecuda_set_memory(size_t bytes);

/* The number of devices (0..16), read at cuInit. Returns 0, or -1. */
FAKECUDA_API int fakecuda_set_devices(int count);

/* Holds (on != 0) or releases (on == 0) all work, as an empty
 * CUMOD_FAKE_HOLD file does; work is held while either says so. Releasing
 * completes what can complete. */
FAKECUDA_API void fakecuda_hold(int on);

/* Holds the launches of the functions in a comma list ("vadd,scale"), as
 * the names of a CUMOD_FAKE_HOLD file do (the two add up); NULL or "" holds
 * none. Replaces the previous list. Returns 0, or -1 when out of memory. */
FAKECUDA_API int fakecuda_hold_functions(const char *names);

/* Holds (on != 0) module loads and cuLinkComplete, as a CUMOD_FAKE_LOAD_HOLD
 * file does, or releases them. */
FAKECUDA_API void fakecuda_hold_loads(int on);

typedef enum fakecuda_fault_kind {
    FAKECUDA_FAULT_LAUNCH = 1, /* a launch completes with ILLEGAL_ADDRESS */
    FAKECUDA_FAULT_ALLOC = 2,  /* an allocation returns OUT_OF_MEMORY */
    FAKECUDA_FAULT_LOAD = 3,   /* a module load fails with INVALID_IMAGE */
    FAKECUDA_FAULT_POISON = 4, /* launches from a module with a function */
    FAKECUDA_FAULT_REFUSE = 5, /* cuLaunchKernel of a function refuses */
} fakecuda_fault_kind;

/* Arms a fault for the nth call of its kind (n >= 1) counted from this call:
 * n == 1 is the next one. Returns 0, or -1 on a bad argument or when 32
 * faults are already armed. */
FAKECUDA_API int fakecuda_inject_fault(fakecuda_fault_kind kind, unsigned n);

/* Every launch of the function named `function` faults. Returns 0 or -1. */
FAKECUDA_API int fakecuda_inject_launch_fault(const char *function);

/* The nth module load from now fails with `code` (not CUDA_SUCCESS). */
FAKECUDA_API int fakecuda_inject_load_fault(unsigned n, CUresult code);

/* Disarms every fault not yet fired. A sticky error stays. */
FAKECUDA_API void fakecuda_clear_faults(void);

/* The sticky error (CUDA_ERROR_ILLEGAL_ADDRESS after a fault), or
 * CUDA_SUCCESS. */
FAKECUDA_API CUresult fakecuda_sticky_error(void);

/* One accepted launch. Pointers point into the fake's own record and stay
 * valid until fakecuda_reset(). */
typedef struct fakecuda_launch {
    const char *function; /* the kernel's name */
    CUmodule module;      /* the module it came from */
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_mem;         /* dynamic shared memory, bytes */
    CUstream stream;             /* as passed (NULL: the legacy stream) */
    const unsigned char *params; /* the packed parameter buffer, laid out at
                                    the offsets cuFuncGetParamInfo gives,
                                    padding zeroed */
    size_t params_size;
    int completed; /* 1 once it has completed (or faulted) */
    int faulted;   /* 1 if it completed with ILLEGAL_ADDRESS */
} fakecuda_launch;

/* Launches accepted since the last reset (or cuInit), in order. */
FAKECUDA_API size_t fakecuda_launch_count(void);

/* Copies launch i (0-based) to *out. Returns 0, or -1 if i is out of range
 * (or the record was dropped: only the first 1M launches are kept). */
FAKECUDA_API int fakecuda_launch_get(size_t i, fakecuda_launch *out);

typedef enum fakecuda_copy_kind {
    FAKECUDA_COPY_HTOD = 1,
    FAKECUDA_COPY_DTOH = 2,
    FAKECUDA_COPY_DTOD = 3,
    FAKECUDA_COPY_MEMSET = 4,
} fakecuda_copy_kind;

/* One accepted copy or memset. */
typedef struct fakecuda_copy {
    fakecuda_copy_kind kind;
    uint64_t dst; /* a CUdeviceptr or a host address, by kind */
    uint64_t src; /* likewise; 0 for a memset */
    size_t bytes;
    unsigned char value; /* a memset's byte */
    int async;           /* 1 for the ...Async calls */
    CUstream stream;
    int completed;
} fakecuda_copy;

/* Copies and memsets accepted since the last reset, in order. */
FAKECUDA_API size_t fakecuda_copy_count(void);

/* Copies record i to *out. Returns 0, or -1 if out of range or dropped. */
FAKECUDA_API int fakecuda_copy_get(size_t i, fakecuda_copy *out);

/* Launches, asynchronous copies and memsets and cuMemFreeAsync frees queued
 * and not yet completed: held, or behind held work (0 unless something is
 * held). A cuStreamWaitEvent is no item of its own. */
FAKECUDA_API size_t fakecuda_pending(void);

/* Live allocations (cuMemAlloc and cuMemAllocAsync, not yet freed: a
 * queued cuMemFreeAsync frees when its stream reaches it) and their total
 * bytes. */
FAKECUDA_API size_t fakecuda_allocation_count(void);
FAKECUDA_API size_t fakecuda_allocated_bytes(void);

/* Loaded modules. */
FAKECUDA_API size_t fakecuda_module_count(void);

/* The primary context's retain count on device dev, or -1. */
FAKECUDA_API int fakecuda_primary_refs(int dev);

/* ---- Libraries built on the fake (tests/fakecuda's libfakecublas.so): a
 * library call's device work, queued on a stream as a launch is. */

/* Device memory a library call reads or writes. */
typedef struct fakecuda_span {
    CUdeviceptr ptr;
    size_t bytes;
} fakecuda_span;

/* Queues work named `name` on stream (NULL: the legacy stream), in the
 * stream's order with launches, copies and events: it is held by a hold
 * that names `name` (CUMOD_FAKE_HOLD, fakecuda_hold_functions) or holds
 * all work, and faults when a launch fault names it (launch:NAME,
 * fakecuda_inject_launch_fault) or when a span is not device memory of the
 * stream's device, as a kernel touching it would on a GPU. When it
 * completes, run(arg) is called, with the fake's lock held: it may touch
 * the spans (device pointers are host addresses) and must call nothing of
 * the fake; if a span was freed meanwhile it is skipped instead (logged
 * `call-skipped fn=NAME`). drop(arg), when not NULL, is called once when
 * the item goes, run or not, and when the call fails. Needs a current
 * context on the stream's device. Logs `call fn=NAME stream=0xH spans=N`.
 * Returns CUDA_SUCCESS or what cuLaunchKernel would (no context, a bad
 * stream, the sticky error, CUDA_ERROR_OUT_OF_MEMORY). */
FAKECUDA_API CUresult fakecuda_enqueue(CUstream stream, const char *name,
                                       const fakecuda_span *spans,
                                       size_t nspans, void (*run)(void *arg),
                                       void (*drop)(void *arg), void *arg);

#endif
