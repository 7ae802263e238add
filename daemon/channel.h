/*
 * The channel between the front and the executor: a Unix SOCK_SEQPACKET
 * socketpair. Each message is one packet: a fixed header, then a payload
 * whose layout the op fixes (both ends are the same binary, so the layouts
 * are plain C structs). A file descriptor may ride along (SCM_RIGHTS).
 */
#ifndef CUMOD_CHANNEL_H
#define CUMOD_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

/* The largest packet either side sends; the receive buffer's size. */
#define CUMOD_CHAN_MAX (64 * 1024)

typedef enum cumod_chan_op {
    /* executor -> front, once, after the context is up: cumod_chan_device */
    CUMOD_CHAN_READY = 1,
    /* executor -> front, once, when it cannot start: cumod_chan_error */
    CUMOD_CHAN_FAILED = 2,
    /* front -> executor: no payload; reply: cumod_chan_meminfo */
    CUMOD_CHAN_MEMINFO = 3,
} cumod_chan_op;

typedef struct cumod_chan_hdr {
    uint32_t op;
    int32_t status; /* a cumod error, in replies */
    uint64_t seq;   /* chosen by the requester, echoed in the reply */
} cumod_chan_hdr;

typedef struct cumod_chan_device {
    int32_t ordinal;
    int32_t driver_version;
    uint32_t sm_major;
    uint32_t sm_minor;
    uint32_t multiprocessors;
    uint32_t pad;
    uint64_t total_memory;
    uint64_t free_memory;
    char name[256];
} cumod_chan_device;

typedef struct cumod_chan_error {
    int32_t code; /* a cumod error */
    char message[1020];
} cumod_chan_error;

typedef struct cumod_chan_meminfo {
    uint64_t free_memory;
    uint64_t total_memory;
} cumod_chan_meminfo;

/* Creates the socketpair, both ends close-on-exec. 0 or -errno. */
int cumod__chan_pair(int fds[2]);

/* Sends one packet (header, payload, optionally fd >= 0). Retries on EINTR;
 * on a non-blocking socket that is full returns -EAGAIN. 0 or -errno. */
int cumod__chan_send(int sock, const cumod_chan_hdr *hdr, const void *payload,
                     size_t len, int fd);

/* Receives one packet into buf (at least CUMOD_CHAN_MAX bytes). On success
 * returns the packet's length (>= sizeof(cumod_chan_hdr)) and *fdp holds a
 * received descriptor or -1. 0 means the peer closed; -errno otherwise
 * (-EPROTO for a short or truncated packet). */
long cumod__chan_recv(int sock, void *buf, size_t cap, int *fdp);

#endif
