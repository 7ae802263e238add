/* SPDX-License-Identifier: MIT */
#include "front/transport/access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
cumod__access_from_config(cumod_access *a, const cumod_config *cfg)
{
    memset(a, 0, sizeof(*a));
    memcpy(a->allow_uid, cfg->allow_uid,
           (size_t)cfg->nallow_uid * sizeof(uint32_t));
    a->nuid = cfg->nallow_uid;
    memcpy(a->allow_gid, cfg->allow_gid,
           (size_t)cfg->nallow_gid * sizeof(uint32_t));
    a->ngid = cfg->nallow_gid;
    a->max_connections = cfg->max_connections;
    a->self_uid = (uint32_t)geteuid();
    /* The option's checks keep the names within the buffer. */
    size_t at = 0;
    for (int i = 0; i < cfg->nallow_subjects; i++) {
        size_t n = strlen(cfg->allow_subjects[i]) + 1;
        if (at + n > sizeof(a->subjects))
            break;
        memcpy(a->subjects + at, cfg->allow_subjects[i], n);
        at += n;
        a->nsubjects++;
    }
}

static int
access_in(const uint32_t *ids, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

int
cumod__access_groups(int pid, uint32_t *gids, int cap)
{
    char path[64], line[4096];
    FILE *f;
    int n = -1;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if ((f = fopen(path, "re")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Groups:", 7) != 0)
            continue;
        char *p = line + 7, *end;
        n = 0;
        for (;;) {
            unsigned long v = strtoul(p, &end, 10);
            if (end == p || n == cap)
                break;
            gids[n++] = (uint32_t)v;
            p = end;
        }
        break;
    }
    fclose(f);
    return n;
}

int
cumod__access_allows(const cumod_access *a, const cumod_peer *p)
{
    uint32_t groups[256];
    int n;

    if (a->nuid == 0 && a->ngid == 0)
        return 1;
    if (p->uid < 0)
        return 0; /* no credentials to check (TCP) */
    if (p->uid == 0 || (uint32_t)p->uid == a->self_uid)
        return 1;
    if (access_in(a->allow_uid, a->nuid, (uint32_t)p->uid))
        return 1;
    if (a->ngid == 0)
        return 0;
    if (p->gid >= 0 && access_in(a->allow_gid, a->ngid, (uint32_t)p->gid))
        return 1;
    /* The pid is the one that connected; a pid reused since could only
     * answer for a process of another user in the moments after the
     * connection, and its groups are read here, at once. */
    n = cumod__access_groups(p->pid, groups, 256);
    for (int i = 0; i < n; i++)
        if (access_in(a->allow_gid, a->ngid, groups[i]))
            return 1;
    return 0;
}

static int
access_subject_listed(const cumod_access *a, const char *name)
{
    const char *s = a->subjects;
    for (int i = 0; i < a->nsubjects; i++, s += strlen(s) + 1)
        if (name[0] != '\0' && strcmp(s, name) == 0)
            return 1;
    return 0;
}

const char *
cumod__access_refusal(const cumod_access *a, const cumod_peer *p, char *buf,
                      size_t len)
{
    if (!p->remote)
        return cumod__access_allows(a, p)
                   ? NULL
                   : "not allowed by --allow-uid / --allow-gid";
    if (a->nsubjects > 0) {
        if (!p->tls || !p->verified)
            return "no verified client certificate, which "
                   "--allow-cert-subject needs (tls+tcp:// with --tls-ca)";
        if (access_subject_listed(a, p->cn))
            return NULL;
        for (int i = 0; i < p->nsan; i++)
            if (access_subject_listed(a, p->san[i]))
                return NULL;
        snprintf(buf, len,
                 "its certificate (CN '%s'%s%s) names no one in "
                 "--allow-cert-subject",
                 p->cn, p->nsan > 0 ? ", DNS " : "",
                 p->nsan > 0 ? p->san[0] : "");
        return buf;
    }
    if (p->tls && p->verified)
        return NULL; /* --tls-ca vouched for it */
    if (a->nuid > 0 || a->ngid > 0)
        return "remote peers have no uid: --allow-uid / --allow-gid admit "
               "local (ipc://) clients only; give remote ones "
               "certificates (tls+tcp://, --tls-ca, --allow-cert-subject)";
    return NULL;
}
int
cumod__access_controls(const cumod_config *cfg, const cumod_peer *p)
{
    uint32_t groups[256];
    int n;

    if (p->uid < 0)
        return 0; /* no credentials to check (TCP) */
    if (p->uid == 0 || (uint32_t)p->uid == (uint32_t)geteuid())
        return 1;
    if (access_in(cfg->control_uid, cfg->ncontrol_uid, (uint32_t)p->uid))
        return 1;
    if (cfg->ncontrol_gid == 0)
        return 0;
    if (p->gid >= 0 &&
        access_in(cfg->control_gid, cfg->ncontrol_gid, (uint32_t)p->gid))
        return 1;
    n = cumod__access_groups(p->pid, groups, 256);
    for (int i = 0; i < n; i++)
        if (access_in(cfg->control_gid, cfg->ncontrol_gid, groups[i]))
            return 1;
    return 0;
}
