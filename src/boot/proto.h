/* Wire format of the socket between shoalrun and each rank; shared by the
 * rank side (boot.c) and the launcher.  docs/BOOT.md is the specification.
 * Both ends run on one host, so every field is in host byte order. */
#ifndef SHOAL_BOOT_PROTO_H
#define SHOAL_BOOT_PROTO_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#define BOOT_PROTO_MAGIC 0x54424853u     /* "SHBT" read as little-endian bytes */
#define BOOT_PROTO_VERSION 2 /* 2: HANG */
/* Payload cap per message: well below the default socket buffer, so one
 * message always fits; bigger data travels as consecutive messages. */
#define BOOT_PROTO_MAX_PAYLOAD 65536u
/* Descriptors per message, under the kernel's SCM_MAX_FD (253). */
#define BOOT_PROTO_MAX_FDS 250

enum boot_msg_type {
    BOOT_MSG_HELLO = 1,    /* rank -> launcher: joined (struct boot_hello) */
    BOOT_MSG_FD = 2,       /* rank -> launcher: one descriptor to exchange */
    BOOT_MSG_FDS = 3,      /* launcher -> rank: descriptors from rank arg on */
    BOOT_MSG_GATHER = 4,   /* rank -> launcher: part of its contribution */
    BOOT_MSG_GATHERED = 5, /* launcher -> rank: part of the gathered result */
    BOOT_MSG_ABORT = 6,    /* rank -> launcher: aborting with code arg, text */
    BOOT_MSG_FINALIZE = 7, /* rank -> launcher: leaving normally */
    BOOT_MSG_HANG = 8,     /* rank -> launcher: what it waits for (struct boot_hang);
                            * arg BOOT_HANG_* says why it reported */
};

enum { BOOT_HANG_ASKED = 0, BOOT_HANG_TIMER = 1 };
/* HELLO's arg: flags. */
#define BOOT_HELLO_HANG 1u /* SIGQUIT makes this rank send a HANG report (else it may dump core) */

struct boot_msg_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t len;          /* payload bytes after this header */
    uint32_t arg;          /* meaning depends on type */
};

struct boot_hello {
    uint64_t job_id;
    uint32_t rank;
    uint32_t pid;
};

/* A waiting rank's report, for the launcher's job-wide summary. */
struct boot_hang {
    int32_t waits_for; /* the rank its innermost wait waits for; -1 not known */
    uint32_t reserved; /* 0 */
    char call[56];     /* the blocking call it is in, NUL-terminated */
    char what[192];    /* what that call waits for, one line, NUL-terminated */
};

/* The layouts are the protocol: docs/BOOT.md gives them byte by byte. */
_Static_assert(sizeof(struct boot_msg_hdr) == 16, "boot message header is 16 bytes");
_Static_assert(sizeof(struct boot_hello) == 16, "HELLO payload is 16 bytes");
_Static_assert(sizeof(struct boot_hang) == 256, "HANG payload is 256 bytes");

/* Sends one message with nfds descriptors attached.  Returns sendmsg's
 * result (-1 with errno on failure). */
ssize_t boot_proto_send(int sock, int flags, enum boot_msg_type type, uint32_t arg,
                        const void *payload, uint32_t len, const int *fds, int nfds);

/* Receives one message: the payload lands in buf (at most cap bytes), up to
 * BOOT_PROTO_MAX_FDS descriptors (close-on-exec) in fds with their count in
 * *nfds.  Returns 1 for a message, 0 at end of stream, -1 with errno:
 * EPROTO for a malformed or foreign message, EMSGSIZE when the payload
 * exceeds cap, EMFILE when descriptors were dropped for lack of room.  On
 * error no descriptor stays open. */
int boot_proto_recv(int sock, int flags, struct boot_msg_hdr *h, void *buf, size_t cap,
                    int *fds, int *nfds);

#endif
