/* net: the cluster transport over UDP or raw Ethernet, a message transport
 * (transport/transport.h) that am reaches only through net_transport.
 *
 * One process-wide instance joins the job's ranks through a carrier (UDP
 * socket or raw Ethernet frames, SHOAL_TRANSPORT) and two reliability
 * engines (rel.h): the request channel and the reply channel, each with
 * its own sequence numbers and credits, so a reply never waits for
 * credits only the peer's request handlers free; linked, so that each
 * one's data carries the other's acknowledgements (rel_link).  It moves opaque
 * messages of up to max_payload() bytes, reliably and in order per
 * (peer, channel); framing active messages is the AM layer's.
 *
 * Start-up is collective (boot_allgather): every rank opens its socket and
 * publishes its address, incarnation and MTU; rank 0's random key becomes
 * the job's.  eth is used only if every rank could open a raw socket;
 * otherwise all use udp (with a one-line notice).  SHOAL_FAULTS applies to
 * every packet sent and received.  With SHOAL_NET_THREAD=1 a progress
 * thread keeps the engines going (acks, retransmissions, keepalives) while
 * the application computes; handlers still run only in poll.
 *
 * init's name is "udp" or "eth": one table serves both carriers. */
#ifndef SHOAL_NET_NET_H
#define SHOAL_NET_NET_H

#include "transport/transport.h"

extern const struct tp_ops net_transport;

#endif
