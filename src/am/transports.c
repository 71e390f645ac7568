/* The registry: which implementation serves each name of the transport list
 * (util/transports.h).  A transport plugs in here, with one line, and in
 * its own folder; nothing else in am, rma, coll or dsm names it. */
#include "am/state.h"
#include "net/net.h"
#ifdef SHOAL_HAVE_OFI
#include "ofi/ofi.h"
#endif

/* NULL for shm (inline in am.c) and for a transport this build lacks. */
static const struct tp_ops *const am_registry[UTIL_TP_COUNT] = {
    [UTIL_TP_udp] = &net_transport,
    [UTIL_TP_eth] = &net_transport,
#ifdef SHOAL_HAVE_OFI
    [UTIL_TP_ofi] = &ofi_transport,
#endif
};

const struct tp_ops *am_transport_ops(enum util_transport t)
{
    return am_registry[t];
}

int am_transport_built_in(enum util_transport t)
{
    return t == UTIL_TP_shm || am_registry[t] != NULL;
}

const struct tp_rma_ops *am_native_rma(int rank, int *atomics)
{
    const struct tp_rma_ops *t = am.tp ? am.tp->rma : NULL;
    if (!t || (rank >= 0 && !am_is_remote(rank)) || !t->available(atomics))
        return NULL;
    return t;
}
