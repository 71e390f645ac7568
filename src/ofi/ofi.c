/* The libfabric message transport (ofi/ofi.h, docs/OFI.md).
 *
 * One FI_EP_RDM endpoint per rank.  The provider delivers reliably and in
 * order (FI_ORDER_SAS is required); what this file adds is flow control.
 * Each message travels with a tag naming its channel and its sender, and
 * is received into a buffer of that channel's pool: requests, replies and
 * credit returns never share a buffer, so a reply never waits for a
 * request buffer (the deadlock-freedom argument of transport.h).
 *
 * Credits: a sender may have `credits` messages per (peer, channel) that
 * the receiver has not freed; the receiver posts that many buffers per
 * peer and channel.  Every message begins with the sender's running counts
 * of the messages it freed from the destination on each channel; when a
 * receiver owes `threshold` (half the credits) on a channel and has had no
 * message to carry them, it sends a control message of only those counts.
 * A control message always brings at least `threshold` new credits of one
 * channel, so at most credits / threshold = 2 per channel and peer are
 * unread at a time: that is the size of the control pool, which thus
 * needs no credits of its own. */
#include "ofi/ofi_int.h"
#include "ofi/ofi_rma.h"
#include "boot/boot.h"
#include "util/util.h"
#include "shoal.h"

#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ofi_state ofi = {.wait_fd = -1};

static uint64_t ofi_tag(enum ofi_chan ch, uint32_t rank)
{
    return (uint64_t)ch << 32 | rank;
}

/* ---- start-up ----------------------------------------------------------- */

/* What this transport asks of a provider: capabilities only, no names.
 * want: OFI_WANT_MSG, and one-sided commands (_RMA), and atomics (_AMO). */
enum ofi_want { OFI_WANT_MSG, OFI_WANT_RMA, OFI_WANT_AMO };
static int ofi_getinfo(struct fi_info **out, enum ofi_want want)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints)
        return -FI_ENOMEM;
    int rma = want >= OFI_WANT_RMA;
    hints->caps = FI_TAGGED | (rma ? FI_RMA : 0) | (want == OFI_WANT_AMO ? FI_ATOMIC : 0);
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
    hints->domain_attr->av_type = FI_AV_TABLE;
    /* in order per (peer, channel); a message sent after a write arrives
     * after its data (remote completion of one-sided commands) */
    hints->tx_attr->msg_order = FI_ORDER_SAS | (rma ? FI_ORDER_SAW : 0);
    hints->rx_attr->msg_order = hints->tx_attr->msg_order;
    int rc = fi_getinfo(OFI_API, NULL, NULL, 0, hints, out);
    fi_freeinfo(hints);
    return rc;
}

int ofi_usable(void)
{
    struct fi_info *info = NULL;
    int rc = ofi_getinfo(&info, OFI_WANT_MSG);
    fi_freeinfo(info);
    return rc == 0;
}

int ofi_failed(const char *what, int rc)
{
    LOG(LOG_ERROR, "ofi: %s failed: %s", what, fi_strerror(rc < 0 ? -rc : rc));
    return SHOAL_ESYS;
}

/* With SHOAL_NET_WAIT=block, a completion queue with a descriptor to
 * sleep on where the provider has one; otherwise, or without one, none
 * and wait() naps.  The descriptor is not free: the provider signals it on
 * every completion (tcp;ofi_rxm: 8-byte half round trip 4.7 us against
 * 4.2 us without). */
static int ofi_open_cq(size_t size)
{
    struct fi_cq_attr attr = {.size = size, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    int block = strcmp(util_config_str(CFG_NET_WAIT), "block") == 0;
    if (block && fi_cq_open(ofi.domain, &attr, &ofi.cq, NULL) == 0) {
        if (fi_control(&ofi.cq->fid, FI_GETWAIT, &ofi.wait_fd) == 0)
            return SHOAL_OK;
        fi_close(&ofi.cq->fid);
    }
    ofi.wait_fd = -1;
    attr.wait_obj = FI_WAIT_NONE;
    int rc = fi_cq_open(ofi.domain, &attr, &ofi.cq, NULL);
    return rc ? ofi_failed("fi_cq_open", rc) : SHOAL_OK;
}

/* Native one-sided commands and atomics where the provider has them, else
 * one-sided commands only (tcp;ofi_rxm with FI_ATOMIC no longer orders
 * sends after writes), else messages only. */
static int ofi_open(size_t cq_size)
{
    int rc = -FI_ENODATA;
    for (int want = OFI_WANT_AMO; rc && want >= OFI_WANT_MSG; want--)
        if ((rc = ofi_getinfo(&ofi.info, (enum ofi_want)want)) == 0)
            ofi.rma = want >= OFI_WANT_RMA;
    if (rc) {
        LOG(LOG_ERROR, "ofi: no libfabric provider offers a reliable datagram endpoint with tagged, ordered "
            "messages (FI_PROVIDER=%s): %s", getenv("FI_PROVIDER") ? getenv("FI_PROVIDER") : "unset",
            fi_strerror(-rc));
        ofi.info = NULL;
        return SHOAL_EINVAL;
    }
    if ((rc = fi_fabric(ofi.info->fabric_attr, &ofi.fabric, NULL)))
        return ofi_failed("fi_fabric", rc);
    if ((rc = fi_domain(ofi.fabric, ofi.info, &ofi.domain, NULL)))
        return ofi_failed("fi_domain", rc);
    if ((rc = ofi_open_cq(cq_size)))
        return rc;
    struct fi_av_attr av = {.type = FI_AV_TABLE, .count = (size_t)ofi.nranks};
    if ((rc = fi_av_open(ofi.domain, &av, &ofi.av, NULL)))
        return ofi_failed("fi_av_open", rc);
    if ((rc = fi_endpoint(ofi.domain, ofi.info, &ofi.ep, NULL)))
        return ofi_failed("fi_endpoint", rc);
    if ((rc = fi_ep_bind(ofi.ep, &ofi.cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(ofi.ep, &ofi.av->fid, 0)))
        return ofi_failed("fi_ep_bind", rc);
    if ((rc = fi_enable(ofi.ep)))
        return ofi_failed("fi_enable", rc);
    return SHOAL_OK;
}

/* Credits per (peer, channel): as many as the provider's receive queue
 * holds for every served peer, at most OFI_CREDITS_MAX. */
static int ofi_size_credits(uint32_t nserved)
{
    size_t rx = ofi.info->rx_attr->size;
    size_t per_peer = nserved ? rx / nserved : rx;
    size_t c = per_peer > OFI_CTL_PER_PEER ? (per_peer - OFI_CTL_PER_PEER) / 2 : 0;
    if (c < OFI_CREDITS_MIN) {
        LOG(LOG_ERROR, "ofi: the provider's receive queue holds %zu buffers, fewer than the %u each of %u "
            "peers needs", rx, 2 * OFI_CREDITS_MIN + OFI_CTL_PER_PEER, nserved);
        return SHOAL_ENOMEM;
    }
    ofi.credits = c < OFI_CREDITS_MAX ? (uint32_t)c : OFI_CREDITS_MAX;
    ofi.threshold = (ofi.credits + 1) / 2;
    return SHOAL_OK;
}

/* Buffers start 64 bytes into their stride less the header, so the
 * payload is 64-byte aligned as the AM layer expects. */
static size_t ofi_stride(size_t cap)
{
    return util_round_up(64 + cap, 64);
}

static int ofi_alloc_pools(uint32_t nserved)
{
    size_t msg = OFI_HDR + ofi.max_payload;
    uint32_t tx = nserved * ofi.credits < OFI_TX_MAX ? nserved * ofi.credits : OFI_TX_MAX;
    uint32_t ctl_tx = nserved * OFI_CTL_PER_PEER < OFI_TX_MAX ? nserved * OFI_CTL_PER_PEER : OFI_TX_MAX;
    const uint32_t n[OFI_POOLS] = {tx, tx, ctl_tx, nserved * ofi.credits, nserved * ofi.credits,
                                   nserved * OFI_CTL_PER_PEER, ofi.rma ? OFI_RMA_SLOTS : 0};
    size_t bytes = 0;
    for (int p = 0; p < OFI_POOLS; p++) {
        ofi.pool[p].n = n[p];
        ofi.pool[p].cap = p == OFI_TX + OFI_CTL || p == OFI_RX + OFI_CTL ? OFI_HDR : msg;
        bytes += (size_t)n[p] * ofi_stride(ofi.pool[p].cap);
    }
    ofi.mem_bytes = util_round_up(bytes ? bytes : 1, 4096);
    if (!(ofi.mem = aligned_alloc(4096, ofi.mem_bytes)))
        return SHOAL_ENOMEM;
    char *at = ofi.mem;
    for (int p = 0; p < OFI_POOLS; p++) {
        struct ofi_pool *pl = &ofi.pool[p];
        pl->slots = calloc(pl->n ? pl->n : 1, sizeof *pl->slots);
        pl->free = calloc(pl->n ? pl->n : 1, sizeof *pl->free);
        if (!pl->slots || !pl->free)
            return SHOAL_ENOMEM;
        for (uint32_t i = 0; i < pl->n; i++) {
            pl->slots[i] = (struct ofi_slot){.buf = at + 64 - OFI_HDR, .pool = (uint8_t)p};
            at += ofi_stride(pl->cap);
            if (p < OFI_RX || p == OFI_RMA)
                pl->free[pl->nfree++] = &pl->slots[i];
        }
    }
    for (int ch = 0; ch < 2; ch++) {
        ofi.fifo[ch].cap = ofi.pool[OFI_RX + ch].n ? ofi.pool[OFI_RX + ch].n : 1;
        if (!(ofi.fifo[ch].q = calloc(ofi.fifo[ch].cap, sizeof *ofi.fifo[ch].q)))
            return SHOAL_ENOMEM;
    }
    uint32_t nrx = n[OFI_RX + OFI_REQ] + n[OFI_RX + OFI_REP] + n[OFI_RX + OFI_CTL];
    ofi.repost = calloc(nrx ? nrx : 1, sizeof *ofi.repost);
    ofi.ctl_due = calloc((size_t)ofi.nranks, sizeof *ofi.ctl_due);
    return ofi.repost && ofi.ctl_due ? SHOAL_OK : SHOAL_ENOMEM;
}

/* Registers the buffers when the provider needs local registration
 * (FI_MR_LOCAL), bound to the endpoint where it says so (FI_MR_ENDPOINT). */
static int ofi_register(void)
{
    uint64_t mode = ofi.info->domain_attr->mr_mode;
    if (!(mode & FI_MR_LOCAL))
        return SHOAL_OK;
    int rc = fi_mr_reg(ofi.domain, ofi.mem, ofi.mem_bytes, FI_SEND | FI_RECV | (ofi.rma ? FI_READ | FI_WRITE : 0),
                       0, 1, 0, &ofi.mr, NULL);
    if (rc)
        return ofi_failed("fi_mr_reg", rc);
    if ((mode & FI_MR_ENDPOINT) &&
        ((rc = fi_mr_bind(ofi.mr, &ofi.ep->fid, 0)) || (rc = fi_mr_enable(ofi.mr))))
        return ofi_failed("binding the buffers' registration to the endpoint", rc);
    ofi.desc = fi_mr_desc(ofi.mr);
    return SHOAL_OK;
}

static void ofi_post_recv(struct ofi_slot *s)
{
    enum ofi_chan ch = (enum ofi_chan)(s->pool - OFI_RX);
    ssize_t rc = fi_trecv(ofi.ep, s->buf, ofi.pool[s->pool].cap, ofi.desc, FI_ADDR_UNSPEC,
                          ofi_tag(ch, 0), 0xffffffffull, &s->ctx);
    if (rc == -FI_EAGAIN)
        ofi.repost[ofi.nrepost++] = s; /* posted again at the next poll */
    else if (rc)
        util_fatal("ofi: posting a receive buffer failed: %s", fi_strerror((int)-rc));
}

/* Endpoint names differ in length between providers: the lengths first,
 * then every name padded to the longest.  A rank that failed to open
 * publishes length 0, so all fail alike instead of waiting for it. */
static int ofi_exchange_names(int opened, const uint8_t *serves)
{
    char name[FI_NAME_MAX * 4];
    size_t len = sizeof name;
    if (opened && fi_getname(&ofi.ep->fid, name, &len) != 0)
        opened = 0;
    uint32_t mine = opened ? (uint32_t)len : 0, longest = 0;
    uint32_t *lens = calloc((size_t)ofi.nranks, sizeof *lens);
    if (!lens)
        util_fatal("out of memory for %d endpoint name lengths", ofi.nranks);
    int rc = boot_allgather(&mine, sizeof mine, lens);
    for (int r = 0; rc == SHOAL_OK && r < ofi.nranks; r++) {
        if (!lens[r]) {
            LOG(LOG_ERROR, "ofi: rank %d could not open its libfabric endpoint", r);
            rc = SHOAL_EBOOT;
        }
        longest = lens[r] > longest ? lens[r] : longest;
    }
    char *names = rc ? NULL : calloc((size_t)ofi.nranks + 1, longest);
    if (!rc && !names)
        util_fatal("out of memory for %d endpoint names", ofi.nranks);
    if (!rc) {
        memcpy(names + (size_t)ofi.nranks * longest, name, mine);
        rc = boot_allgather(names + (size_t)ofi.nranks * longest, longest, names);
    }
    for (int r = 0; rc == SHOAL_OK && r < ofi.nranks; r++) {
        if (!serves[r])
            continue;
        int got = fi_av_insert(ofi.av, names + (size_t)r * longest, 1, &ofi.peers[r].addr, 0, NULL);
        if (got != 1) {
            LOG(LOG_ERROR, "ofi: the address of rank %d was refused (fi_av_insert: %d)", r, got);
            rc = SHOAL_EBOOT;
        }
    }
    free(names);
    free(lens);
    return rc;
}

static int ofi_setup(const struct tp_init *in)
{
    uint32_t nserved = 0;
    for (int r = 0; r < in->nranks; r++) {
        ofi.peers[r].served = in->serves[r] && r != in->rank;
        nserved += ofi.peers[r].served;
    }
    /* the completion queue holds every operation that can be outstanding */
    size_t cq = (size_t)nserved * (2 * OFI_CREDITS_MAX + OFI_CTL_PER_PEER) + 3 * OFI_TX_MAX + OFI_RMA_SLOTS;
    int rc = ofi_open(cq);
    if (rc)
        return rc;
    size_t limit = ofi.info->ep_attr->max_msg_size;
    ofi.max_payload = (limit < OFI_MSG_BYTES ? limit : OFI_MSG_BYTES) - OFI_HDR;
    if ((rc = ofi_size_credits(nserved)) || (rc = ofi_alloc_pools(nserved)) || (rc = ofi_register()))
        return rc;
    /* receive buffers go up before the names do, so no first message
     * arrives unexpected */
    for (int ch = 0; ch < OFI_CHANS; ch++)
        for (uint32_t i = 0; i < ofi.pool[OFI_RX + ch].n; i++)
            ofi_post_recv(&ofi.pool[OFI_RX + ch].slots[i]);
    return SHOAL_OK;
}

static int ofi_init(const struct tp_init *in)
{
    ofi.rank = in->rank;
    ofi.nranks = in->nranks;
    ofi.deliver = in->deliver;
    ofi.closing = 0;
    if (!(ofi.peers = calloc((size_t)in->nranks, sizeof *ofi.peers)))
        return SHOAL_ENOMEM;
    int rc = ofi_setup(in);
    int xrc = ofi_exchange_names(rc == SHOAL_OK, in->serves);
    if (rc || xrc)
        return rc ? rc : xrc;
    if (in->rank == 0)
        LOG(LOG_INFO, "ofi: provider %s, %zu-byte messages, %u credits per peer and channel, waits %s",
            ofi.info->fabric_attr->prov_name, ofi.max_payload, ofi.credits,
            ofi.wait_fd >= 0 ? "on the completion queue's descriptor" : "by napping");
    return SHOAL_OK;
}

/* ---- sending ------------------------------------------------------------ */

static uint32_t ofi_credits(const struct ofi_peer *p, int ch)
{
    return ofi.credits - (p->sent[ch] - p->acked[ch]);
}

/* Posts a filled send slot: the header carries what this rank freed of
 * dest's messages, which then need no control message. */
static int ofi_post_send(struct ofi_slot *s, int dest, enum ofi_chan ch, size_t len)
{
    struct ofi_peer *p = &ofi.peers[dest];
    struct ofi_hdr h = {.freed = {p->freed[0], p->freed[1]}};
    memcpy(s->buf, &h, sizeof h);
    s->peer = (uint32_t)dest;
    ssize_t rc = fi_tsend(ofi.ep, s->buf, len, ofi.desc, p->addr, ofi_tag(ch, (uint32_t)ofi.rank), &s->ctx);
    if (rc == -FI_EAGAIN)
        return SHOAL_EAGAIN;
    if (rc)
        util_fatal("ofi: sending to rank %d failed: %s", dest, fi_strerror((int)-rc));
    p->told[0] = h.freed[0];
    p->told[1] = h.freed[1];
    ofi.inflight++;
    ofi.st.packets_sent++;
    ofi.st.bytes_sent += len;
    return SHOAL_OK;
}

struct ofi_slot *ofi_slot_take(enum ofi_pool_id pool)
{
    struct ofi_pool *pl = &ofi.pool[pool];
    return pl->nfree ? pl->free[--pl->nfree] : NULL;
}

void ofi_slot_give(struct ofi_slot *s)
{
    struct ofi_pool *pl = &ofi.pool[s->pool];
    pl->free[pl->nfree++] = s;
}

static int ofi_send(int dest, enum tp_channel ch, const void *head, size_t hlen, const void *body, size_t blen)
{
    if (dest < 0 || dest >= ofi.nranks || !ofi.peers[dest].served)
        return SHOAL_ERANK;
    if (hlen + blen > ofi.max_payload)
        return SHOAL_ETOOBIG;
    struct ofi_peer *p = &ofi.peers[dest];
    struct ofi_slot *s;
    if (!ofi_credits(p, ch) || !(s = ofi_slot_take(OFI_TX + (enum ofi_pool_id)ch)))
        return SHOAL_EAGAIN;
    if (hlen)
        memcpy(s->buf + OFI_HDR, head, hlen);
    if (blen)
        memcpy(s->buf + OFI_HDR + hlen, body, blen);
    int rc = ofi_post_send(s, dest, (enum ofi_chan)ch, OFI_HDR + hlen + blen);
    if (rc) {
        ofi_slot_give(s);
        return rc;
    }
    p->sent[ch]++;
    return SHOAL_OK;
}

static uint32_t ofi_room(int dest, enum tp_channel ch)
{
    if (dest < 0 || dest >= ofi.nranks || !ofi.peers[dest].served)
        return 0;
    uint32_t c = ofi_credits(&ofi.peers[dest], ch), tx = ofi.pool[OFI_TX + ch].nfree;
    return c < tx ? c : tx;
}

/* Sends the control messages owed; a peer whose turn finds no free slot
 * or no room in the provider waits for the next poll. */
static void ofi_send_ctl(void)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < ofi.nctl_due; i++) {
        uint32_t r = ofi.ctl_due[i];
        struct ofi_peer *p = &ofi.peers[r];
        if (p->freed[0] - p->told[0] < ofi.threshold && p->freed[1] - p->told[1] < ofi.threshold) {
            p->ctl_due = 0; /* a message since carried the counts */
            continue;
        }
        struct ofi_slot *s = ofi_slot_take(OFI_TX + OFI_CTL);
        if (s && ofi_post_send(s, (int)r, OFI_CTL, OFI_HDR) == SHOAL_OK) {
            p->ctl_due = 0;
            continue;
        }
        if (s)
            ofi_slot_give(s);
        ofi.ctl_due[kept++] = r;
    }
    ofi.nctl_due = kept;
}

/* ---- receiving ---------------------------------------------------------- */

/* A message's header: the peer freed this many of this rank's messages. */
static void ofi_take_credits(struct ofi_peer *p, const struct ofi_hdr *h)
{
    for (int ch = 0; ch < 2; ch++)
        if ((int32_t)(h->freed[ch] - p->acked[ch]) > 0)
            p->acked[ch] = h->freed[ch];
}

/* A delivered (or control) message's buffer goes back to its pool, and
 * its sender is owed one more credit. */
static void ofi_release(struct ofi_slot *s, enum ofi_chan ch)
{
    ofi_post_recv(s);
    if (ch == OFI_CTL)
        return;
    struct ofi_peer *p = &ofi.peers[s->peer];
    if (++p->freed[ch] - p->told[ch] >= ofi.threshold && !p->ctl_due) {
        p->ctl_due = 1;
        ofi.ctl_due[ofi.nctl_due++] = s->peer;
    }
}

static void ofi_arrived(struct ofi_slot *s, const struct fi_cq_tagged_entry *e)
{
    enum ofi_chan ch = (enum ofi_chan)(s->pool - OFI_RX);
    uint32_t peer = (uint32_t)e->tag;
    if (peer >= (uint32_t)ofi.nranks || !ofi.peers[peer].served || e->len < OFI_HDR)
        util_fatal("ofi: a message of %zu bytes arrived from rank %u, which this transport does not serve",
                   e->len, peer);
    s->peer = peer;
    s->len = (uint32_t)e->len;
    struct ofi_hdr h;
    memcpy(&h, s->buf, sizeof h);
    ofi_take_credits(&ofi.peers[peer], &h);
    ofi.st.packets_received++;
    ofi.st.bytes_received += e->len;
    if (ch == OFI_CTL) {
        ofi_release(s, ch);
        return;
    }
    struct ofi_fifo *f = &ofi.fifo[ch];
    f->q[f->tail++ % f->cap] = s; /* never full: credits bound what arrives */
}

static void ofi_completed(const struct fi_cq_tagged_entry *e)
{
    struct ofi_slot *s = e->op_context;
    if (s->pool >= OFI_RX && s->pool < OFI_RMA) {
        ofi_arrived(s, e);
        return;
    }
    ofi.inflight--;
    if (s->pool == OFI_RMA)
        ofi_rma_completed(s, SHOAL_OK);
    else
        ofi_slot_give(s);
}

/* An error completion: a send names its destination, a receive its
 * sender.  At fini peers close in any order, so errors are expected; a
 * control message's failure only means its peer is gone; a one-sided
 * command the target's registration refuses completes with SHOAL_EACCES. */
static void ofi_cq_error(void)
{
    struct fi_cq_err_entry e = {0};
    if (fi_cq_readerr(ofi.cq, &e, 0) != 1)
        return;
    struct ofi_slot *s = e.op_context;
    char why[256];
    const char *msg = fi_cq_strerror(ofi.cq, e.prov_errno, e.err_data, why, sizeof why);
    int send = s && (s->pool < OFI_RX || s->pool == OFI_RMA);
    if (send)
        ofi.inflight--;
    if (send && s->pool == OFI_RMA && (e.err == FI_EACCES || e.err == FI_EINVAL || e.err == FI_EKEYREJECTED)) {
        ofi_rma_completed(s, SHOAL_EACCES);
        return;
    }
    if (send && s->pool == OFI_RMA)
        ofi_rma_completed(s, SHOAL_EPEERDEAD);
    else if (send)
        ofi_slot_give(s);
    if (ofi.closing || (send && s->pool == OFI_TX + OFI_CTL) || e.err == FI_ECANCELED) {
        LOG(LOG_DEBUG, "ofi: an operation with rank %u failed: %s", s ? s->peer : 0u, msg ? msg : "");
        return;
    }
    if (send)
        util_peer_fatal((int)s->peer, "ofi: a message to rank %u failed: %s (%s)", s->peer,
                        fi_strerror(e.err), msg ? msg : "");
    util_peer_fatal((int)(uint32_t)e.tag, "ofi: a message from rank %u failed to arrive: %s (%s)",
                    (uint32_t)e.tag, fi_strerror(e.err), msg ? msg : "");
}

/* Reads the completion queue (which also drives the provider's progress)
 * and queues what arrived; returns the completions read. */
static unsigned ofi_progress(void)
{
    unsigned events = 0;
    for (;;) {
        struct fi_cq_tagged_entry e[OFI_BATCH];
        ssize_t n = fi_cq_read(ofi.cq, e, OFI_BATCH);
        if (n == -FI_EAVAIL) {
            ofi_cq_error();
            events++;
            continue;
        }
        if (n <= 0) {
            if (n != -FI_EAGAIN && n != 0)
                util_fatal("ofi: reading the completion queue failed: %s", fi_strerror((int)-n));
            break;
        }
        for (ssize_t i = 0; i < n; i++)
            ofi_completed(&e[i]);
        events += (unsigned)n;
        if (n < OFI_BATCH)
            break;
    }
    uint32_t again = ofi.nrepost;
    ofi.nrepost = 0;
    for (uint32_t i = 0; i < again; i++)
        ofi_post_recv(ofi.repost[i]);
    return events;
}

/* Delivers the queued messages of one channel in order.  A request's
 * handler may poll again (a reply that waits for room), which delivers
 * replies only, so each message leaves the queue before it runs. */
static unsigned ofi_deliver(enum ofi_chan ch)
{
    struct ofi_fifo *f = &ofi.fifo[ch];
    unsigned n = 0;
    while (f->head != f->tail) {
        struct ofi_slot *s = f->q[f->head++ % f->cap];
        struct tp_msg m = {.peer = s->peer, .channel = (enum tp_channel)ch,
                           .data = s->buf + OFI_HDR, .len = s->len - OFI_HDR};
        ofi.deliver(&m);
        ofi_release(s, ch);
        n++;
    }
    return n;
}

static unsigned ofi_poll(int replies_only)
{
    unsigned n = ofi_progress();
    n += ofi_deliver(OFI_REP);
    if (!replies_only)
        n += ofi_deliver(OFI_REQ);
    if (ofi.nctl_due)
        ofi_send_ctl();
    return n;
}

/* Sends are posted as they come; a flush drives the provider, which with
 * manual progress moves data only while its queue is read. */
static void ofi_flush(void)
{
    ofi_progress();
}

static void ofi_wait(uint64_t max_ns)
{
    struct fid *f = ofi.cq ? &ofi.cq->fid : NULL;
    if (ofi.wait_fd < 0 || fi_trywait(ofi.fabric, &f, 1) != FI_SUCCESS) {
        /* no wait object, or completions are already there */
        if (ofi.wait_fd < 0) {
            uint64_t ns = max_ns < OFI_NAP_NS ? max_ns : OFI_NAP_NS;
            nanosleep(&(struct timespec){.tv_nsec = (long)ns}, NULL);
        }
        return;
    }
    struct pollfd pfd = {.fd = ofi.wait_fd, .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(max_ns / 1000000000ull), .tv_nsec = (long)(max_ns % 1000000000ull)};
    ppoll(&pfd, 1, &ts, NULL);
}

/* ---- the rest ----------------------------------------------------------- */

static int ofi_settled(void)
{
    return ofi.inflight == 0;
}

static size_t ofi_max_payload(void)
{
    return ofi.max_payload;
}

static const char *ofi_describe(char *buf, size_t cap)
{
    char name[FI_NAME_MAX * 4], addr[256] = "?";
    size_t len = sizeof name, alen = sizeof addr;
    if (ofi.ep && fi_getname(&ofi.ep->fid, name, &len) == 0)
        fi_av_straddr(ofi.av, name, addr, &alen);
    snprintf(buf, cap, "ofi %s %s", ofi.info ? ofi.info->fabric_attr->prov_name : "-", addr);
    return buf;
}

static void ofi_stats(struct tp_stats *out)
{
    *out = ofi.st;
}

static void ofi_close(struct fid *f, const char *what)
{
    int rc = f ? fi_close(f) : 0;
    if (rc)
        LOG(LOG_DEBUG, "ofi: closing the %s: %s", what, fi_strerror(-rc));
}

/* Waits (bounded: a peer that closed first may never complete a send)
 * until every send completed, then closes in dependency order. */
static void ofi_fini(void)
{
    ofi.closing = 1;
    uint64_t until = util_now_ns() + OFI_FINI_NS;
    while (ofi.cq && ofi.inflight && util_now_ns() < until)
        ofi_progress();
    if (ofi.inflight)
        LOG(LOG_DEBUG, "ofi: %llu sends had not completed at fini", (unsigned long long)ofi.inflight);
    ofi_close(ofi.ep ? &ofi.ep->fid : NULL, "endpoint");
    ofi_rma_fini();
    ofi_close(ofi.mr ? &ofi.mr->fid : NULL, "memory registration");
    ofi_close(ofi.av ? &ofi.av->fid : NULL, "address vector");
    ofi_close(ofi.cq ? &ofi.cq->fid : NULL, "completion queue");
    ofi_close(ofi.domain ? &ofi.domain->fid : NULL, "domain");
    ofi_close(ofi.fabric ? &ofi.fabric->fid : NULL, "fabric");
    fi_freeinfo(ofi.info);
    for (int p = 0; p < OFI_POOLS; p++) {
        free(ofi.pool[p].slots);
        free(ofi.pool[p].free);
    }
    for (int ch = 0; ch < 2; ch++)
        free(ofi.fifo[ch].q);
    free(ofi.repost);
    free(ofi.ctl_due);
    free(ofi.peers);
    free(ofi.mem);
    memset(&ofi, 0, sizeof ofi);
    ofi.wait_fd = -1;
}

const struct tp_ops ofi_transport = {
    .init = ofi_init,
    .fini = ofi_fini,
    .settled = ofi_settled,
    .max_payload = ofi_max_payload,
    .send = ofi_send,
    .room = ofi_room,
    .flush = ofi_flush,
    .poll = ofi_poll,
    .wait = ofi_wait,
    .describe = ofi_describe,
    .stats = ofi_stats,
    .rma = &ofi_rma,
    /* no broadcast: RDM endpoints have none, so am sends to each peer */
};
