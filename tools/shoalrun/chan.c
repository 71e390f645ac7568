/* Framing of the launch channel (chan.h, docs/BOOT.md). */
#include "chan.h"

#include <stdlib.h>
#include <string.h>

static void put(struct chan_buf *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = 2 * (b->n + n);
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_le(struct chan_buf *b, uint64_t v, int bytes)
{
    unsigned char le[8];
    for (int i = 0; i < bytes; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    put(b, le, (size_t)bytes);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void chan_begin(struct chan_buf *b, enum chan_type type)
{
    b->n = 0;
    b->oom = 0;
    put_le(b, CHAN_MAGIC, 4);
    put_le(b, CHAN_VERSION, 2);
    put_le(b, (uint64_t)type, 2);
    put_le(b, 0, 4); /* length, filled in by chan_end */
}

void chan_u16(struct chan_buf *b, uint16_t v) { put_le(b, v, 2); }
void chan_u32(struct chan_buf *b, uint32_t v) { put_le(b, v, 4); }
void chan_u64(struct chan_buf *b, uint64_t v) { put_le(b, v, 8); }
void chan_bytes(struct chan_buf *b, const void *p, size_t n) { put(b, p, n); }
void chan_str(struct chan_buf *b, const char *s) { put(b, s, strlen(s) + 1); }

int chan_end(struct chan_buf *b)
{
    if (b->oom || b->n - CHAN_HDR > CHAN_MAX_PAYLOAD)
        return -1;
    size_t len = b->n - CHAN_HDR;
    for (int i = 0; i < 4; i++)
        b->p[8 + i] = (unsigned char)(len >> (8 * i));
    return 0;
}

const void *chan_get_bytes(struct chan_reader *m, size_t n)
{
    if (m->bad || n > m->n - m->off) {
        m->bad = 1;
        return NULL;
    }
    const void *p = m->p + m->off;
    m->off += n;
    return p;
}

static uint64_t get(struct chan_reader *m, int bytes)
{
    const unsigned char *p = chan_get_bytes(m, (size_t)bytes);
    return p ? get_le(p, bytes) : 0;
}

uint16_t chan_get_u16(struct chan_reader *m) { return (uint16_t)get(m, 2); }
uint32_t chan_get_u32(struct chan_reader *m) { return (uint32_t)get(m, 4); }
uint64_t chan_get_u64(struct chan_reader *m) { return get(m, 8); }

const char *chan_get_str(struct chan_reader *m)
{
    const unsigned char *nul = m->bad ? NULL : memchr(m->p + m->off, '\0', m->n - m->off);
    if (!nul) {
        m->bad = 1;
        return "";
    }
    return chan_get_bytes(m, (size_t)(nul - (m->p + m->off)) + 1);
}

const void *chan_get_rest(struct chan_reader *m, size_t *n)
{
    *n = m->bad ? 0 : m->n - m->off;
    return chan_get_bytes(m, *n);
}

int chan_done(const struct chan_reader *m)
{
    return !m->bad && m->off == m->n;
}

long chan_frame(const unsigned char *buf, size_t n, uint16_t *type, struct chan_reader *payload,
                const char **why)
{
    if (n < CHAN_HDR)
        return 0;
    uint64_t len = get_le(buf + 8, 4);
    if (get_le(buf, 4) != CHAN_MAGIC) {
        *why = "not a launch channel frame (bad magic)";
        return -1;
    }
    if (get_le(buf + 4, 2) != CHAN_VERSION) {
        *why = "launch channel version differs (different shoalrun versions on the hosts?)";
        return -1;
    }
    if (len > CHAN_MAX_PAYLOAD) {
        *why = "frame longer than the channel allows";
        return -1;
    }
    if (n < CHAN_HDR + len)
        return 0;
    *type = (uint16_t)get_le(buf + 6, 2);
    *payload = (struct chan_reader){.p = buf + CHAN_HDR, .n = (size_t)len};
    return (long)(CHAN_HDR + len);
}
