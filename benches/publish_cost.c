/* What publishing compiled code costs on this machine, outside Ember: the
 * floor under tier 1's `publish_ns` (benches/README.md, Compile speed).
 *
 *   dev/env sh -c 'cc -O2 benches/publish_cost.c -o /tmp/publish_cost && /tmp/publish_cost'
 *
 * Tier 1 never maps code writable: it writes it with pwrite into a memfd
 * that is mapped only read-execute (tier1/src/jitmem.rs). Printed, as the
 * median of 7 rounds of 2000 calls each: a system call that does nothing
 * (getppid), and pwrite of n bytes into pages of the memfd that are already
 * allocated and mapped, as tier 1's are. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALLS 2000
#define ROUNDS 7
#define FILE_SIZE (64L << 20)

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof *v, cmp);
    return v[ROUNDS / 2];
}

int main(void)
{
    int fd = memfd_create("ember-publish-cost", 0);
    if (fd < 0 || ftruncate(fd, FILE_SIZE) != 0 || fallocate(fd, 0, 0, FILE_SIZE) != 0) {
        perror("memfd");
        return 1;
    }
    volatile char *code = mmap(NULL, FILE_SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    if (code == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (long off = 0; off < FILE_SIZE; off += 4096) {
        (void)code[off];
    }
    static char buf[32768];
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) {
            syscall(SYS_getppid);
        }
        t[r] = (now_ns() - t0) / CALLS;
    }
    printf("system call (getppid): %6.0f ns\n", median(t));
    static const int sizes[] = {64, 1024, 3000, 8192, 32768};
    for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        long step = (n + 63) & ~63L;
        for (int r = 0; r < ROUNDS; r++) {
            long off = 0;
            double t0 = now_ns();
            for (int i = 0; i < CALLS; i++) {
                if (pwrite(fd, buf, n, off) != n) {
                    perror("pwrite");
                    return 1;
                }
                off = off + step + n > FILE_SIZE ? 0 : off + step;
            }
            t[r] = (now_ns() - t0) / CALLS;
        }
        printf("pwrite of %5d bytes:   %6.0f ns\n", n, median(t));
    }
    return 0;
}
