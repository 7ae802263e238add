/* SPDX-License-Identifier: MIT */
/*
 * The option table rendered for people: --help (wrapped text) and --man
 * (cumodd(8) in troff), both made from the same table.
 */
#include <stdio.h>

#include "config_internal.h"
#include "cumod/version.h"

void
cumod__cfg_usage(FILE *f)
{
    fprintf(f,
            "Usage: cumodd --kernels DIR [options]\n"
            "       cumodd --config FILE [options]\n"
            "       cumodd --instance NAME [options]\n"
            "Keeps the CUDA kernels of DIR loaded on the GPUs of --device and "
            "runs\nlaunch requests from clients (libcumod, cumodctl) over "
            "nng.\n"
            "\n"
            "Every option (but --config, --instance, --check, --help and\n"
            "--version) is also a key of the configuration file, an INI file\n"
            "of \"key = value\" lines (optionally under [cumodd]); flags win\n"
            "over the file. SIGHUP rescans the kernel folder and rereads the\n"
            "file. BYTES take K, M, G or T (KiB...). Lists are "
            "comma-separated.\n"
            "Settings of one module go under [module NAME] in the file "
            "(jit-opt-level,\n"
            "jit-max-registers, jit-line-info, jit-fast-compile, "
            "nvrtc-option), or in\n"
            "NAME.ptx.opts and NAME.cu.opts beside its image.\n"
            "Settings of one domain go under [domain NAME] (uids, gids, "
            "listen, start,\ndevice, memory-max).\n\n");
    for (size_t i = 0; i < cumod__cfg_nopts; i++) {
        const cfg_opt *o = &cumod__cfg_opts[i];
        char head[64];
        if (o->flags & CFG_HIDDEN)
            continue;
        snprintf(head, sizeof(head), "%c%c%c --%s%s%s", o->letter ? '-' : ' ',
                 o->letter ? o->letter : ' ', o->letter ? ',' : ' ', o->name,
                 o->arg ? " " : "", o->arg ? o->arg : "");
        /* The help text, wrapped at 76 columns under a 29-column head. */
        const char *h = o->help;
        int col = fprintf(f, "  %s", head);
        if (col > 28) {
            fputc('\n', f);
            col = 0;
        }
        while (*h) {
            fprintf(f, "%*s", 29 - col, "");
            col = 29;
            const char *end = h;
            const char *brk = NULL;
            while (*end && col + (end - h) < 78) {
                if (*end == ' ')
                    brk = end;
                end++;
            }
            if (*end && brk != NULL)
                end = brk;
            fprintf(f, "%.*s\n", (int)(end - h), h);
            h = *end == ' ' ? end + 1 : end;
            col = 0;
        }
    }
    fprintf(f, "\nExit status: 0 after SIGTERM or SIGINT (or a --check that "
               "passed), 64 for a\nwrong flag, 78 for a wrong configuration "
               "file or a missing kernel folder,\n69 when the driver, the "
               "device or the listen address is unusable.\n");
}

/* s in troff: backslashes doubled, hyphens as \-, a leading dot or quote
 * escaped. */
static void
cfg_troff(FILE *f, const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

/* cumodd(8)'s head: its name, synopsis and description. */
static void
cfg_man_head(FILE *f)
{
    fprintf(f, ".TH CUMODD 8 \"\" \"cumod %s\" \"System Administration\"\n",
            CUMOD_VERSION_STRING);
    fputs(".SH NAME\n"
          "cumodd \\- keep CUDA kernels loaded and run clients' launches\n"
          ".SH SYNOPSIS\n"
          ".B cumodd\n"
          "\\fB\\-\\-kernels\\fR \\fIDIR\\fR [\\fIoptions\\fR]\n"
          ".br\n"
          ".B cumodd\n"
          "\\fB\\-\\-config\\fR \\fIFILE\\fR [\\fIoptions\\fR]\n"
          ".br\n"
          ".B cumodd\n"
          "\\fB\\-\\-instance\\fR \\fINAME\\fR [\\fIoptions\\fR]\n"
          ".SH DESCRIPTION\n"
          "\\fBcumodd\\fR holds one CUDA Driver API context on one GPU, "
          "watches a kernel folder with inotify, and loads and unloads the "
          "modules of its \\fB.cubin\\fR, \\fB.fatbin\\fR, "
          "\\fB.ptx\\fR and \\fB.cu\\fR files (CUDA C++ sources, "
          "compiled by NVRTC) as they appear, change and go. Client "
          "processes (libcumod, \\fBcumodctl\\fR(1)) submit launches, "
          "copies and waits over nng, without a CUDA context of their own. "
          "A new file in the folder changes what the next launch runs; "
          "launches in flight finish on the old code; a broken file never "
          "replaces a working one. A kernel that faults or hangs costs its "
          "own work: the daemon restarts its executor process and "
          "quarantines the module's bytes.\n"
          ".PP\n"
          "Every option but \\fB\\-\\-config\\fR, "
          "\\fB\\-\\-instance\\fR, \\fB\\-\\-check\\fR, "
          "\\fB\\-\\-help\\fR and \\fB\\-\\-version\\fR is also a key "
          "of the configuration file: an INI file of \\fIkey\\fR = "
          "\\fIvalue\\fR lines, optionally under [cumodd]. Flags win over "
          "the file. \\fIBYTES\\fR take K, M, G or T (KiB...); lists are "
          "comma-separated.\n"
          ".SH OPTIONS\n",
          f);
}

/* cumodd(8)'s OPTIONS: every option --help lists. */
static void
cfg_man_options(FILE *f)
{
    for (size_t i = 0; i < cumod__cfg_nopts; i++) {
        const cfg_opt *o = &cumod__cfg_opts[i];
        if (o->flags & CFG_HIDDEN)
            continue;
        fputs(".TP\n", f);
        if (o->letter)
            fprintf(f, "\\fB\\-%c\\fR, ", o->letter);
        fputs("\\fB\\-\\-", f);
        cfg_troff(f, o->name);
        fputs("\\fR", f);
        if (o->arg) {
            fputs(" \\fI", f);
            cfg_troff(f, o->arg);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        cfg_troff(f, o->help);
        if (o->flags & CFG_CMDLINE)
            fputs(" (a flag only, not a key of the file)", f);
        else if (o->flags & CFG_LIVE)
            fputs(" (rereadable: SIGHUP applies a changed value)", f);
        fputs(".\n", f);
    }
}

/* cumodd(8)'s tail: signals, environment, files, exit status. */
static void
cfg_man_tail(FILE *f)
{
    fputs(
        ".SH SIGNALS\n"
        ".TP\n"
        ".B SIGHUP\n"
        "rescan the kernel folder and reread the configuration file "
        "(options marked rereadable take their new values).\n"
        ".TP\n"
        ".BR SIGTERM \", \" SIGINT\n"
        "stop: new work is refused, work in flight may finish within "
        "\\fB\\-\\-drain\\-timeout\\fR, then the executor and the "
        "daemon exit.\n"
        ".SH ENVIRONMENT\n"
        ".TP\n"
        ".B CUMOD_CUDA_LIBRARY\n"
        "the CUDA driver library to load when "
        "\\fB\\-\\-cuda\\-library\\fR is not given (else "
        "libcuda.so.1).\n"
        ".TP\n"
        ".B CUMOD_NVRTC_LIBRARY\n"
        "NVRTC, for \\fINAME\\fR.cu files, when "
        "\\fB\\-\\-nvrtc\\-library\\fR is not given.\n"
        ".TP\n"
        ".BR CACHE_DIRECTORY \", \" XDG_CACHE_HOME \", \" HOME\n"
        "where the compile cache goes when "
        "\\fB\\-\\-compile\\-cache\\fR is not given "
        "(systemd's CacheDirectory= first).\n"
        ".TP\n"
        ".B CUMOD_CUBLAS_LIBRARY\n"
        "the cuBLAS library GEMMs load when "
        "\\fB\\-\\-cublas\\-library\\fR is not given (else "
        "libcublas.so, libcublas.so.13, libcublas.so.12, then the same in "
        "/usr/local/cuda/lib64).\n"
        ".SH FILES\n"
        ".TP\n"
        ".I DIR/NAME.cubin, NAME.fatbin, NAME.cu, NAME.ptx\n"
        "the images of module NAME, preferred in this order when several are "
        "there; a .cu is compiled by NVRTC in a worker process.\n"
        ".TP\n"
        ".IR DIR / NAME .ptx.opts\n"
        "the module's JIT options, one a line: opt\\-level N, "
        "max\\-registers N, line\\-info [0|1], fast\\-compile N; # starts "
        "a comment.\n"
        ".TP\n"
        ".IR DIR / NAME .cu.opts\n"
        "NVRTC options for NAME.cu, one a line, after the configuration's.\n"
        ".TP\n"
        ".I DIR/*.h, *.cuh, *.hpp, ...\n"
        "headers the sources include: a changed one compiles the NAME.cu "
        "files that include it again (the headers they include are part of "
        "the compile cache's key).\n"
        ".TP\n"
        ".I /run/cumod/cumodd.sock\n"
        "the default listen socket (ipc://).\n"
        ".TP\n"
        ".I /run/cumod/cumodd.sock.fds\n"
        "beside an ipc:// listen socket (SOCKET.fds, mode 0666): where "
        "clients hand cumodd their rings' and segments' memfds with "
        "SCM_RIGHTS, taken only by a connection of the process that sent "
        "them; how cumodd maps the memory of clients of other users.\n"
        ".TP\n"
        ".I /usr/local/etc/cumod/NAME.conf\n"
        "the configuration of instance NAME "
        "(\\fB\\-\\-config\\-dir\\fR).\n"
        ".SH EXIT STATUS\n"
        "0 after SIGTERM or SIGINT, or a \\fB\\-\\-check\\fR that "
        "passed; 64 for a wrong flag; 78 for a wrong configuration file, "
        "a missing kernel folder, or a tls+tcp:// listener without a "
        "certificate and key that load; 69 when the driver, the device or the "
        "listen address is unusable.\n"
        ".SH SEE ALSO\n"
        ".BR cumodctl (1),\n"
        ".BR systemd.service (5).\n"
        "The README of cumod says how to set it up, and its BENCHMARKS.md "
        "what it costs.\n",
        f);
}

/* cumodd(8), from the same table as --help: every option it lists. */
void
cumod__cfg_man(FILE *f)
{
    cfg_man_head(f);
    cfg_man_options(f);
    cfg_man_tail(f);
}
