/* An unmodified program under libdeputy-heap.so (LD_PRELOAD): no deputy
 * header here. Checks that every allocation function still keeps malloc's
 * promises (sizes, alignment, zeros, contents across realloc, errors), that
 * the large blocks are in deputy's shared heap (a "memfd:deputy-heap"
 * mapping in /proc/self/maps) and the small ones are not, that threads and
 * fork are fine. Prints "ok" and exits 0, or names the first failed check
 * and exits 1. Argument "expect-no-heap": the heap must not be used (e.g.
 * DEPUTY_HEAP_BYTES=0), everything else still holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int expect_heap = 1;

#define CHECK(cond, ...)                                            \
    do {                                                            \
        if (!(cond)) {                                              \
            fprintf(stderr, "FAILED line %d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                           \
            fputc('\n', stderr);                                    \
            exit(1);                                                \
        }                                                           \
    } while (0)

/* Whether p lies in the shared heap's mapping. */
static int in_heap(const void *p) {
    FILE *maps = fopen("/proc/self/maps", "re");
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        if ((uintptr_t)p >= lo && (uintptr_t)p < hi) found = strstr(line, "memfd:deputy-heap") != NULL;
    }
    fclose(maps);
    return found;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(seed + i * 7);
}
static int holds(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != (unsigned char)(seed + i * 7)) return 0;
    return 1;
}

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 300; ++i) {
        size_t n = (size_t)(1 + (seed * 2654435761u + (unsigned)i * 40503u) % (512u << 10));
        unsigned char *p = malloc(n);
        if (!p) return (void *)1;
        fill(p, n, seed + (unsigned)i);
        p = realloc(p, n * 2);
        if (!p || !holds(p, n, seed + (unsigned)i)) return (void *)1;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "expect-no-heap") == 0) expect_heap = 0;
    const size_t big = 4u << 20, small = 1000;

    unsigned char *a = malloc(big);
    CHECK(a != NULL, "malloc(4 MiB)");
    CHECK(in_heap(a) == expect_heap, "4 MiB block %p in the heap: %d", (void *)a, in_heap(a));
    CHECK(malloc_usable_size(a) >= big, "usable %zu", malloc_usable_size(a));
    fill(a, big, 3);
    unsigned char *s = malloc(small);
    CHECK(s != NULL && !in_heap(s), "a small block stays in the C library's malloc");
    CHECK(malloc_usable_size(s) >= small, "small usable %zu", malloc_usable_size(s));

    /* realloc: grows and shrinks keeping the bytes, across the threshold both ways. */
    a = realloc(a, 2 * big);
    CHECK(a && holds(a, big, 3), "realloc grow keeps the bytes");
    a = realloc(a, 100);
    CHECK(a && holds(a, 100, 3), "realloc to below the threshold keeps the bytes");
    CHECK(!in_heap(a), "a block shrunk below the threshold leaves the heap");
    fill(s, small, 9);
    s = realloc(s, big);
    CHECK(s && holds(s, small, 9), "a small block grown into the heap keeps its bytes");
    CHECK(in_heap(s) == expect_heap, "a small block grown to 4 MiB is in the heap");
    free(a);
    free(s);
    CHECK(realloc(malloc(big), 0) == NULL, "realloc(p, 0) frees and returns NULL");

    /* calloc: zeros, also for a block that reuses freed dirty memory. */
    unsigned char *keep = malloc(big); /* keeps the next block below the heap's top */
    unsigned char *d = malloc(big);
    memset(d, 0xab, big);
    unsigned char *guard = malloc(big);
    free(d);
    unsigned char *z = calloc(big / 8, 8);
    CHECK(z != NULL, "calloc");
    for (size_t i = 0; i < big; ++i) CHECK(z[i] == 0, "calloc byte %zu is %u", i, z[i]);
    errno = 0;
    volatile size_t huge = SIZE_MAX / 2; /* volatile: the compiler would refuse the call */
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM, "calloc overflow is ENOMEM");
    free(z);
    free(keep);
    free(guard);

    /* The aligned ones. */
    void *p = NULL;
    CHECK(posix_memalign(&p, 1u << 16, big) == 0 && ((uintptr_t)p % (1u << 16)) == 0, "posix_memalign 64K");
    CHECK(in_heap(p) == expect_heap, "posix_memalign block in the heap");
    free(p);
    CHECK(posix_memalign(&p, 3, big) == EINVAL, "posix_memalign refuses alignment 3");
    p = aligned_alloc(4096, big);
    CHECK(p && ((uintptr_t)p % 4096) == 0, "aligned_alloc");
    free(p);
    p = memalign(1u << 22, big); /* above the heap's 2 MiB: the C library's */
    CHECK(p && ((uintptr_t)p % (1u << 22)) == 0 && !in_heap(p), "memalign 4 MiB alignment");
    free(p);
    p = valloc(big);
    CHECK(p && ((uintptr_t)p % 4096) == 0, "valloc");
    free(p);
    p = pvalloc(big + 1);
    CHECK(p && ((uintptr_t)p % 4096) == 0 && malloc_usable_size(p) >= big + 4096, "pvalloc");
    free(p);
    CHECK(reallocarray(NULL, huge, 4) == NULL && errno == ENOMEM, "reallocarray overflow");
    char *dup = strdup("the C library allocates for itself too");
    CHECK(dup != NULL, "strdup");
    free(dup);
    free(NULL);

    /* Threads. */
    pthread_t th[4];
    for (int t = 0; t < 4; ++t) pthread_create(&th[t], NULL, churn, (void *)(uintptr_t)(t + 1));
    for (int t = 0; t < 4; ++t) {
        void *r;
        pthread_join(th[t], &r);
        CHECK(r == NULL, "thread %d", t);
    }

    /* fork: the child has its own copy. */
    unsigned char *shared = malloc(big);
    fill(shared, big, 21);
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        if (read(pfd[0], &c, 1) != 1) _exit(3);
        if (!holds(shared, big, 21)) _exit(4);
        fill(shared, big, 77);
        unsigned char *own = malloc(big);
        if (!own) _exit(5);
        free(own);
        _exit(0);
    }
    fill(shared, big, 55);
    CHECK(write(pfd[1], "x", 1) == 1, "write");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child exit status %d", status);
    CHECK(holds(shared, big, 55), "the child's writes did not reach the parent");
    free(shared);
    puts("ok");
    return 0;
}
