/* SPDX-License-Identifier: MIT */
/* What a sessions' ledger says of one session (ledger_peek.h). */
#include "ledger_peek.h"

#include <stdio.h>
#include <string.h>

#include "front/state/session.h"
#include "front/state/sledger.h"

int
lp_peek(int fd, int pid, lp_view *v)
{
    cumod_sessions ss;
    cumod_status st;
    memset(v, 0, sizeof(*v));
    cumod__sessions_init(&ss);
    if (cumod__sledger_replay(fd, &ss, &v->records, v->why, sizeof(v->why),
                              &st) != CUMOD_OK) {
        snprintf(v->why, sizeof(v->why), "%.200s", st.msg);
        cumod__sessions_fini(&ss, NULL);
        return -1;
    }
    size_t cur = 0;
    cumod_session *s;
    while ((s = cumod__sessions_next(&ss, &cur)) != NULL) {
        v->nsessions++;
        if (s->pid != pid || cumod__idmap_count(&s->bufs) == 0)
            continue;
        v->found = 1;
        v->uid = s->uid;
        v->device = s->device;
        snprintf(v->domain, sizeof(v->domain), "%s", s->domain);
        v->nstreams = cumod__idmap_count(&s->streams);
        size_t bc = 0;
        cumod_buf *b;
        while ((b = cumod__idmap_next(&s->bufs, &bc, NULL)) != NULL) {
            if (v->nbufs < sizeof(v->bufs) / sizeof(v->bufs[0]))
                v->bufs[v->nbufs] = (lp_buf){b->handle, b->size, b->dptr};
            v->nbufs++;
        }
    }
    cumod__sessions_fini(&ss, NULL);
    return 0;
}
