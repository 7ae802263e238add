/* SPDX-License-Identifier: MIT */
/*
 * Who may connect: a pure policy over a peer's credentials, checked by the
 * server on nng's thread when a connection arrives, before any request of
 * it is read (server.c), and again at SIGHUP for the connections open.
 *
 * A peer may connect when both lists are empty (anyone who can open the
 * socket: its mode and group are the first gate), when it is root or
 * cumodd's own user (the operator is always answered), when its uid is in
 * allow_uid, or when one of its groups (the primary one from SO_PEERCRED,
 * and the supplementary ones from /proc/PID/status) is in allow_gid.
 */
#ifndef CUMOD_ACCESS_H
#define CUMOD_ACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define CUMOD_ACCESS_SUBJECT_BYTES 8192
#define CUMOD_PEER_MAX_SANS 8

typedef struct cumod_access {
    uint32_t allow_uid[CUMOD_CONFIG_MAX_IDS];
    int nuid;
    uint32_t allow_gid[CUMOD_CONFIG_MAX_IDS];
    int ngid;
    uint32_t max_connections; /* 0: no limit */
    uint32_t self_uid;        /* cumodd's own */
    /* TCP peers: --allow-cert-subject, each name NUL-terminated, one after
     * the other (a copy: nng's threads read it while SIGHUP changes the
     * configuration). */
    char subjects[CUMOD_ACCESS_SUBJECT_BYTES];
    int nsubjects;
} cumod_access;

/* The policy of cfg (its lists and --max-connections). */
void cumod__access_from_config(cumod_access *a, const cumod_config *cfg);

/* A peer: uid and gid as SO_PEERCRED gave them (-1 where the transport
 * has none: a TCP peer) and its pid (-1 likewise). A TCP peer (remote)
 * has its address instead, and over TLS whether its certificate was
 * verified against --tls-ca and the names in it (tls.h). */
typedef struct cumod_peer {
    int uid, gid, pid;
    int remote, tls, verified;
    char addr[64];
    char cn[128];
    char san[CUMOD_PEER_MAX_SANS][128];
    int nsan;
} cumod_peer;

/* 1 when the peer may connect. Reads /proc/PID/status for supplementary
 * groups only when allow_gid is not empty and the primary gid is not in
 * it. A peer without credentials (TCP) may connect only when both lists
 * are empty. Any thread; no lock. */
int cumod__access_allows(const cumod_access *a, const cumod_peer *p);

/* NULL when the peer may connect; else why not, in words (in buf or a
 * constant). A local peer: cumod__access_allows. A TCP peer has no uid: the
 * uid and gid lists admit none (and say so); with --allow-cert-subject
 * only a verified certificate whose CN or a DNS name is listed; without
 * it, anyone who got through the TLS handshake (with --tls-ca, a
 * certificate it vouches for), or anyone at all on plain tcp:// when no
 * uid or gid list is set (cumodd warns of that at start). Any thread. */
const char *cumod__access_refusal(const cumod_access *a, const cumod_peer *p,
                                  char *buf, size_t len);
/* 1 when the peer may send control requests (load, unload, pin, unpin,
 * reload, unquarantine, kernel settings, global writes): root, cumodd's
 * own user, a uid in cfg's control_uid, or a peer with a group in
 * control_gid (primary or supplementary, as above). A peer without
 * credentials (TCP) never may. Any thread; reads /proc only when
 * control_gid is not empty. */
int cumod__access_controls(const cumod_config *cfg, const cumod_peer *p);

/* The supplementary groups of pid, from /proc/PID/status ("Groups:"), at
 * most cap; returns how many, or -1 when they cannot be read. */
int cumod__access_groups(int pid, uint32_t *gids, int cap);

#endif
