/* SPDX-License-Identifier: MIT */
/*
 * The ledger (docs/architecture.md, "Restarts and upgrades"): an
 * append-only log of records in a memfd, which the front writes as
 * sessions change and which outlives the front in the descriptors its
 * executors hold, so that a front started after it reads back what the
 * sessions held. Piece 1 of issue 34; the front's sessions' ledger
 * (front/state/sledger.h) is written with it.
 *
 * A ledger is a header (magic, version) and records, each a header (its
 * magic, type, length, sequence number, a CRC-32C of all of it) and its
 * payload, padded to 8. Records are numbered from 1 without gaps. A
 * reader takes the longest good prefix: a record cut short (the writer
 * killed in the middle of one), a checksum that does not match, a number
 * out of sequence or a length past the file end the replay there, and say
 * why; nothing past it is trusted. The writer writes the payload, then
 * the record's header, then the length in use, so that a reader never
 * sees a whole header over a half payload without the checksum telling.
 *
 * One writer at a time (the front's loop); a reader replays a descriptor
 * nobody writes any more (a new front, before it writes). Memory only:
 * a ledger does not survive a reboot, which ends every context anyway.
 */
#ifndef CUMOD_LEDGER_H
#define CUMOD_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* The largest payload of one record, and of a whole ledger. */
#define CUMOD_LEDGER_REC_MAX ((uint32_t)1 << 20)
#define CUMOD_LEDGER_MAX ((size_t)1 << 30)

typedef struct cumod_ledger {
    int fd;          /* the memfd */
    uint8_t *map;    /* its mapping, cap bytes */
    size_t cap, len; /* mapped, and in use (header and good records) */
    uint64_t next;   /* the next record's number */
    uint64_t records;
} cumod_ledger;

/* A new, empty ledger in a memfd named name ("cumodd-ledger"), of cap
 * bytes to start with (it grows). CUMOD_OK, or why not in st. */
cumod_err cumod__ledger_create(cumod_ledger *l, const char *name, size_t cap,
                               cumod_status *st);

/* Appends a record of type (not 0) and len bytes at p: CUMOD_OK, or
 * CUMOD_ETOOBIG past the limits, CUMOD_ENOMEM when it cannot grow; the
 * ledger is as it was then. */
cumod_err cumod__ledger_append(cumod_ledger *l, uint16_t type, const void *p,
                               uint32_t len, cumod_status *st);

/* One record, as replay hands it (p valid during the call); a non-zero
 * return stops the replay with that value. */
typedef int (*cumod_ledger_fn)(void *arg, uint64_t seq, uint16_t type,
                               const void *p, uint32_t len);

/* Replays the records of the ledger in fd, in order, into fn (may be
 * NULL: only counted): the number of good records in *n, the bytes of the
 * good prefix in *good, and in why ("" when every byte was used) what
 * ended it early. CUMOD_OK even when a bad record ended it (the prefix is
 * the answer); CUMOD_EPROTO when fd holds no ledger at all (its header),
 * CUMOD_EIO when it cannot be read; fn's non-zero value as
 * CUMOD_EINTERNAL. */
cumod_err cumod__ledger_replay(int fd, cumod_ledger_fn fn, void *arg,
                               uint64_t *n, size_t *good, char *why,
                               size_t whylen, cumod_status *st);

/* Takes over the ledger in fd (a dup is kept) to write after its good
 * prefix: what follows it is cut off. CUMOD_OK, or why not. */
cumod_err cumod__ledger_adopt(cumod_ledger *l, int fd, cumod_status *st);

/* Closes the ledger (the memfd lives on in other descriptors of it). */
void cumod__ledger_close(cumod_ledger *l);

/* CRC-32C (Castagnoli) of len bytes, continuing crc (0 to start). */
uint32_t cumod__crc32c(uint32_t crc, const void *p, size_t len);

#endif
