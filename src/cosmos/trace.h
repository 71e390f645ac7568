/* cosmos layer: trace files of coherence messages (docs/COSMOS_TRACE.md
 * describes the format byte by byte).  One file per rank,
 * DIR/cosmos-<job id hex>-r<rank>.trace, written by the DSM observer when
 * SHOAL_COSMOS_TRACE=DIR and read by the replay tool.  Knows nothing of
 * CRL: a block is an opaque 64-bit id. */
#ifndef SHOAL_COSMOS_TRACE_H
#define SHOAL_COSMOS_TRACE_H

#include <stdint.h>

/* The thesis's message types (Table 6.1), as 4 bits. */
enum cosmos_type {
    COSMOS_GET_RO_REQ = 1, COSMOS_GET_RW_REQ, COSMOS_UPGRADE_REQ, /* remote -> home */
    COSMOS_INVAL_RO_RESP, COSMOS_INVAL_RW_RESP, COSMOS_DOWNGRADE_RESP, COSMOS_FLUSH,
    COSMOS_GET_RO_RESP, COSMOS_GET_RW_RESP, COSMOS_UPGRADE_RESP,  /* home -> remote */
    COSMOS_INVAL_RO_REQ, COSMOS_INVAL_RW_REQ,
    COSMOS_TYPE_COUNT
};
/* "get_ro_request", ... as the thesis writes them; "?" out of range. */
const char *cosmos_type_name(unsigned t);

/* Which side of the protocol received the message (role). */
enum cosmos_role { COSMOS_ROLE_REMOTE = 0, COSMOS_ROLE_HOME = 1, COSMOS_ROLE_MARKER = 2 };
/* A marker record's kind (its type field). */
enum cosmos_marker { COSMOS_MARK_BARRIER = 1, COSMOS_MARK_ITERATION = 2 };
/* The operation at this rank a message belongs to (cause). */
enum cosmos_cause {
    COSMOS_CAUSE_NONE = 0, COSMOS_CAUSE_START_READ, COSMOS_CAUSE_START_WRITE,
    COSMOS_CAUSE_END_READ, COSMOS_CAUSE_END_WRITE, COSMOS_CAUSE_FLUSH, COSMOS_CAUSE_MAP,
    COSMOS_CAUSE_OTHER
};

#define COSMOS_TRACE_VERSION 1
#define COSMOS_TRACE_HEADER_BYTES 64
#define COSMOS_TRACE_RECORD_BYTES 24

struct cosmos_rec {
    uint64_t block;  /* region id */
    uint32_t sender; /* rank the message came from */
    uint8_t role, type, proto, cause;
    uint64_t seq;    /* this rank's receive order from 0; a marker's own count */
};

struct cosmos_trace_hdr {
    uint16_t version, header_bytes, record_bytes;
    uint32_t rank, nranks;
    uint64_t job_id;
};

struct cosmos_trace_w;
struct cosmos_trace_r;

/* Creates DIR/cosmos-<job hex>-r<rank>.trace (truncating an old one) and
 * writes its header.  SHOAL_EINVAL for a bad rank/nranks, SHOAL_ESYS when
 * the file cannot be created (logged with the path and errno). */
int cosmos_trace_open_write(const char *dir, uint64_t job, int rank, int nranks,
                            struct cosmos_trace_w **w);
/* Appends one record to the writer's buffer; a full buffer is written out.
 * A write error is logged once and the trace stops (close reports it). */
void cosmos_trace_put(struct cosmos_trace_w *w, const struct cosmos_rec *r);
/* Writes what is buffered, closes and frees; SHOAL_ESYS if any write failed. */
int cosmos_trace_close(struct cosmos_trace_w *w);

/* Opens a trace and checks its header into *h: SHOAL_ESYS when it cannot be
 * opened, SHOAL_EINVAL for a short header, wrong magic, version or sizes
 * (each logged naming the file). */
int cosmos_trace_open_read(const char *path, struct cosmos_trace_r **r,
                           struct cosmos_trace_hdr *h);
/* 1 with the next record in *out, 0 at the end, SHOAL_EINVAL for a
 * truncated record or a field out of range (logged naming the file and the
 * offset), SHOAL_ESYS for a read error. */
int cosmos_trace_next(struct cosmos_trace_r *r, struct cosmos_rec *out);
void cosmos_trace_close_read(struct cosmos_trace_r *r);

#endif
