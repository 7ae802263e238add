/* SPDX-License-Identifier: MIT */
/*
 * An intrusive doubly linked list (the shape of nng's nni_list and the
 * kernel's list_head): a node lives inside the object it links, so putting
 * an object on a list allocates nothing and taking it off is O(1) from the
 * object alone. A node that is on no list points at itself, so "is it on a
 * list?" is a question the node can answer.
 *
 * Not thread-safe: a list belongs to one thread, or to whoever holds the
 * lock that guards it.
 */
#ifndef CUMOD_LIST_H
#define CUMOD_LIST_H

#include <stddef.h>

typedef struct cumod_list_node {
    struct cumod_list_node *next, *prev;
} cumod_list_node;

/* A list is its sentinel node. */
typedef struct cumod_list {
    cumod_list_node head;
} cumod_list;

/* The object that embeds node p as its member `member`. */
#define CUMOD_CONTAINER_OF(p, type, member)                                    \
    ((type *)(void *)((char *)(p)-offsetof(type, member)))

static inline void
cumod__list_init(cumod_list *l)
{
    l->head.next = l->head.prev = &l->head;
}

/* A node on no list. Nodes must be initialized before first use. */
static inline void
cumod__list_node_init(cumod_list_node *n)
{
    n->next = n->prev = n;
}

static inline int
cumod__list_node_active(const cumod_list_node *n)
{
    return n->next != n;
}

static inline int
cumod__list_empty(const cumod_list *l)
{
    return l->head.next == &l->head;
}

static inline void
cumod__list_insert_before(cumod_list_node *at, cumod_list_node *n)
{
    n->next = at;
    n->prev = at->prev;
    at->prev->next = n;
    at->prev = n;
}

/* Appends n (on no list) at the tail of l. */
static inline void
cumod__list_append(cumod_list *l, cumod_list_node *n)
{
    cumod__list_insert_before(&l->head, n);
}

/* Puts n (on no list) at the head of l. */
static inline void
cumod__list_prepend(cumod_list *l, cumod_list_node *n)
{
    cumod__list_insert_before(l->head.next, n);
}

/* Takes n off its list; a node on no list is left alone. */
static inline void
cumod__list_remove(cumod_list_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    cumod__list_node_init(n);
}

/* The first node, or NULL when l is empty. */
static inline cumod_list_node *
cumod__list_first(const cumod_list *l)
{
    return l->head.next == &l->head ? NULL : l->head.next;
}

/* The node after n on l, or NULL at the end. */
static inline cumod_list_node *
cumod__list_next(const cumod_list *l, const cumod_list_node *n)
{
    return n->next == &l->head ? NULL : n->next;
}

/* Takes the first node off l and returns it; NULL when l is empty. */
static inline cumod_list_node *
cumod__list_pop(cumod_list *l)
{
    cumod_list_node *n = cumod__list_first(l);
    if (n != NULL)
        cumod__list_remove(n);
    return n;
}

/* Moves every node of from to the tail of to, in order; from is empty
 * after. */
static inline void
cumod__list_splice(cumod_list *to, cumod_list *from)
{
    if (cumod__list_empty(from))
        return;
    cumod_list_node *first = from->head.next, *last = from->head.prev;
    first->prev = to->head.prev;
    to->head.prev->next = first;
    last->next = &to->head;
    to->head.prev = last;
    cumod__list_init(from);
}

/* Iterates over l, node by node; the body may not remove the node (use
 * CUMOD_LIST_FOREACH_SAFE for that). */
#define CUMOD_LIST_FOREACH(l, n)                                               \
    for (cumod_list_node *n = (l)->head.next; n != &(l)->head; n = n->next)

/* Iterates over l; the body may remove (and free) the current node. */
#define CUMOD_LIST_FOREACH_SAFE(l, n)                                          \
    for (cumod_list_node *n = (l)->head.next, *n##_next = n->next;             \
         n != &(l)->head; n = n##_next, n##_next = n->next)

#endif
