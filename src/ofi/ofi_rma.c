/* Native one-sided commands on the ofi transport's endpoint (ofi/ofi_rma.h).
 *
 * Each command goes through a bounce buffer of the transport's registered
 * memory (its one-sided pool), so the provider's FI_MR_LOCAL needs no
 * registration of the caller's memory; the target's region is registered
 * once by expose(), bound to the endpoint under FI_MR_ENDPOINT, and
 * addressed by virtual address under FI_MR_VIRT_ADDR, else by offset. */
#include "ofi/ofi_int.h"
#include "ofi/ofi_rma.h"
#include "boot/boot.h"
#include "util/util.h"
#include "shoal.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdlib.h>
#include <string.h>

#define OFI_RMA_REGIONS 16

/* What each rank publishes of a region. */
struct ofi_remote {
    uint64_t addr;  /* what a command adds its offset to */
    uint64_t key;
    uint64_t len;
    uint64_t ok;    /* 0: this rank's registration failed */
};

static struct {
    struct fid_mr *mr[OFI_RMA_REGIONS];
    struct ofi_remote *remote[OFI_RMA_REGIONS]; /* [rank] */
    uint32_t nregions;
    int atomics;                                /* -1 until asked */
} rr = {.atomics = -1};

static int rma_available(int *atomics)
{
    if (atomics) {
        if (rr.atomics < 0) {
            size_t count = 0, ccount = 0;
            rr.atomics = ofi.rma && (ofi.info->caps & FI_ATOMIC) &&
                         fi_fetch_atomicvalid(ofi.ep, FI_UINT64, FI_SUM, &count) == 0 && count > 0 &&
                         fi_compare_atomicvalid(ofi.ep, FI_UINT64, FI_CSWAP, &ccount) == 0 && ccount > 0;
        }
        *atomics = rr.atomics;
    }
    return ofi.rma;
}

static int rma_autonomous(void)
{
    return ofi.rma && ofi.info->domain_attr->data_progress == FI_PROGRESS_AUTO;
}

static size_t rma_max_bytes(void)
{
    return ofi.rma ? ofi.pool[OFI_RMA].cap : 0;
}

/* This rank's half of expose: *mr and *me, or me->ok = 0 after logging. */
static void rma_register(void *base, size_t len, uint32_t id, struct fid_mr **mr, struct ofi_remote *me)
{
    uint64_t mode = ofi.info->domain_attr->mr_mode;
    *me = (struct ofi_remote){.len = len, .ok = 1};
    if (!len)
        return;
    int rc = fi_mr_reg(ofi.domain, base, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 2 + id, 0, mr, NULL);
    if (!rc && (mode & FI_MR_ENDPOINT) && !(rc = fi_mr_bind(*mr, &ofi.ep->fid, 0)))
        rc = fi_mr_enable(*mr);
    if (rc) {
        ofi_failed("registering memory for one-sided commands", rc);
        if (*mr)
            fi_close(&(*mr)->fid);
        *mr = NULL;
        me->ok = 0;
        return;
    }
    me->key = fi_mr_key(*mr);
    me->addr = mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)base : 0;
}

static int rma_expose(void *base, size_t len, uint32_t *id)
{
    if (!ofi.rma)
        return SHOAL_EINVAL;
    if (rr.nregions == OFI_RMA_REGIONS)
        return SHOAL_ENOMEM; /* on every rank alike: they expose in step */
    uint32_t i = rr.nregions;
    struct fid_mr *mr = NULL;
    struct ofi_remote me;
    rma_register(base, len, i, &mr, &me);
    struct ofi_remote *all = calloc((size_t)ofi.nranks, sizeof *all);
    if (!all)
        util_fatal("out of memory for %d ranks' region keys", ofi.nranks);
    int rc = boot_allgather(&me, sizeof me, all);
    for (int r = 0; rc == SHOAL_OK && r < ofi.nranks; r++) {
        if (!all[r].ok) {
            LOG(LOG_ERROR, "ofi: rank %d could not register its memory for one-sided commands", r);
            rc = SHOAL_ESYS;
        }
    }
    if (rc) {
        if (mr)
            fi_close(&mr->fid);
        free(all);
        return rc;
    }
    rr.mr[i] = mr;
    rr.remote[i] = all;
    rr.nregions++;
    *id = i;
    return SHOAL_OK;
}

/* Checks a command against dest's region; its remote part in *out. */
static int rma_target(int dest, uint32_t id, uint64_t offset, size_t len, const struct ofi_remote **out)
{
    if (!ofi.rma)
        return SHOAL_EINVAL;
    if (dest < 0 || dest >= ofi.nranks || !ofi.peers[dest].served)
        return SHOAL_ERANK;
    if (id >= rr.nregions)
        return SHOAL_ESEGMENT;
    if (len > ofi.pool[OFI_RMA].cap)
        return SHOAL_ETOOBIG;
    const struct ofi_remote *r = &rr.remote[id][dest];
    if (offset > r->len || len > r->len - offset)
        return SHOAL_ERANGE;
    *out = r;
    return SHOAL_OK;
}

static struct ofi_slot *rma_slot(int dest, struct tp_rma_req *req, void *out, size_t len)
{
    struct ofi_slot *s = ofi_slot_take(OFI_RMA);
    if (s)
        *s = (struct ofi_slot){.ctx = {{0}}, .buf = s->buf, .pool = OFI_RMA, .peer = (uint32_t)dest,
                               .req = req, .out = out, .len = (uint32_t)len};
    return s;
}

/* The provider's answer to posting s. */
static int rma_posted(struct ofi_slot *s, ssize_t rc, const char *what)
{
    if (rc == 0) {
        ofi.inflight++;
        return SHOAL_OK;
    }
    ofi_slot_give(s);
    if (rc == -FI_EAGAIN)
        return SHOAL_EAGAIN;
    util_fatal("ofi: a %s to rank %u failed: %s", what, s->peer, fi_strerror((int)-rc));
}

static int rma_put(int dest, uint32_t id, uint64_t offset, const void *src, size_t len, struct tp_rma_req *req)
{
    const struct ofi_remote *r;
    int rc = rma_target(dest, id, offset, len, &r);
    struct ofi_slot *s = rc ? NULL : rma_slot(dest, req, NULL, 0);
    if (rc || !s)
        return rc ? rc : SHOAL_EAGAIN;
    memcpy(s->buf, src, len);
    req->status = SHOAL_PENDING;
    return rma_posted(s, fi_write(ofi.ep, s->buf, len, ofi.desc, ofi.peers[dest].addr, r->addr + offset, r->key,
                                  &s->ctx), "put");
}

static int rma_get(int dest, uint32_t id, uint64_t offset, void *dst, size_t len, struct tp_rma_req *req)
{
    const struct ofi_remote *r;
    int rc = rma_target(dest, id, offset, len, &r);
    struct ofi_slot *s = rc ? NULL : rma_slot(dest, req, dst, len);
    if (rc || !s)
        return rc ? rc : SHOAL_EAGAIN;
    req->status = SHOAL_PENDING;
    return rma_posted(s, fi_read(ofi.ep, s->buf, len, ofi.desc, ofi.peers[dest].addr, r->addr + offset, r->key,
                                 &s->ctx), "get");
}

/* The result lands at the bounce buffer's start, operand and compare
 * after it. */
static int rma_amo(int dest, uint32_t id, uint64_t offset, enum tp_amo op, uint64_t operand, uint64_t compare,
                   uint64_t *old, struct tp_rma_req *req)
{
    int atomics;
    if (!rma_available(&atomics) || !atomics)
        return SHOAL_EINVAL;
    if (offset % 8)
        return SHOAL_EALIGN;
    const struct ofi_remote *r;
    int rc = rma_target(dest, id, offset, 8, &r);
    struct ofi_slot *s = rc ? NULL : rma_slot(dest, req, old, 8);
    if (rc || !s)
        return rc ? rc : SHOAL_EAGAIN;
    uint64_t *w = (uint64_t *)(void *)s->buf;
    w[1] = operand;
    w[2] = compare;
    fi_addr_t to = ofi.peers[dest].addr;
    req->status = SHOAL_PENDING;
    if (op == TP_AMO_FETCH_ADD)
        return rma_posted(s, fi_fetch_atomic(ofi.ep, &w[1], 1, ofi.desc, &w[0], ofi.desc, to, r->addr + offset,
                                             r->key, FI_UINT64, FI_SUM, &s->ctx), "fetch-add");
    return rma_posted(s, fi_compare_atomic(ofi.ep, &w[1], 1, ofi.desc, &w[2], ofi.desc, &w[0], ofi.desc, to,
                                           r->addr + offset, r->key, FI_UINT64, FI_CSWAP, &s->ctx),
                      "compare-swap");
}

void ofi_rma_completed(struct ofi_slot *s, int status)
{
    if (status == SHOAL_OK && s->out)
        memcpy(s->out, s->buf, s->len);
    struct tp_rma_req *req = s->req;
    ofi_slot_give(s);
    req->status = status;
    if (req->done)
        req->done(req);
}

void ofi_rma_fini(void)
{
    for (uint32_t i = 0; i < rr.nregions; i++) {
        if (rr.mr[i])
            fi_close(&rr.mr[i]->fid);
        free(rr.remote[i]);
    }
    memset(&rr, 0, sizeof rr);
    rr.atomics = -1;
}

const struct tp_rma_ops ofi_rma = {
    .available = rma_available,
    .autonomous = rma_autonomous,
    .max_bytes = rma_max_bytes,
    .expose = rma_expose,
    .put = rma_put,
    .get = rma_get,
    .amo = rma_amo,
};
