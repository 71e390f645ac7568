/* Native one-sided commands on the ofi transport's endpoint: the table
 * transport.h's struct tp_rma_ops describes, put, get and 64-bit atomics on
 * memory a rank exposes, run by the provider without the target's
 * handlers.  Available after ofi_transport.init when the provider has
 * FI_RMA and orders sends after writes (FI_ORDER_SAW), atomics when it
 * also has FI_ATOMIC for 64-bit words; ofi_transport.rma points here.
 * Design: docs/OFI.md §8. */
#ifndef SHOAL_OFI_RMA_H
#define SHOAL_OFI_RMA_H

#include "transport/transport.h"

extern const struct tp_rma_ops ofi_rma;

#endif
