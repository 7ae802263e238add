/* SPDX-License-Identifier: MIT */
/*
 * What the request harness (fuzz_request.c) and its seed generator
 * (fuzz_seeds.c) agree on.
 *
 * An input is one message, or several: FUZZ_REQUEST_SEP between messages
 * splits it, and the pieces are sent in order on one fresh connection (a
 * session of its own, whose handles start at 1), so that a sequence such as
 * alloc, write, launch, read reaches the handlers with state behind it.
 * An input without the separator is sent whole, as one message.
 *
 * FUZZ_REQUEST_SEGMENT is a POSIX shared-memory segment the harness makes
 * (FUZZ_REQUEST_SEGMENT_SIZE bytes) so that MapSegment and Copy requests
 * can succeed; the harness removes it at exit.
 */
#ifndef CUMOD_FUZZ_REQUEST_H
#define CUMOD_FUZZ_REQUEST_H

#define FUZZ_REQUEST_SEP "\n@cumod-next@\n"
#define FUZZ_REQUEST_SEP_LEN (sizeof(FUZZ_REQUEST_SEP) - 1)

/* An input holds at most this many messages; the rest is ignored. */
#define FUZZ_REQUEST_MAX_MSGS 64

#define FUZZ_REQUEST_SEGMENT "/cumod-fuzz"
#define FUZZ_REQUEST_SEGMENT_SIZE ((size_t)1 << 20)

#endif
