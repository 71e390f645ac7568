/* The launch channel between the head shoalrun and the agent it starts on
 * each host: framed messages over the remote shell's stdin and stdout.
 * docs/BOOT.md ("Launch channel") is the specification.  The two ends may
 * be different machines, so every field is little-endian, written and read
 * byte by byte here. */
#ifndef SHOALRUN_CHAN_H
#define SHOALRUN_CHAN_H

#include <stddef.h>
#include <stdint.h>

#define CHAN_MAGIC 0x48434853u /* the bytes "SHCH" */
#define CHAN_VERSION 2 /* 2: HANG */
#define CHAN_HDR 12
/* Bounds what a reader allocates for one frame (the job description with
 * its argv and environment is the only big one). */
#define CHAN_MAX_PAYLOAD (4u << 20)

enum chan_type {
    /* head -> agent */
    CHAN_JOB = 1,        /* the job description, first message */
    CHAN_GATHERED = 2,   /* part of an allgather result */
    CHAN_EXCHANGED = 3,  /* every rank joined the descriptor exchange */
    CHAN_FAILED = 4,     /* the job's failure record */
    CHAN_SIGNAL = 5,     /* signal every rank still running */
    CHAN_FLOW = 6,       /* which output streams to hold back */
    /* agent -> head */
    CHAN_EVENT = 16,     /* something happened to a rank */
    CHAN_GATHER = 17,    /* part of a rank's allgather contribution */
    CHAN_ABORT = 18,     /* a rank aborted, with its text */
    CHAN_OUTPUT = 19,    /* lines a rank wrote */
    CHAN_REPORT = 20,    /* the agent's own verdict of a failure */
    CHAN_HANG = 21,      /* a rank's hang report (struct boot_hang) */
};

enum chan_event {
    CHAN_EV_STARTED = 1, /* value: pid of the forked rank */
    CHAN_EV_HELLO = 2,   /* the rank joined */
    CHAN_EV_FD = 3,      /* the rank entered boot_exchange_fd */
    CHAN_EV_FINALIZE = 4,
    CHAN_EV_EXIT = 5,    /* value: its waitpid status */
};

/* A message being built: chan_begin, the fields, chan_end. */
struct chan_buf {
    unsigned char *p;
    size_t n, cap;
    int oom;
};

void chan_begin(struct chan_buf *b, enum chan_type type);
void chan_u16(struct chan_buf *b, uint16_t v);
void chan_u32(struct chan_buf *b, uint32_t v);
void chan_u64(struct chan_buf *b, uint64_t v);
void chan_bytes(struct chan_buf *b, const void *p, size_t n);
void chan_str(struct chan_buf *b, const char *s); /* with its NUL */
/* Fills in the payload length; returns 0, or -1 when out of memory or
 * over CHAN_MAX_PAYLOAD. */
int chan_end(struct chan_buf *b);

/* A received payload being read field by field.  Reading past its end
 * sets bad and yields zeros. */
struct chan_reader {
    const unsigned char *p;
    size_t n, off;
    int bad;
};

uint16_t chan_get_u16(struct chan_reader *m);
uint32_t chan_get_u32(struct chan_reader *m);
uint64_t chan_get_u64(struct chan_reader *m);
const void *chan_get_bytes(struct chan_reader *m, size_t n);
const char *chan_get_str(struct chan_reader *m); /* NUL-terminated in the payload */
/* The rest of the payload; *n its length. */
const void *chan_get_rest(struct chan_reader *m, size_t *n);
/* Non-zero when the payload was read exactly to its end. */
int chan_done(const struct chan_reader *m);

/* Splits the next frame off buf[0, n): returns its size (header and
 * payload) with its type and payload, 0 while it is incomplete, -1 with
 * *why for a malformed header. */
long chan_frame(const unsigned char *buf, size_t n, uint16_t *type, struct chan_reader *payload,
                const char **why);

#endif
