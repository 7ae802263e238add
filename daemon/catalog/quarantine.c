/* SPDX-License-Identifier: MIT */
/*
 * Quarantine, the state of a module's record: bytes that faulted or hung
 * (quarantine_after times, or killed the executor loading) are not loaded
 * again until their file changes or unquarantine is asked; a kept good
 * image of other bytes serves instead. A leaf: it reports the change
 * (ops.event) and starts nothing. Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

int
cumod__mod_quarantined(const cumod_module *m)
{
    if (m->quarantine_sha[0] == '\0')
        return 0;
    if (m->current != NULL)
        return strcmp(m->current->sha256, m->quarantine_sha) == 0;
    /* Not resident: a good generation of other bytes can serve. */
    return !(m->good_image.fd >= 0 &&
             strcmp(m->good_image.sha256, m->quarantine_sha) != 0);
}

void
cumod__mod_quarantine(cumod_module *m, const char *sha, const char *reason)
{
    char when[32];
    uint64_t now = cumod__wall_ms();

    cumod__utc(now, when, sizeof(when));
    snprintf(m->quarantine_sha, sizeof(m->quarantine_sha), "%s", sha);
    free(m->quarantine_reason);
    if (asprintf(&m->quarantine_reason, "%s, at %s", reason, when) < 0)
        m->quarantine_reason = NULL;
    m->quarantine_unix_ms = now;
    m->rollback = m->good_image.fd >= 0 &&
                  strcmp(m->good_image.sha256, m->quarantine_sha) != 0;
    if (m->rollback)
        CUMOD_LOGE("CUMOD-QUARANTINE",
                   "%s: bytes sha256 %s quarantined (%s); the last good "
                   "bytes (sha256 %.12s) serve instead; `cumodctl "
                   "unquarantine %s` lifts it",
                   m->name, sha, reason, m->good_image.sha256, m->name);
    else
        CUMOD_LOGE("CUMOD-QUARANTINE",
                   "%s: bytes sha256 %s quarantined (%s); its launches fail "
                   "until the file changes or `cumodctl unquarantine %s`",
                   m->name, sha, reason, m->name);
    cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_QUARANTINED,
                     m->current ? m->current->generation : 0, 0, sha, NULL,
                     reason);
}

void
cumod__mod_unquarantine(cumod_module *m)
{
    if (m->quarantine_sha[0] != '\0')
        cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_UNQUARANTINED,
                         m->current ? m->current->generation : 0, 0,
                         m->quarantine_sha, NULL, NULL);
    m->quarantine_sha[0] = '\0';
    free(m->quarantine_reason);
    m->quarantine_reason = NULL;
    m->quarantine_unix_ms = 0;
    m->faults = 0;
    m->load_deaths = 0;
    m->rollback = 0;
}

void
cumod__mod_quarantine_status(const cumod_module *m, cumod_status *st)
{
    cumod__status_set(st, CUMOD_EQUARANTINED,
                      "module %s is quarantined: %s; `cumodctl unquarantine "
                      "%s` lifts it, and a new file starts clean",
                      m->name,
                      m->quarantine_reason ? m->quarantine_reason
                                           : "a fault or a hang",
                      m->name);
}
