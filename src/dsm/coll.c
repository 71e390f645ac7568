/* CRL's global operations (Table 3-2), on coll's collectives whose
 * messages travel on the am request channels the protocol uses: a barrier
 * message from rank a to rank b runs after every dsm message a sent b
 * before it (with two ranks, a rank leaves the barrier only once the
 * other's earlier messages, a MsgDelete say, have run), and rgn_bcast_recv
 * need not name the root.  What waits in dsm's outbox is not in am yet, so
 * every call drains it first; the barrier drains it again before it
 * returns, so nothing a rank sent before leaving waits behind it.  The
 * reductions are shoal_allreduce, which combines in a fixed order and
 * broadcasts the result, so every rank returns the same bits.  Waits run
 * every handler, so a rank in one keeps serving the protocol requests it
 * is home for.  They are numbered among the job's collectives (coll's
 * sequence): every rank calls them in the same order (docs/CRL.md §7). */
#include "coll/coll.h"
#include "dsm/dsm.h"
#include "shoal/crl.h"

/* Sends everything the outbox holds. */
static void drain_outbox(void)
{
    struct util_backoff b;
    util_backoff_init(&b);
    while (dsm.out_head)
        dsm_progress(&b);
}

void dsm_barrier(void)
{
    drain_outbox();
    int rc = coll_barrier_ordered();
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: barrier on rank %u failed: %s", dsm.node.rank, shoal_strerror(rc));
    drain_outbox();
}

void rgn_barrier(void)
{
    AM_GUARD();
    dsm_check_init("rgn_barrier");
    dsm_barrier();
    dsm_observe_mark(&dsm.node, COSMOS_MARK_BARRIER);
}

static void check_buffer(const char *call, int nbytes, void *buf)
{
    dsm_check_init(call);
    if (nbytes < 0 || (nbytes && !buf))
        shoal_abort(1, "crl: %s(%d, %p): bad size or buffer", call, nbytes, buf);
    drain_outbox();
}

void rgn_bcast_send(int nbytes, void *buf)
{
    AM_GUARD();
    check_buffer("rgn_bcast_send", nbytes, buf);
    int from;
    size_t sent;
    int rc = coll_bcast_any(buf, (size_t)nbytes, (int)dsm.node.rank, &from, &sent);
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: rgn_bcast_send on rank %u failed: %s", dsm.node.rank, shoal_strerror(rc));
}

void rgn_bcast_recv(int nbytes, void *buf)
{
    AM_GUARD();
    check_buffer("rgn_bcast_recv", nbytes, buf);
    int from;
    size_t sent;
    int rc = coll_bcast_any(buf, (size_t)nbytes, -1, &from, &sent);
    if (rc == SHOAL_EINVAL)
        shoal_abort(1, "crl: rgn_bcast_recv expects %d bytes, but rank %d broadcast %zu", nbytes, from, sent);
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: rgn_bcast_recv on rank %u failed: %s", dsm.node.rank, shoal_strerror(rc));
}

static double reduce(enum shoal_rop op, double x, const char *call)
{
    dsm_check_init(call);
    double out;
    int rc = shoal_allreduce(&x, &out, 1, SHOAL_DOUBLE, op);
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: %s on rank %u: %s", call, dsm.node.rank, shoal_strerror(rc));
    return out;
}

double rgn_reduce_dadd(double x)
{
    AM_GUARD();
    return reduce(SHOAL_ROP_SUM, x, "rgn_reduce_dadd");
}

double rgn_reduce_dmin(double x)
{
    AM_GUARD();
    return reduce(SHOAL_ROP_MIN, x, "rgn_reduce_dmin");
}

double rgn_reduce_dmax(double x)
{
    AM_GUARD();
    return reduce(SHOAL_ROP_MAX, x, "rgn_reduce_dmax");
}
