/* SPDX-License-Identifier: MIT */
/*
 * A client for trust_test, run as another user (the suite forks, drops to
 * that user and execs this). It connects to URL and sends one request:
 * OP is load, unload, pin, unpin, reload, unquarantine (of module ARG),
 * carveout (of kernel ARG, "module:function"), write-global (4 bytes to
 * global ARG, "module:name") or info (the device: not a control request).
 * Its exit status is the call's cumod error (0: done); the detail goes to
 * stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cumod/cumod.h"

static int
cc_module(cumod_client *c, const char *op, const char *name)
{
    static const struct {
        const char *op;
        int (*fn)(cumod_client *, const char *, cumod_module_result *);
    } ops[] = {
        {"load", cumod_module_load},
        {"unload", cumod_module_unload},
        {"pin", cumod_module_pin},
        {"unpin", cumod_module_unpin},
        {"reload", cumod_module_reload},
        {"unquarantine", cumod_module_unquarantine},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (strcmp(op, ops[i].op) != 0)
            continue;
        cumod_module_result r;
        memset(&r, 0, sizeof(r));
        int rv = ops[i].fn(c, name, &r);
        cumod_module_result_fini(&r);
        return rv;
    }
    return -1;
}

int
main(int argc, char **argv)
{
    cumod_client *c;
    int rv;

    if (argc < 3) {
        fprintf(stderr, "usage: control_client URL OP [ARG]\n");
        return 2;
    }
    const char *op = argv[2], *arg = argc > 3 ? argv[3] : "";
    if ((rv = cumod_open(argv[1], 20000, &c)) != CUMOD_OK) {
        fprintf(stderr, "control_client: %s\n", cumod_last_detail());
        return rv;
    }
    if (strcmp(op, "info") == 0) {
        cumod_device_info di;
        rv = cumod_device_info_get(c, &di);
    } else if (strcmp(op, "carveout") == 0) {
        rv = cumod_kernel_set_carveout(c, arg, 50);
    } else if (strcmp(op, "write-global") == 0) {
        char module[130];
        const char *colon = strchr(arg, ':');
        int n = colon ? (int)(colon - arg) : 0;
        float v = 2.0f;
        snprintf(module, sizeof(module), "%.*s", n, arg);
        rv = cumod_global_write(c, module, colon ? colon + 1 : "", 0, &v,
                                sizeof(v), 0);
        if (rv == CUMOD_OK)
            rv = cumod_stream_synchronize(c, 0);
    } else if ((rv = cc_module(c, op, arg)) < 0) {
        fprintf(stderr, "control_client: unknown OP %s\n", op);
        rv = 2;
    }
    if (rv != CUMOD_OK)
        fprintf(stderr, "control_client: %s\n", cumod_last_detail());
    cumod_close(c);
    return rv;
}
