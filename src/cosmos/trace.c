/* Trace files of coherence messages: fixed-size little-endian records
 * behind a 64-byte header (docs/COSMOS_TRACE.md).  Fields are packed byte
 * by byte, so the files read the same on any host. */
#include "cosmos/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"
#include "util/util.h"

static const char cosmos_magic[8] = {'S', 'H', 'C', 'O', 'S', 'M', 'O', 'S'};

/* Records buffered before one write: 96 KiB, a few thousand messages. */
#define COSMOS_TRACE_BUF_RECS 4096

struct cosmos_trace_w {
    FILE *f;
    char *path;
    size_t used; /* records in buf */
    int failed;  /* a write failed: the trace stopped */
    unsigned char buf[COSMOS_TRACE_BUF_RECS * COSMOS_TRACE_RECORD_BYTES];
};

struct cosmos_trace_r {
    FILE *f;
    char *path;
    uint64_t offset; /* of the next record */
};

const char *cosmos_type_name(unsigned t)
{
    static const char *const names[COSMOS_TYPE_COUNT] = {
        [COSMOS_GET_RO_REQ] = "get_ro_request",     [COSMOS_GET_RW_REQ] = "get_rw_request",
        [COSMOS_UPGRADE_REQ] = "upgrade_request",   [COSMOS_INVAL_RO_RESP] = "inval_ro_response",
        [COSMOS_INVAL_RW_RESP] = "inval_rw_response",
        [COSMOS_DOWNGRADE_RESP] = "downgrade_response", [COSMOS_FLUSH] = "flush",
        [COSMOS_GET_RO_RESP] = "get_ro_response",   [COSMOS_GET_RW_RESP] = "get_rw_response",
        [COSMOS_UPGRADE_RESP] = "upgrade_response", [COSMOS_INVAL_RO_REQ] = "inval_ro_request",
        [COSMOS_INVAL_RW_REQ] = "inval_rw_request",
    };
    return t > 0 && t < COSMOS_TYPE_COUNT ? names[t] : "?";
}

/* ---- little-endian packing ---------------------------------------------- */
static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void hdr_pack(unsigned char *p, uint64_t job, uint32_t rank, uint32_t nranks)
{
    memset(p, 0, COSMOS_TRACE_HEADER_BYTES);
    memcpy(p, cosmos_magic, sizeof cosmos_magic);
    put_le(p + 8, COSMOS_TRACE_VERSION, 2);
    put_le(p + 10, COSMOS_TRACE_HEADER_BYTES, 2);
    put_le(p + 12, COSMOS_TRACE_RECORD_BYTES, 2);
    put_le(p + 16, rank, 4);
    put_le(p + 20, nranks, 4);
    put_le(p + 24, job, 8);
}

static void rec_pack(unsigned char *p, const struct cosmos_rec *r)
{
    put_le(p, r->block, 8);
    put_le(p + 8, r->sender, 4);
    p[12] = r->role;
    p[13] = r->type;
    p[14] = r->proto;
    p[15] = r->cause;
    put_le(p + 16, r->seq, 8);
}

static void rec_unpack(const unsigned char *p, struct cosmos_rec *r)
{
    r->block = get_le(p, 8);
    r->sender = (uint32_t)get_le(p + 8, 4);
    r->role = p[12];
    r->type = p[13];
    r->proto = p[14];
    r->cause = p[15];
    r->seq = get_le(p + 16, 8);
}

/* ---- writing -------------------------------------------------------------- */
static int trace_flush(struct cosmos_trace_w *w)
{
    size_t n = w->used * COSMOS_TRACE_RECORD_BYTES;
    w->used = 0;
    if (w->failed || n == 0)
        return w->failed ? SHOAL_ESYS : SHOAL_OK;
    if (fwrite(w->buf, 1, n, w->f) != n) {
        LOG(LOG_ERROR, "cosmos trace %s: write failed (%s); the trace stops here",
            w->path, strerror(errno));
        w->failed = 1;
        return SHOAL_ESYS;
    }
    return SHOAL_OK;
}

int cosmos_trace_open_write(const char *dir, uint64_t job, int rank, int nranks,
                            struct cosmos_trace_w **w)
{
    if (!dir || !w || rank < 0 || nranks <= 0 || rank >= nranks)
        return SHOAL_EINVAL;
    int len = snprintf(NULL, 0, "%s/cosmos-%llx-r%d.trace", dir, (unsigned long long)job, rank);
    struct cosmos_trace_w *t = calloc(1, sizeof *t);
    char *path = t ? malloc((size_t)len + 1) : NULL;
    if (!path) {
        free(t);
        return SHOAL_ENOMEM;
    }
    snprintf(path, (size_t)len + 1, "%s/cosmos-%llx-r%d.trace", dir, (unsigned long long)job, rank);
    t->path = path;
    t->f = fopen(path, "wb");
    unsigned char h[COSMOS_TRACE_HEADER_BYTES];
    hdr_pack(h, job, (uint32_t)rank, (uint32_t)nranks);
    if (!t->f || fwrite(h, 1, sizeof h, t->f) != sizeof h) {
        LOG(LOG_ERROR, "cosmos trace %s: cannot create it: %s", path, strerror(errno));
        if (t->f)
            fclose(t->f);
        free(path);
        free(t);
        return SHOAL_ESYS;
    }
    *w = t;
    return SHOAL_OK;
}

void cosmos_trace_put(struct cosmos_trace_w *w, const struct cosmos_rec *r)
{
    rec_pack(w->buf + w->used * COSMOS_TRACE_RECORD_BYTES, r);
    if (++w->used == COSMOS_TRACE_BUF_RECS)
        trace_flush(w);
}

int cosmos_trace_close(struct cosmos_trace_w *w)
{
    if (!w)
        return SHOAL_OK;
    int rc = trace_flush(w);
    if (fclose(w->f) != 0 && rc == SHOAL_OK) {
        LOG(LOG_ERROR, "cosmos trace %s: close failed: %s", w->path, strerror(errno));
        rc = SHOAL_ESYS;
    }
    free(w->path);
    free(w);
    return rc;
}

/* ---- reading -------------------------------------------------------------- */
static int hdr_check(const char *path, const unsigned char *p, size_t got,
                     struct cosmos_trace_hdr *h)
{
    if (got < COSMOS_TRACE_HEADER_BYTES) {
        LOG(LOG_ERROR, "cosmos trace %s: %zu bytes, shorter than its %d-byte header", path, got,
            COSMOS_TRACE_HEADER_BYTES);
        return SHOAL_EINVAL;
    }
    if (memcmp(p, cosmos_magic, sizeof cosmos_magic) != 0) {
        LOG(LOG_ERROR, "cosmos trace %s: not a trace (magic is not SHCOSMOS)", path);
        return SHOAL_EINVAL;
    }
    h->version = (uint16_t)get_le(p + 8, 2);
    h->header_bytes = (uint16_t)get_le(p + 10, 2);
    h->record_bytes = (uint16_t)get_le(p + 12, 2);
    h->rank = (uint32_t)get_le(p + 16, 4);
    h->nranks = (uint32_t)get_le(p + 20, 4);
    h->job_id = get_le(p + 24, 8);
    if (h->version != COSMOS_TRACE_VERSION || h->header_bytes != COSMOS_TRACE_HEADER_BYTES ||
        h->record_bytes != COSMOS_TRACE_RECORD_BYTES) {
        LOG(LOG_ERROR, "cosmos trace %s: version %u with %u-byte header and %u-byte records; "
            "this reader knows version %d (%d, %d)", path, h->version, h->header_bytes,
            h->record_bytes, COSMOS_TRACE_VERSION, COSMOS_TRACE_HEADER_BYTES,
            COSMOS_TRACE_RECORD_BYTES);
        return SHOAL_EINVAL;
    }
    if (h->nranks == 0 || h->rank >= h->nranks) {
        LOG(LOG_ERROR, "cosmos trace %s: rank %u of %u in its header", path, h->rank, h->nranks);
        return SHOAL_EINVAL;
    }
    return SHOAL_OK;
}

int cosmos_trace_open_read(const char *path, struct cosmos_trace_r **r,
                           struct cosmos_trace_hdr *h)
{
    if (!path || !r || !h)
        return SHOAL_EINVAL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        LOG(LOG_ERROR, "cosmos trace %s: cannot open it: %s", path, strerror(errno));
        return SHOAL_ESYS;
    }
    unsigned char buf[COSMOS_TRACE_HEADER_BYTES];
    size_t got = fread(buf, 1, sizeof buf, f);
    int rc = hdr_check(path, buf, got, h);
    struct cosmos_trace_r *t = rc == SHOAL_OK ? calloc(1, sizeof *t) : NULL;
    char *copy = t ? strdup(path) : NULL;
    if (!copy) {
        free(t);
        fclose(f);
        return rc == SHOAL_OK ? SHOAL_ENOMEM : rc;
    }
    t->f = f;
    t->path = copy;
    t->offset = COSMOS_TRACE_HEADER_BYTES;
    *r = t;
    return SHOAL_OK;
}

/* A field no writer of this version produces: the file is corrupt. */
static int rec_valid(const struct cosmos_rec *r)
{
    if (r->cause > COSMOS_CAUSE_OTHER)
        return 0;
    if (r->role == COSMOS_ROLE_MARKER)
        return r->type == COSMOS_MARK_BARRIER || r->type == COSMOS_MARK_ITERATION;
    return r->role <= COSMOS_ROLE_HOME && r->type > 0 && r->type < COSMOS_TYPE_COUNT;
}

int cosmos_trace_next(struct cosmos_trace_r *r, struct cosmos_rec *out)
{
    unsigned char buf[COSMOS_TRACE_RECORD_BYTES];
    size_t got = fread(buf, 1, sizeof buf, r->f);
    if (got == 0 && feof(r->f))
        return 0;
    if (ferror(r->f)) {
        LOG(LOG_ERROR, "cosmos trace %s: read failed at offset %llu: %s", r->path,
            (unsigned long long)r->offset, strerror(errno));
        return SHOAL_ESYS;
    }
    if (got < sizeof buf) {
        LOG(LOG_ERROR, "cosmos trace %s: truncated record at offset %llu (%zu of %d bytes)",
            r->path, (unsigned long long)r->offset, got, COSMOS_TRACE_RECORD_BYTES);
        return SHOAL_EINVAL;
    }
    rec_unpack(buf, out);
    if (!rec_valid(out)) {
        LOG(LOG_ERROR, "cosmos trace %s: corrupt record at offset %llu (role %u, type %u, "
            "cause %u)", r->path, (unsigned long long)r->offset, out->role, out->type, out->cause);
        return SHOAL_EINVAL;
    }
    r->offset += COSMOS_TRACE_RECORD_BYTES;
    return 1;
}

void cosmos_trace_close_read(struct cosmos_trace_r *r)
{
    if (!r)
        return;
    fclose(r->f);
    free(r->path);
    free(r);
}
