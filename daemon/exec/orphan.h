/* SPDX-License-Identifier: MIT */
/*
 * An executor whose front is gone (issue 34, piece 2: docs/architecture.md
 * "Restarts and upgrades"). Its channel closed without CUMOD_CHAN_STOP: the
 * front was killed or crashed. With --orphan-grace the executor keeps its
 * context, modules, memory and streams (its submission threads go on
 * serving the rings they read) and listens on an adoption socket,
 * DIR/exec-PID.sock (SOCK_SEQPACKET, mode 0600), for a new front of its
 * own uid to hand it a new channel (channel.h: cumod_adopt_req). Past the
 * grace it removes the socket and exits, so nothing is orphaned for ever.
 */
#ifndef CUMOD_EXEC_ORPHAN_H
#define CUMOD_EXEC_ORPHAN_H

#include <stdint.h>

/* Waits up to grace_s seconds to be adopted at dir/exec-PID.sock. Returns
 * the new channel's descriptor, or -1 when the grace ran out or the socket
 * could not be made (logged either way). Attempts that fail (another uid,
 * a malformed request) are answered, logged with who asked, and waited
 * past. device: told to the adopter; ledger_fd (-1: none): the sessions'
 * ledger, handed to it with the answer; last_seq: the largest command
 * number the old front sent (told to the adopter). */
int cumod__exec_orphan_wait(const char *dir, unsigned grace_s, int device,
                            int ledger_fd, uint64_t last_seq);

#endif
