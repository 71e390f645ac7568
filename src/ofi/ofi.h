/* ofi layer: a message transport (transport/transport.h) over libfabric's
 * reliable datagram endpoints (FI_EP_RDM), the provider chosen by
 * libfabric's own FI_PROVIDER.  Built only when libfabric is found
 * (SHOAL_HAVE_OFI).  Design: docs/OFI.md. */
#ifndef SHOAL_OFI_OFI_H
#define SHOAL_OFI_OFI_H

#include "transport/transport.h"

extern const struct tp_ops ofi_transport;

/* 1 when libfabric offers an endpoint this transport can use (FI_PROVIDER
 * narrows the choice), else 0; logs nothing. */
int ofi_usable(void);

#endif
