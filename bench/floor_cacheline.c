/* The hardware floor of any shared-memory transport between two processes:
 * what the CPUs themselves take to move cache lines between two cores.
 * shoal's shm numbers are read as ratios to these (docs/PERFORMANCE.md).
 *
 * Two processes (fork) share an anonymous mapping; the parent is pinned to
 * CPU 0 and times, the child is pinned to CPU 1 and answers.  Tests:
 *   lat   one 8-byte word in one cache line bounced back and forth; the
 *         record is the half round trip (name "line_lat", size 8).
 *   lat2  the same with two lines: each side stores into the line the other
 *         polls and polls its own, which is what a one-sided put ping-pong
 *         (each rank waits on its own memory) has to move ("line2_lat").
 *   rate  one-way streaming of 8-byte messages, one per cache line, through
 *         a ring of lines with a lazily published consumer index (the
 *         Mukherjee's cachable queue with nothing else in it); the record is
 *         messages per second (name "line_rate", size 8).
 *   copy  ping-pong where each side memcpys S bytes into the other side's
 *         buffer and then flips the flag line: one copy plus one line
 *         hand-off per direction, exactly what a long active message within
 *         a host has to do; half round trip per size (name "copy_lat").
 * Spin loops have no pause instruction: a floor is the fastest the line can
 * move, and with one process per core there is no sibling to yield to. */
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE 64
#define RING_LINES 256                  /* 16 KiB ring: fits L1 on both sides */
#define PUBLISH_EVERY (RING_LINES / 4)  /* consumer index write-back period */
#define STOP UINT64_MAX                 /* never a valid sequence number */

struct line {
    _Alignas(LINE) _Atomic uint64_t word;
};

struct shared {
    struct line flag;              /* ping-pong word (lat, copy) */
    struct line head;              /* rate: messages consumed so far */
    struct line size;              /* copy: current payload size */
    struct line other;             /* lat2: the child's ping-pong word */
    struct line ring[RING_LINES];  /* rate: one message per line */
    /* copy: then two buffers of max_size bytes, parent's first */
};

static struct shared *sh;
static unsigned char *buf_parent, *buf_child;

static void child_lat(void)
{
    uint64_t expect = 1;
    for (;;) {
        uint64_t v;
        while ((v = atomic_load_explicit(&sh->flag.word, memory_order_acquire)) != expect)
            if (v == STOP)
                return;
        atomic_store_explicit(&sh->flag.word, expect + 1, memory_order_release);
        expect += 2;
    }
}

/* One round trip: the parent's store of an odd value and the child's
 * answer with the next even one. */
static void parent_lat_round(uint64_t *seq)
{
    atomic_store_explicit(&sh->flag.word, *seq, memory_order_release);
    while (atomic_load_explicit(&sh->flag.word, memory_order_acquire) != *seq + 1)
        ;
    *seq += 2;
}

static void child_lat2(void)
{
    uint64_t expect = 1;
    for (;;) {
        uint64_t v;
        while ((v = atomic_load_explicit(&sh->other.word, memory_order_acquire)) != expect)
            if (v == STOP)
                return;
        atomic_store_explicit(&sh->flag.word, expect + 1, memory_order_release);
        expect += 2;
    }
}

static void parent_lat2_round(uint64_t *seq)
{
    atomic_store_explicit(&sh->other.word, *seq, memory_order_release);
    while (atomic_load_explicit(&sh->flag.word, memory_order_acquire) != *seq + 1)
        ;
    *seq += 2;
}

static void child_rate(void)
{
    uint64_t seq = 1;
    for (;;) {
        struct line *l = &sh->ring[(seq - 1) % RING_LINES];
        uint64_t v;
        while ((v = atomic_load_explicit(&l->word, memory_order_acquire)) != seq)
            if (v == STOP)
                return;
        if (seq % PUBLISH_EVERY == 0)
            atomic_store_explicit(&sh->head.word, seq, memory_order_release);
        seq++;
    }
}

/* Producer side of the ring: the slot of message seq is free once the
 * consumer has taken message seq - RING_LINES; the consumer's index is
 * re-read only when the cached copy says the ring is full. */
static void parent_rate_send(uint64_t seq, uint64_t *cached_head)
{
    while (seq - *cached_head > RING_LINES)
        *cached_head = atomic_load_explicit(&sh->head.word, memory_order_acquire);
    atomic_store_explicit(&sh->ring[(seq - 1) % RING_LINES].word, seq, memory_order_release);
}

static void child_copy(size_t max)
{
    unsigned char *src = malloc(max);
    uint64_t expect = 1;
    if (!src)
        bench_die("out of memory");
    memset(src, 0xc5, max);
    for (;;) {
        uint64_t v;
        while ((v = atomic_load_explicit(&sh->flag.word, memory_order_acquire)) != expect)
            if (v == STOP)
                goto out;
        memcpy(buf_parent, src,
               (size_t)atomic_load_explicit(&sh->size.word, memory_order_relaxed));
        atomic_store_explicit(&sh->flag.word, expect + 1, memory_order_release);
        expect += 2;
    }
out:
    free(src);
}

static void parent_copy_round(const unsigned char *src, size_t size, uint64_t *seq)
{
    memcpy(buf_child, src, size);
    parent_lat_round(seq);
}

static pid_t start_child(const char *test, size_t max)
{
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork failed");
    if (pid == 0) {
        bench_pin(1);
        if (strcmp(test, "lat") == 0)
            child_lat();
        else if (strcmp(test, "lat2") == 0)
            child_lat2();
        else if (strcmp(test, "rate") == 0)
            child_rate();
        else
            child_copy(max);
        _exit(0);
    }
    return pid;
}

static void stop_child(pid_t pid, const char *test, uint64_t next_rate_seq)
{
    int status;
    if (strcmp(test, "rate") == 0)
        atomic_store(&sh->ring[(next_rate_seq - 1) % RING_LINES].word, STOP);
    else if (strcmp(test, "lat2") == 0)
        atomic_store(&sh->other.word, STOP);
    else
        atomic_store(&sh->flag.word, STOP);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_die("the answering process failed");
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = "floor", .batches = 7, .iters = 0,
        .min_size = 8, .max_size = 1u << 20, .window = 1,
    };
    double v[BENCH_MAX_BATCHES];
    uint64_t seq = 1;
    int b;

    if (bench_parse(argc, argv, &o, "lat lat2 rate copy") < 0)
        return 2;
    if (o.iters == 0) /* a line moves in a small fraction of a copy round trip */
        o.iters = strcmp(o.test, "copy") == 0 ? 20000 : 1000000;
    size_t map_len = sizeof(struct shared) + 2 * o.max_size;
    void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        bench_die("mmap of %zu bytes failed", map_len);
    sh = m;
    buf_parent = (unsigned char *)m + sizeof(struct shared);
    buf_child = buf_parent + o.max_size;
    /* Touch every page now so no first-touch fault lands in a timed batch. */
    memset(m, 0, map_len);

    bench_pin(0);
    pid_t child = start_child(o.test, o.max_size);

    if (strcmp(o.test, "lat") == 0 || strcmp(o.test, "lat2") == 0) {
        int two = strcmp(o.test, "lat2") == 0;
        for (b = -1; b < o.batches; b++) {
            double t0 = bench_now();
            for (long i = 0; i < o.iters; i++)
                two ? parent_lat2_round(&seq) : parent_lat_round(&seq);
            if (b >= 0)
                v[b] = (bench_now() - t0) / (double)o.iters / 2 * 1e6;
        }
        bench_emit(&o, two ? "line2_lat" : "line_lat", 8, 2, "us", o.iters, v, o.batches);
        stop_child(child, o.test, 0);
    } else if (strcmp(o.test, "rate") == 0) {
        /* A multiple of PUBLISH_EVERY, so the consumer publishes exactly
         * the last message of every batch. */
        long n = (o.iters + PUBLISH_EVERY - 1) / PUBLISH_EVERY * PUBLISH_EVERY;
        uint64_t cached_head = 0;
        for (b = -1; b < o.batches; b++) {
            double t0 = bench_now();
            for (long i = 0; i < n; i++)
                parent_rate_send(seq++, &cached_head);
            while (atomic_load_explicit(&sh->head.word, memory_order_acquire) != seq - 1)
                ;
            if (b >= 0)
                v[b] = (double)n / (bench_now() - t0) / 1e6;
        }
        bench_emit(&o, "line_rate", 8, 2, "Mmsg/s", n, v, o.batches);
        stop_child(child, o.test, seq);
    } else {
        unsigned char *src = malloc(o.max_size);
        if (!src)
            bench_die("out of memory");
        memset(src, 0x5c, o.max_size);
        for (size_t s = o.min_size; s <= o.max_size; s *= 2) {
            long n = bench_iters_for(&o, s);
            atomic_store(&sh->size.word, s);
            for (b = -1; b < o.batches; b++) {
                double t0 = bench_now();
                for (long i = 0; i < n; i++)
                    parent_copy_round(src, s, &seq);
                if (b >= 0)
                    v[b] = (bench_now() - t0) / (double)n / 2 * 1e6;
            }
            bench_emit(&o, "copy_lat", s, 2, "us", n, v, o.batches);
        }
        stop_child(child, o.test, 0);
        free(src);
    }
    munmap(m, map_len);
    return 0;
}
