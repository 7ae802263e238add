/* SPDX-License-Identifier: MIT */
/* Fragments this host's free memory, to measure transfers as on a host
 * that has run for a while: takes all but KEEP_MIB of the available
 * memory in 4 KiB pages, gives back every other page, and holds the rest
 * until killed (free memory is then mostly single pages, and a huge page
 * costs the kernel a compaction). Prints "ready" when done.
 *     cc -O2 -pthread -o fragment bench/fragment.c && ./fragment [KEEP_MIB]
 * Used by bench/xfer-fault-ab.sh. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define THREADS 8

static uint8_t *base;
static size_t pages;

static size_t
available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    size_t kb = 0;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb << 10;
}

static void *
work(void *arg)
{
    size_t t = (size_t)(uintptr_t)arg, from = pages * t / THREADS;
    size_t to = pages * (t + 1) / THREADS;

    for (size_t i = from; i < to; i++)
        base[i * 4096] = 1;
    for (size_t i = from | 1; i < to; i += 2)
        madvise(base + i * 4096, 4096, MADV_DONTNEED);
    return NULL;
}

int
main(int argc, char **argv)
{
    size_t keep = (argc > 1 ? strtoull(argv[1], NULL, 10) : 4096) << 20;
    size_t avail = available(), len;
    pthread_t t[THREADS];

    if (avail <= keep) {
        fprintf(stderr, "fragment: only %zu MiB available\n", avail >> 20);
        return 1;
    }
    len = (avail - keep) & ~(size_t)4095;
    pages = len / 4096;
    base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
    if (base == MAP_FAILED || madvise(base, len, MADV_NOHUGEPAGE) != 0) {
        perror("fragment: mmap");
        return 1;
    }
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("ready: held %zu MiB in every other page of %zu MiB\n", len >> 21,
           len >> 20);
    fflush(stdout);
    pause();
    return 0;
}
