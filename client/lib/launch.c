/* SPDX-License-Identifier: MIT */
/* Kernel arguments and launches of libcumod. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* The host's bytes of a value: the kernel reads its parameters in the
 * device's byte order, which is little-endian like every host cumod runs
 * on (x86-64, aarch64). */
/* The public types are the wire's, number for number. */
_Static_assert((int)CUMOD_TYPE_I32 == (int)CUMOD__ARG_TYPE__ARG_TYPE_I32 &&
                   (int)CUMOD_TYPE_U32 == (int)CUMOD__ARG_TYPE__ARG_TYPE_U32 &&
                   (int)CUMOD_TYPE_I64 == (int)CUMOD__ARG_TYPE__ARG_TYPE_I64 &&
                   (int)CUMOD_TYPE_U64 == (int)CUMOD__ARG_TYPE__ARG_TYPE_U64 &&
                   (int)CUMOD_TYPE_F32 == (int)CUMOD__ARG_TYPE__ARG_TYPE_F32 &&
                   (int)CUMOD_TYPE_F64 == (int)CUMOD__ARG_TYPE__ARG_TYPE_F64 &&
                   (int)CUMOD_TYPE_I16 == (int)CUMOD__ARG_TYPE__ARG_TYPE_I16 &&
                   (int)CUMOD_TYPE_U16 == (int)CUMOD__ARG_TYPE__ARG_TYPE_U16 &&
                   (int)CUMOD_TYPE_I8 == (int)CUMOD__ARG_TYPE__ARG_TYPE_I8 &&
                   (int)CUMOD_TYPE_U8 == (int)CUMOD__ARG_TYPE__ARG_TYPE_U8,
               "cumod_arg_type numbers are ArgType's");

static cumod_arg
launch_value(const void *v, size_t len, cumod_arg_type type)
{
    cumod_arg a;

    memset(&a, 0, sizeof(a));
    a.kind = CUMOD_ARG_VALUE;
    a.type = type;
    a.len = len;
    memcpy(a.v.bytes, v, len);
    return a;
}

cumod_arg
cumod_arg_buffer(cumod_buffer buf, size_t offset)
{
    cumod_arg a;

    memset(&a, 0, sizeof(a));
    a.kind = CUMOD_ARG_BUFFER;
    a.len = sizeof(uint64_t); /* what the kernel gets: a device pointer */
    a.v.buffer.handle = buf;
    a.v.buffer.offset = offset;
    return a;
}

cumod_arg
cumod_arg_i32(int32_t v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_I32);
}

cumod_arg
cumod_arg_u32(uint32_t v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_U32);
}

cumod_arg
cumod_arg_i64(int64_t v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_I64);
}

cumod_arg
cumod_arg_u64(uint64_t v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_U64);
}

cumod_arg
cumod_arg_f32(float v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_F32);
}

cumod_arg
cumod_arg_f64(double v)
{
    return launch_value(&v, sizeof(v), CUMOD_TYPE_F64);
}

cumod_arg
cumod_arg_bytes(const void *data, size_t len)
{
    cumod_arg a;

    memset(&a, 0, sizeof(a));
    a.kind = CUMOD_ARG_RAW;
    a.len = len;
    a.v.raw = data;
    return a;
}

int
cumod__launch_check(const char *fn, const cumod_launch_params *p)
{
    if (p == NULL)
        return cumod__client_set_error(
            CUMOD_EINVAL, "%s: the launch parameters are NULL", fn);
    if (p->kernel == NULL || p->kernel[0] == '\0')
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: no kernel named (\"module:"
                                       "function\", e.g. \"vadd:vadd\")",
                                       fn);
    const char *colon = strchr(p->kernel, ':');
    if (colon == NULL || colon == p->kernel || colon[1] == '\0')
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: kernel '%.200s' is not "
                                       "\"module:function\"",
                                       fn, p->kernel);
    if (p->nargs > CUMOD_MAX_ARGS)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: %zu arguments, more than %d", fn,
                                       p->nargs, CUMOD_MAX_ARGS);
    if (p->nargs > 0 && p->args == NULL)
        return cumod__client_set_error(
            CUMOD_EINVAL, "%s: nargs is %zu but args is NULL", fn, p->nargs);
    for (size_t i = 0; i < p->nargs; i++) {
        const cumod_arg *a = &p->args[i];
        if ((a->kind == CUMOD_ARG_VALUE || a->kind == CUMOD_ARG_RAW) &&
            a->type > CUMOD_TYPE_U8)
            return cumod__client_set_error(
                CUMOD_EINVAL,
                "%s: argument %zu: unknown type %u (a cumod_arg made by "
                "hand must zero it: CUMOD_TYPE_NONE)",
                fn, i + 1, (unsigned)a->type);
        switch (a->kind) {
        case CUMOD_ARG_BUFFER:
            break;
        case CUMOD_ARG_VALUE:
            if (a->len == 0 || a->len > sizeof(a->v.bytes))
                return cumod__client_set_error(
                    CUMOD_EINVAL,
                    "%s: argument %zu: a value of %zu bytes (1 to %zu; "
                    "cumod_arg_bytes takes more)",
                    fn, i + 1, a->len, sizeof(a->v.bytes));
            break;
        case CUMOD_ARG_RAW:
            if (a->len == 0 || a->len > CUMOD_MAX_ARG_BYTES)
                return cumod__client_set_error(
                    CUMOD_EINVAL, "%s: argument %zu: %zu bytes (1 to %d)", fn,
                    i + 1, a->len, CUMOD_MAX_ARG_BYTES);
            if (a->v.raw == NULL)
                return cumod__client_set_error(
                    CUMOD_EINVAL, "%s: argument %zu: its bytes are NULL", fn,
                    i + 1);
            break;
        default:
            return cumod__client_set_error(CUMOD_EINVAL,
                                           "%s: argument %zu: unknown kind %d",
                                           fn, i + 1, (int)a->kind);
        }
    }
    return CUMOD_OK;
}

static void
launch_dim3(Cumod__Dim3 *m, cumod_dim3 d)
{
    cumod__dim3__init(m);
    m->x = d.x;
    m->y = d.y;
    m->z = d.z;
}

void
cumod__launch_fill(cumod__launch_msg *m, const cumod_launch_params *p)
{
    cumod__launch__init(&m->launch);
    m->launch.kernel = (char *)p->kernel; /* only read: packed, never freed */
    m->launch.generation = p->generation;
    launch_dim3(&m->grid, p->grid);
    launch_dim3(&m->block, p->block);
    m->launch.grid = &m->grid;
    m->launch.block = &m->block;
    m->launch.shared_mem = p->shared_mem;
    m->launch.deadline_ms = p->deadline_ms;
    m->launch.stream = p->stream;
    m->launch.n_args = p->nargs;
    m->launch.args = p->nargs > 0 ? m->argv : NULL;
    for (size_t i = 0; i < p->nargs; i++) {
        const cumod_arg *a = &p->args[i];
        Cumod__Arg *o = &m->args[i];
        cumod__arg__init(o);
        m->argv[i] = o;
        if (a->kind == CUMOD_ARG_BUFFER) {
            cumod__buffer_ref__init(&m->refs[i]);
            m->refs[i].handle = a->v.buffer.handle;
            m->refs[i].offset = a->v.buffer.offset;
            o->kind_case = CUMOD__ARG__KIND_BUFFER;
            o->buffer = &m->refs[i];
        } else {
            o->kind_case = CUMOD__ARG__KIND_VALUE;
            o->type = (Cumod__ArgType)a->type;
            o->value.len = a->len;
            o->value.data = (uint8_t *)(a->kind == CUMOD_ARG_RAW
                                            ? a->v.raw
                                            : (const void *)a->v.bytes);
        }
    }
}

int
cumod__launch_attrs(cumod__launch_msg *m, const cumod_launch_attrs *a,
                    const char *fn)
{
    if (a == NULL)
        return CUMOD_OK;
    if (a->carveout > 100 || a->carveout < -1)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: carveout %d is not a percentage "
                                       "(0-100, or -1 for none)",
                                       fn, a->carveout);
    if (a->cluster.x || a->cluster.y || a->cluster.z) {
        launch_dim3(&m->cluster, a->cluster);
        m->launch.cluster = &m->cluster;
    }
    m->launch.cooperative = a->cooperative != 0;
    if (a->carveout >= 0) {
        cumod__carveout__init(&m->carveout);
        m->carveout.percent = (uint32_t)a->carveout;
        m->launch.carveout = &m->carveout;
    }
    return CUMOD_OK;
}

/* Launches of up to this many arguments build their message on the stack;
 * more take one allocation. */
#define LAUNCH_STACK_ARGS 64

int
cumod_launch_post(cumod_client *c, const cumod_launch_params *p,
                  const cumod_launch_attrs *attrs, cumod_ticket *ticket)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Arg args[LAUNCH_STACK_ARGS];
    Cumod__Arg *argv[LAUNCH_STACK_ARGS];
    Cumod__BufferRef refs[LAUNCH_STACK_ARGS];
    cumod__launch_msg m = {.args = args, .argv = argv, .refs = refs};
    int rv;

    if (c == NULL || ticket == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_launch_post: the %s is NULL",
                                       c == NULL ? "client" : "ticket");
    if ((rv = cumod__launch_check("cumod_launch_post", p)) != CUMOD_OK)
        return rv;
    if (p->nargs > LAUNCH_STACK_ARGS) /* rare: the answered way */
        return cumod_launch_v2(c, p, attrs, ticket, NULL);
    cumod__launch_fill(&m, p);
    if ((rv = cumod__launch_attrs(&m, attrs, "cumod_launch_post")) != CUMOD_OK)
        return rv;
    m.launch.when = CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED;
    req.body_case = CUMOD__REQUEST__BODY_LAUNCH;
    req.launch = &m.launch;
    return cumod__client_post(c, &req, "cumod_launch_post", ticket);
}

int
cumod_launch(cumod_client *c, const cumod_launch_params *p,
             cumod_ticket *ticket, uint64_t *generation)
{
    return cumod_launch_v2(c, p, NULL, ticket, generation);
}

int
cumod_launch_v2(cumod_client *c, const cumod_launch_params *p,
                const cumod_launch_attrs *attrs, cumod_ticket *ticket,
                uint64_t *generation)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Arg args[LAUNCH_STACK_ARGS];
    Cumod__Arg *argv[LAUNCH_STACK_ARGS];
    Cumod__BufferRef refs[LAUNCH_STACK_ARGS];
    cumod__launch_msg m = {.args = args, .argv = argv, .refs = refs};
    void *heap = NULL;
    int rv;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_launch: the client is NULL");
    if ((rv = cumod__launch_check("cumod_launch", p)) != CUMOD_OK)
        return rv;
    if (p->nargs > LAUNCH_STACK_ARGS) {
        size_t n = p->nargs;
        if ((heap = malloc(n * (sizeof(Cumod__Arg) + sizeof(Cumod__Arg *) +
                                sizeof(Cumod__BufferRef)))) == NULL)
            return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
        m.args = heap;
        m.refs = (Cumod__BufferRef *)(m.args + n);
        m.argv = (Cumod__Arg **)(m.refs + n);
    }
    cumod__launch_fill(&m, p);
    if ((rv = cumod__launch_attrs(&m, attrs, "cumod_launch")) != CUMOD_OK) {
        free(heap);
        return rv;
    }
    m.launch.when = CUMOD__WHEN(ticket);
    req.body_case = CUMOD__REQUEST__BODY_LAUNCH;
    req.launch = &m.launch;
    rv = cumod__client_done(c, &req, "cumod_launch", ticket, generation);
    free(heap);
    return rv;
}
