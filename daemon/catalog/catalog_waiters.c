/* SPDX-License-Identifier: MIT */
/*
 * The waiters of requests that must wait for a module: each hears, once,
 * what the module's settled state means for what it asked (or why it
 * failed). Calls no operation: a leaf that reads, loads and requests call
 * when an operation ends. Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"

/* Calls each waiter of list with the outcome outcome() gives it. The list
 * is taken first: a callback may park again (a launch resolving anew). */
static void
req_tell(cumod_module *m, cumod_list *list,
         void (*outcome)(cumod_module *m, cumod_wait_op op, cumod_status *st),
         const cumod_status *fixed)
{
    for (cumod_list_node *n; (n = cumod__list_pop(list)) != NULL;) {
        cumod_waiter *w = CUMOD_CONTAINER_OF(n, cumod_waiter, link);
        cumod_status st;
        if (outcome != NULL)
            outcome(m, w->op, &st);
        else
            st = *fixed;
        w->cb(w, m, &st);
    }
}

void
cumod__mod_fail_waiters(cumod_module *m, cumod_err code, const char *msg)
{
    cumod_list list;
    cumod_status st;

    cumod__list_init(&list);
    cumod__list_splice(&list, &m->waiters);
    cumod__status_set(&st, code, "%s: %s", m->name, msg);
    req_tell(m, &list, NULL, &st);
}

/* What m's settled state means for a waiter of op. */
static void
req_outcome(cumod_module *m, cumod_wait_op op, cumod_status *st)
{
    const char *err = m->error ? m->error : "unknown reason";

    cumod__status_ok(st);
    switch (op) {
    case CUMOD_WAIT_LAUNCH:
        if (cumod__mod_quarantined(m))
            cumod__mod_quarantine_status(m, st);
        else if (m->current == NULL)
            cumod__status_set(
                st, m->state == CUMOD_MOD_FAILED ? CUMOD_EIMAGE : CUMOD_EBUSY,
                "%s could not be loaded: %s", m->name, err);
        return;
    case CUMOD_WAIT_RELOAD:
        if (m->quarantine_sha[0] != '\0' && m->read_valid &&
            strcmp(m->sha256, m->quarantine_sha) == 0) {
            if (m->current != NULL)
                cumod__status_set(st, CUMOD_EQUARANTINED,
                                  "%s: the file holds the quarantined bytes "
                                  "(%s); generation %llu keeps serving",
                                  m->name,
                                  m->quarantine_reason ? m->quarantine_reason
                                                       : "a fault",
                                  (unsigned long long)m->current->generation);
            else
                cumod__mod_quarantine_status(m, st);
            return;
        }
        if (m->error == NULL)
            return;
        if (m->current != NULL)
            cumod__status_set(
                st, CUMOD_EIMAGE,
                "%s: the file was refused, generation %llu "
                "keeps serving: %s",
                m->name, (unsigned long long)m->current->generation, m->error);
        else
            cumod__status_set(st, CUMOD_EIMAGE, "%s: %s", m->name, m->error);
        return;
    case CUMOD_WAIT_LOAD:
        if (m->current != NULL)
            return;
        if (cumod__mod_quarantined(m)) {
            cumod__mod_quarantine_status(m, st);
            return;
        }
        if (m->state == CUMOD_MOD_REMOVED)
            cumod__status_set(st, CUMOD_ENOENT, "%s: its files are gone",
                              m->name);
        else
            cumod__status_set(
                st, m->state == CUMOD_MOD_FAILED ? CUMOD_EIMAGE : CUMOD_EBUSY,
                "%s: not loaded: %s", m->name, err);
        return;
    }
}

void
cumod__mod_answer_waiters(cumod_module *m)
{
    cumod_list list;

    if (m->op != CUMOD_OP_IDLE)
        return;
    cumod__list_init(&list);
    cumod__list_splice(&list, &m->waiters);
    req_tell(m, &list, req_outcome, NULL);
}
