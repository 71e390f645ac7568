/* Memory-based signal (Matsumoto's MBCF thesis §4.1): a structure in the owner's segment
 * with a storage mode, an invocation condition and a handler index.  The
 * owner's progress engine delivers every signal (senders' commands travel
 * to it), so storing, the running flag and the invocation are decided in
 * one place and a handler is never an address that came over the wire. */
#include "rma/rma.h"

#include <string.h>

#define SIG_MAGIC 0x4e474953u /* "SIGN" */
#define SIG_VERSION 1u
#define SIG_HEAD_BYTES 128u

struct sig_head {
    uint32_t magic;
    uint16_t version;
    uint8_t storage;   /* enum shoal_sig_storage */
    uint8_t condition; /* enum shoal_sig_condition */
    int32_t handler;   /* index, or SHOAL_SIG_POLL */
    uint32_t enabled;
    uint64_t buf_bytes; /* BUFFER modes */
    _Atomic uint32_t arrivals; /* deliveries since init, mod 2^32 (shoal_signal_wait's futex word) */
    _Atomic uint32_t waiting;  /* shoal_signal_waits that may sleep on arrivals (several at MULTIPLE) */
    char pad0[32];
    uint32_t running;
    int32_t last_src;  /* BUFFER modes: who wrote last */
    uint64_t last_len;
    char pad1[48];
};
_Static_assert(sizeof(struct sig_head) == SIG_HEAD_BYTES, "signal header layout");

static shoal_signal_handler_t sig_handlers[SHOAL_SIGNAL_MAX_HANDLERS];

int shoal_signal_register(unsigned index, shoal_signal_handler_t fn)
{
    AM_GUARD();
    if (index >= SHOAL_SIGNAL_MAX_HANDLERS || !fn)
        return SHOAL_EINVAL;
    sig_handlers[index] = fn;
    return SHOAL_OK;
}

static int config_ok(const struct shoal_signal_config *cfg)
{
    if (!cfg || cfg->storage > SHOAL_SIG_STORE_BUFFER_OFFSET || cfg->condition > SHOAL_SIG_FIRST ||
        cfg->handler < SHOAL_SIG_POLL || cfg->handler >= (int)SHOAL_SIGNAL_MAX_HANDLERS)
        return 0;
    if (cfg->storage == SHOAL_SIG_STORE_QUEUE)
        return rma_fifo_bytes(cfg->entry_bytes, cfg->entries, 0) != 0;
    return cfg->storage == SHOAL_SIG_STORE_NONE || cfg->entry_bytes > 0;
}

size_t shoal_signal_footprint(const struct shoal_signal_config *cfg)
{
    if (!config_ok(cfg))
        return 0;
    switch (cfg->storage) {
    case SHOAL_SIG_STORE_QUEUE: return SIG_HEAD_BYTES + rma_fifo_bytes(cfg->entry_bytes, cfg->entries, 0);
    case SHOAL_SIG_STORE_NONE: return SIG_HEAD_BYTES;
    default: return SIG_HEAD_BYTES + (cfg->entry_bytes + 63) / 64 * 64;
    }
}

/* The owner's structure at off, checked against the segment. */
static int sig_open(char *seg, uint64_t seg_size, uint64_t off, struct sig_head **out)
{
    if ((off & 63u) || off > seg_size || seg_size - off < SIG_HEAD_BYTES)
        return SHOAL_ENOSTRUCT;
    struct sig_head *s = (struct sig_head *)(seg + off);
    if (s->magic != SIG_MAGIC || s->version != SIG_VERSION || s->storage > SHOAL_SIG_STORE_BUFFER_OFFSET ||
        s->condition > SHOAL_SIG_FIRST || s->buf_bytes > seg_size - off - SIG_HEAD_BYTES)
        return SHOAL_ENOSTRUCT;
    *out = s;
    return SHOAL_OK;
}

/* The owner's own structure at off of mem. */
struct sig_view {
    struct sig_head *s;
    char *seg;
    size_t size;
};

static int own_sig(shoal_mem_t mem, size_t off, struct sig_view *v)
{
    void *b;
    int rc = shoal_mem_local(mem, &b, &v->size);
    v->seg = b;
    return rc ? rc : sig_open(v->seg, v->size, off, &v->s);
}

int shoal_signal_init(shoal_mem_t mem, size_t off, const struct shoal_signal_config *cfg)
{
    AM_GUARD();
    void *b;
    size_t size;
    int rc = shoal_mem_local(mem, &b, &size);
    if (rc)
        return rc;
    size_t bytes = shoal_signal_footprint(cfg);
    if (!bytes || (off & 63u))
        return SHOAL_EINVAL;
    if (off > size || bytes > size - off)
        return SHOAL_ERANGE;
    struct sig_head *s = (struct sig_head *)((char *)b + off);
    memset(s, 0, SIG_HEAD_BYTES);
    s->version = SIG_VERSION;
    s->storage = (uint8_t)cfg->storage;
    s->condition = (uint8_t)cfg->condition;
    s->handler = cfg->handler;
    s->enabled = 1;
    s->last_src = -1;
    if (cfg->storage == SHOAL_SIG_STORE_QUEUE)
        rc = rma_fifo_format((char *)s + SIG_HEAD_BYTES, bytes - SIG_HEAD_BYTES, cfg->entry_bytes, cfg->entries, 0);
    else if (cfg->storage != SHOAL_SIG_STORE_NONE)
        s->buf_bytes = bytes - SIG_HEAD_BYTES;
    if (rc == SHOAL_OK)
        s->magic = SIG_MAGIC;
    return rc;
}

/* Stores per the structure's mode; *view is what the handler will see. */
static int sig_store(struct sig_head *s, char *seg, uint64_t seg_size, uint64_t off, int src, const void *data,
                     size_t n, uint64_t offset, const void **view)
{
    char *buf = (char *)s + SIG_HEAD_BYTES;
    *view = data;
    switch (s->storage) {
    case SHOAL_SIG_STORE_QUEUE:
        return rma_fifo_enqueue(seg, seg_size, off + SIG_HEAD_BYTES, src, data, n, 0);
    case SHOAL_SIG_STORE_BUFFER:
        offset = 0;
        /* fall through */
    case SHOAL_SIG_STORE_BUFFER_OFFSET:
        if (offset > s->buf_bytes || n > s->buf_bytes - offset)
            return s->storage == SHOAL_SIG_STORE_BUFFER ? SHOAL_ETOOBIG : SHOAL_ERANGE;
        memcpy(buf + offset, data, n);
        s->last_src = src;
        s->last_len = n;
        *view = buf + offset;
        return SHOAL_OK;
    default:
        return SHOAL_OK;
    }
}

/* Counts a delivery and, in thread mode, wakes every shoal_signal_wait
 * asleep on it (MBCF's task wake-up): the count before the look at the
 * waiters, as a waiter counts itself before its last look at the count, so one of the two sees
 * the other (store-load order needs the full fence). */
static void sig_arrived(struct sig_head *s)
{
    atomic_fetch_add_explicit(&s->arrivals, 1, memory_order_release);
    if (!am_threaded)
        return; /* only a thread-mode wait sleeps (shoal_signal_wait) */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->waiting, memory_order_relaxed))
        am_progress_unblock(&s->arrivals);
}

int rma_signal_deliver(shoal_mem_t mem, char *seg, uint64_t seg_size, uint64_t off, int src, const void *data,
                       size_t n, uint64_t offset)
{
    struct sig_head *s;
    int rc = sig_open(seg, seg_size, off, &s);
    if (rc)
        return rc;
    if (!s->enabled)
        return SHOAL_ECANCELED;
    shoal_signal_handler_t fn = s->handler >= 0 && s->handler < (int)SHOAL_SIGNAL_MAX_HANDLERS
                                    ? sig_handlers[s->handler] : NULL;
    int invoke = fn != NULL;
    if (invoke && s->running) {
        if (s->condition == SHOAL_SIG_EVERY_BLOCKING || s->condition == SHOAL_SIG_FIRST_BLOCKING)
            return SHOAL_ECANCELED;
        if (s->condition == SHOAL_SIG_FIRST)
            invoke = 0; /* stored for the running handler's next call */
    }
    const void *view;
    if ((rc = sig_store(s, seg, seg_size, off, src, data, n, offset, &view)) != SHOAL_OK)
        return rc;
    if (invoke) {
        s->running = 1;
        fn(mem, (size_t)off, src, view, n, (size_t)offset);
        if (s->condition == SHOAL_SIG_EVERY_BLOCKING || s->condition == SHOAL_SIG_EVERY)
            s->running = 0;
    }
    sig_arrived(s);
    return SHOAL_OK;
}

int shoal_signal_enable(shoal_mem_t mem, size_t off, int enabled)
{
    AM_GUARD();
    struct sig_view v;
    int rc = own_sig(mem, off, &v);
    if (rc == SHOAL_OK)
        v.s->enabled = enabled != 0;
    return rc;
}

int shoal_signal_next(shoal_mem_t mem, size_t off, void *buf, size_t cap, size_t *n, int *src)
{
    AM_GUARD();
    struct sig_view v;
    int rc = own_sig(mem, off, &v);
    if (rc)
        return rc;
    if (v.s->storage == SHOAL_SIG_STORE_QUEUE) {
        rc = rma_fifo_take(v.seg, v.size, off + SIG_HEAD_BYTES, buf, cap, n, src);
        if (rc != SHOAL_EAGAIN)
            return rc;
    }
    /* Deliveries run in this process's progress engine, never during this
     * call, so "empty, then clear" is atomic with respect to them. */
    v.s->running = 0;
    return SHOAL_EAGAIN;
}

int shoal_signal_state(shoal_mem_t mem, size_t off, int *running, uint32_t *queued)
{
    AM_GUARD();
    struct sig_view v;
    int rc = own_sig(mem, off, &v);
    if (rc)
        return rc;
    if (running)
        *running = (int)v.s->running;
    if (queued)
        *queued = v.s->storage == SHOAL_SIG_STORE_QUEUE ? rma_fifo_count((char *)v.s + SIG_HEAD_BYTES) : 0;
    return SHOAL_OK;
}

/* One look at the count, with the lock held.  SHOAL_OK: it moved (the
 * new count is in *seen); SHOAL_EAGAIN: not yet, *s is the structure. */
static int sig_wait_look(shoal_mem_t mem, size_t off, uint32_t *seen, struct sig_head **s)
{
    AM_GUARD();
    int rc = am_blocking_allowed("shoal_signal_wait");
    struct sig_view v;
    if (rc || (rc = own_sig(mem, off, &v)) != SHOAL_OK)
        return rc;
    uint32_t now = atomic_load_explicit(&v.s->arrivals, memory_order_acquire);
    *s = v.s;
    if (now == *seen)
        return SHOAL_EAGAIN;
    *seen = now;
    return SHOAL_OK;
}

/* Thread mode, outside any critical section: sleeps in the kernel until
 * the progress thread delivers a signal here, or ns pass. */
static void sig_sleep(struct sig_head *s, uint32_t seen, uint64_t ns)
{
    /* a count, not a flag: a waiter that leaves must not hide the others */
    atomic_fetch_add_explicit(&s->waiting, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->arrivals, memory_order_relaxed) == seen)
        am_progress_block(&s->arrivals, seen, ns);
    atomic_fetch_sub_explicit(&s->waiting, 1, memory_order_relaxed);
}

/* One poll of a wait that no other thread can deliver for. */
static void sig_poll(struct util_backoff *b)
{
    AM_GUARD();
    am_progress_wait(b, 0);
}

int shoal_signal_wait(shoal_mem_t mem, size_t off, uint32_t *seen, double timeout_s)
{
    if (!seen || !(timeout_s >= 0))
        return SHOAL_EINVAL;
    /* a limit past ~30 years is no limit (and would overflow) */
    uint64_t start = util_now_ns(), limit = timeout_s < 1e9 ? (uint64_t)(timeout_s * 1e9) : UINT64_MAX;
    struct util_backoff b;
    util_backoff_init(&b);
    /* at least one wait step and a look after it, so that a zero timeout
     * still runs what has arrived */
    for (int last = 0;;) {
        struct sig_head *s;
        int rc = sig_wait_look(mem, off, seen, &s);
        if (rc != SHOAL_EAGAIN)
            return rc;
        if (last)
            return SHOAL_ETIMEDOUT;
        uint64_t waited = util_now_ns() - start;
        last = waited >= limit;
        if (am_threaded && !am_lock_mine())
            sig_sleep(s, *seen, last ? 0 : limit - waited);
        else
            sig_poll(&b);
    }
}
