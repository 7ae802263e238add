/* SPDX-License-Identifier: MIT */
/*
 * The CUMOD_FAKE_* environment, read at cuInit (fakecuda.h lists it). A bad
 * value fails cuInit with CUDA_ERROR_INVALID_VALUE and one line on stderr
 * naming the variable; nothing is half applied.
 */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
config_u64(const char *s, uint64_t *out)
{
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int
fake_parse_sm(const char *s, int *sm)
{
    uint64_t v;
    if (config_u64(s, &v) != 0 || v < 10 || v > 199)
        return -1;
    *sm = (int)v;
    return 0;
}

static int
config_mem(const char *s, size_t *out)
{
    char buf[32];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n + 1);
    uint64_t mul = 1;
    switch (buf[n - 1]) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        break;
    default:
        break;
    }
    if (mul != 1)
        buf[n - 1] = '\0';
    uint64_t v;
    if (config_u64(buf, &v) != 0 || v == 0 || v > SIZE_MAX / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* One item of CUMOD_FAKE_FAULT: launch:N, launch:NAME, poison:NAME, alloc:N,
 * load:N[:CODE]. */
static int
config_fault(fake_state *st, char *item)
{
    char *arg = strchr(item, ':');
    if (arg == NULL || arg[1] == '\0')
        return -1;
    *arg++ = '\0';
    uint64_t n;
    if (strcmp(item, "launch") == 0) {
        if (arg[0] >= '0' && arg[0] <= '9')
            return config_u64(arg, &n) == 0 && n > 0
                       ? fake_fault_add(st, FAKECUDA_FAULT_LAUNCH, n, NULL,
                                        CUDA_SUCCESS)
                       : -1;
        if (strchr(arg, ':') != NULL)
            return -1;
        return fake_fault_add(st, FAKECUDA_FAULT_LAUNCH, 0, arg, CUDA_SUCCESS);
    }
    if (strcmp(item, "refuse") == 0)
        return strchr(arg, ':') == NULL
                   ? fake_fault_add(st, FAKECUDA_FAULT_REFUSE, 0, arg,
                                    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
                   : -1;
    if (strcmp(item, "poison") == 0)
        return strchr(arg, ':') == NULL
                   ? fake_fault_add(st, FAKECUDA_FAULT_POISON, 0, arg,
                                    CUDA_SUCCESS)
                   : -1;
    if (strcmp(item, "alloc") == 0)
        return config_u64(arg, &n) == 0 && n > 0
                   ? fake_fault_add(st, FAKECUDA_FAULT_ALLOC, n, NULL,
                                    CUDA_ERROR_OUT_OF_MEMORY)
                   : -1;
    if (strcmp(item, "load") == 0) {
        CUresult code = CUDA_ERROR_INVALID_IMAGE;
        char *c = strchr(arg, ':');
        if (c != NULL) {
            *c++ = '\0';
            if (fake_errparse(c, &code) != 0 || code == CUDA_SUCCESS)
                return -1;
        }
        return config_u64(arg, &n) == 0 && n > 0
                   ? fake_fault_add(st, FAKECUDA_FAULT_LOAD, n, NULL, code)
                   : -1;
    }
    return -1;
}

static int
config_faults(fake_state *st, const char *list)
{
    char *copy = strdup(list);
    if (copy == NULL)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL && rc == 0;
         item = strtok_r(NULL, ",", &save))
        rc = config_fault(st, item);
    free(copy);
    return rc;
}

static CUresult
config_bad(const char *var, const char *value, const char *want)
{
    fprintf(stderr, "fakecuda: %s: bad value '%s' (want %s)\n", var, value,
            want);
    return CUDA_ERROR_INVALID_VALUE;
}

/* Drops the faults from index `base` on: those the environment added. */
static void
config_drop_faults(fake_state *st, int base)
{
    for (int i = base; i < st->nfaults; i++)
        free(st->faults[i].name);
    st->nfaults = base;
}

CUresult
fake_config_load(fake_state *st)
{
    const char *v;
    int sm = FAKE_DEFAULT_SM, devices = 1, log_fd = -1;
    size_t mem = (size_t)80 << 30;
    char *hold = NULL, *load_hold = NULL, *copy_hold = NULL, *event_hold = NULL;
    int base = st->nfaults;

    if ((v = getenv("CUMOD_FAKE_SM")) != NULL && fake_parse_sm(v, &sm) != 0)
        return config_bad("CUMOD_FAKE_SM", v, "major*10+minor, e.g. 90");
    if ((v = getenv("CUMOD_FAKE_MEM")) != NULL && config_mem(v, &mem) != 0)
        return config_bad("CUMOD_FAKE_MEM", v,
                          "bytes > 0, optionally suffixed k, m or g");
    if ((v = getenv("CUMOD_FAKE_DEVICES")) != NULL) {
        uint64_t n;
        if (config_u64(v, &n) != 0 || n > FAKE_MAX_DEVICES)
            return config_bad("CUMOD_FAKE_DEVICES", v, "a count from 0 to 16");
        devices = (int)n;
    }
    if ((v = getenv("CUMOD_FAKE_FAULT")) != NULL && config_faults(st, v) != 0) {
        config_drop_faults(st, base);
        return config_bad(
            "CUMOD_FAKE_FAULT", v,
            "a comma list of launch:N, launch:NAME, poison:NAME, alloc:N, "
            "load:N[:CODE]");
    }
    if ((v = getenv("CUMOD_FAKE_HOLD")) != NULL && v[0] != '\0' &&
        (hold = strdup(v)) == NULL) {
        config_drop_faults(st, base);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((v = getenv("CUMOD_FAKE_LOAD_HOLD")) != NULL && v[0] != '\0' &&
        (load_hold = strdup(v)) == NULL) {
        free(hold);
        config_drop_faults(st, base);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((v = getenv("CUMOD_FAKE_COPY_HOLD")) != NULL && v[0] != '\0' &&
        (copy_hold = strdup(v)) == NULL) {
        free(hold);
        free(load_hold);
        config_drop_faults(st, base);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((v = getenv("CUMOD_FAKE_EVENT_HOLD")) != NULL && v[0] != '\0' &&
        (event_hold = strdup(v)) == NULL) {
        free(hold);
        free(load_hold);
        free(copy_hold);
        config_drop_faults(st, base);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((v = getenv("CUMOD_FAKE_LOG")) != NULL && v[0] != '\0') {
        log_fd = open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            free(hold);
            free(load_hold);
            free(copy_hold);
            free(event_hold);
            config_drop_faults(st, base);
            return config_bad("CUMOD_FAKE_LOG", v,
                              "a file that can be opened for appending");
        }
    }

    st->sm = st->set_sm > 0 ? st->set_sm : sm;
    st->mem = st->set_mem > 0 ? st->set_mem : mem;
    st->ndevices = st->set_devices >= 0 ? st->set_devices : devices;
    free(st->hold.path); /* a cuInit that failed for want of devices */
    free(st->hold.load_path);
    free(st->hold.copy_path);
    free(st->hold.event_path);
    st->hold.path = hold;
    st->hold.load_path = load_hold;
    st->hold.copy_path = copy_hold;
    st->hold.event_path = event_hold;
    st->log_fd = log_fd;
    return CUDA_SUCCESS;
}
