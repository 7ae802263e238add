/*
 * libfakenvrtc.so: an NVRTC that misbehaves on request, for the tests of
 * the compile worker's isolation (compile_test). It compiles nothing: a
 * source holding FAKE_NVRTC_CRASH crashes the process (SIGSEGV),
 * FAKE_NVRTC_HANG never returns, FAKE_NVRTC_EXIT exits; a source holding
 * FAKE_NVRTC_LOG fails with the text after it as its log (what a #line
 * or an #error would put there); any other source fails with a log that
 * says so. The real NVRTC does the real compiles.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvrtcResult;
typedef struct fake_prog {
    char *src;
    const char *log;
} fake_prog;

/* NVRTC's entry points (nvrtc.h's, with the program as fake_prog). */
const char *nvrtcGetErrorString(nvrtcResult r);
nvrtcResult nvrtcVersion(int *major, int *minor);
nvrtcResult nvrtcCreateProgram(fake_prog **prog, const char *src,
                               const char *name, int nheaders,
                               const char *const *headers,
                               const char *const *include_names);
nvrtcResult nvrtcDestroyProgram(fake_prog **prog);
nvrtcResult nvrtcCompileProgram(fake_prog *p, int n, const char *const *opts);
nvrtcResult nvrtcGetProgramLogSize(fake_prog *p, size_t *size);
nvrtcResult nvrtcGetProgramLog(fake_prog *p, char *log);
nvrtcResult nvrtcGetPTXSize(fake_prog *p, size_t *size);
nvrtcResult nvrtcGetPTX(fake_prog *p, char *ptx);

const char *
nvrtcGetErrorString(nvrtcResult r)
{
    return r == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION";
}

nvrtcResult
nvrtcVersion(int *major, int *minor)
{
    *major = 99;
    *minor = 0;
    return 0;
}

nvrtcResult
nvrtcCreateProgram(fake_prog **prog, const char *src, const char *name,
                   int nheaders, const char *const *headers,
                   const char *const *include_names)
{
    (void)name, (void)nheaders, (void)headers, (void)include_names;
    fake_prog *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->src = strdup(src)) == NULL) {
        free(p);
        return 1;
    }
    *prog = p;
    return 0;
}

nvrtcResult
nvrtcDestroyProgram(fake_prog **prog)
{
    if (prog && *prog) {
        free((*prog)->src);
        free(*prog);
        *prog = NULL;
    }
    return 0;
}

nvrtcResult
nvrtcCompileProgram(fake_prog *p, int n, const char *const *opts)
{
    (void)n, (void)opts;
    if (strstr(p->src, "FAKE_NVRTC_CRASH") != NULL)
        raise(SIGSEGV);
    if (strstr(p->src, "FAKE_NVRTC_HANG") != NULL)
        for (;;)
            pause();
    if (strstr(p->src, "FAKE_NVRTC_EXIT") != NULL)
        _exit(42);
    const char *text = strstr(p->src, "FAKE_NVRTC_LOG");
    p->log = text != NULL ? text + strlen("FAKE_NVRTC_LOG")
                          : "fakenvrtc: compiles nothing\n";
    return 6; /* NVRTC_ERROR_COMPILATION */
}

nvrtcResult
nvrtcGetProgramLogSize(fake_prog *p, size_t *size)
{
    *size = p->log ? strlen(p->log) + 1 : 1;
    return 0;
}

nvrtcResult
nvrtcGetProgramLog(fake_prog *p, char *log)
{
    strcpy(log, p->log ? p->log : "");
    return 0;
}

nvrtcResult
nvrtcGetPTXSize(fake_prog *p, size_t *size)
{
    (void)p;
    *size = 0;
    return 1;
}

nvrtcResult
nvrtcGetPTX(fake_prog *p, char *ptx)
{
    (void)p, (void)ptx;
    return 1;
}
