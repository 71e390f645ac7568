/* The ofi transport's state, shared by its messages (ofi.c) and its
 * native one-sided commands (ofi_rma.c).  Internal to src/ofi. */
#ifndef SHOAL_OFI_INT_H
#define SHOAL_OFI_INT_H

#include "ofi/ofi.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stddef.h>
#include <stdint.h>

#define OFI_API FI_VERSION(1, 14)
/* A message: the provider's eager limit on verbs and tcp through ofi_rxm
 * (FI_OFI_RXM_BUFFER_SIZE, 16 KiB), so no message pays a rendezvous round
 * trip, and a multiple of udp;ofi_rxd's packets. */
#define OFI_MSG_BYTES 16384u
#define OFI_CREDITS_MAX 16u
#define OFI_CREDITS_MIN 2u
#define OFI_CTL_PER_PEER 4u    /* 2 unread control messages per channel */
#define OFI_TX_MAX 128u        /* send buffers per channel, shared by the peers */
#define OFI_RMA_SLOTS 32u      /* one-sided commands in flight (their bounce buffers) */
#define OFI_NAP_NS 50000ull    /* wait() without a wait object */
#define OFI_FINI_NS 2000000000ull
#define OFI_BATCH 16

enum ofi_chan { OFI_REQ = TP_REQUEST, OFI_REP = TP_REPLY, OFI_CTL, OFI_CHANS };
/* Send pools OFI_TX + channel, receive pools OFI_RX + channel, and the
 * bounce buffers of one-sided commands. */
enum ofi_pool_id { OFI_TX = 0, OFI_RX = OFI_CHANS, OFI_RMA = 2 * OFI_CHANS, OFI_POOLS };

/* What begins every message: the running counts of the destination's
 * messages the sender has freed, per channel (wrapping). */
struct ofi_hdr {
    uint32_t freed[2];
};
#define OFI_HDR sizeof(struct ofi_hdr)

struct tp_rma_req;

struct ofi_slot {
    struct fi_context2 ctx; /* the completion's op_context is the slot */
    char *buf;              /* header, then a payload that starts 64-byte aligned */
    uint32_t peer;          /* send: the destination; receive: the sender, once arrived */
    uint32_t len;           /* receive: bytes arrived; get: bytes to copy out */
    uint8_t pool;           /* enum ofi_pool_id */
    void *out;              /* get, fetching atomic: where the result goes */
    struct tp_rma_req *req;/* one-sided command: its completion */
};

struct ofi_pool {
    struct ofi_slot *slots;
    struct ofi_slot **free; /* send and one-sided pools: the idle slots */
    uint32_t n, nfree;
    size_t cap;             /* bytes a buffer holds */
};

/* Arrived messages of one channel not yet delivered, in arrival order. */
struct ofi_fifo {
    struct ofi_slot **q;
    uint32_t cap, head, tail;
};

struct ofi_peer {
    fi_addr_t addr;
    uint32_t sent[2], acked[2]; /* messages to it, and how many of them it freed */
    uint32_t freed[2], told[2]; /* its messages freed here, and the counts it was last sent */
    uint8_t served, ctl_due;
};

struct ofi_state {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;                   /* of the buffers, when FI_MR_LOCAL */
    int rank, nranks, wait_fd, closing;
    int rma;                      /* the endpoint has FI_RMA | FI_ATOMIC and orders sends after writes */
    tp_deliver_fn deliver;
    uint32_t credits, threshold;
    size_t max_payload;
    struct ofi_peer *peers;
    char *mem;
    size_t mem_bytes;
    struct ofi_pool pool[OFI_POOLS];
    struct ofi_fifo fifo[2];
    struct ofi_slot **repost;     /* receive buffers the provider had no room for yet */
    uint32_t nrepost;
    uint32_t *ctl_due;            /* peers owed a control message */
    uint32_t nctl_due;
    uint64_t inflight;            /* sends and one-sided commands not completed */
    struct tp_stats st;
};
extern struct ofi_state ofi;

/* An idle slot of a send or one-sided pool, or NULL; and back. */
struct ofi_slot *ofi_slot_take(enum ofi_pool_id pool);
void ofi_slot_give(struct ofi_slot *s);
/* Logs "ofi: what failed: ..." and returns SHOAL_ESYS. */
int ofi_failed(const char *what, int rc);

/* ofi_rma.c: a one-sided command's completion (status SHOAL_OK or a
 * SHOAL_E code); its slot goes back to the pool. */
void ofi_rma_completed(struct ofi_slot *s, int status);
/* ofi_rma.c: closes the exposed regions (before the endpoint). */
void ofi_rma_fini(void);

#endif
