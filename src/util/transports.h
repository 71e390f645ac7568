/* The transports shoal knows, in the one list that config validation,
 * shoalrun --transport, shoal-info and am's registry (am/transports.c)
 * iterate; tests/CMakeLists.txt reads it and refuses a name it has no tests
 * for.
 * X(name, what it is): a name is what SHOAL_TRANSPORT takes. */
#ifndef SHOAL_UTIL_TRANSPORTS_H
#define SHOAL_UTIL_TRANSPORTS_H

#define UTIL_TRANSPORTS(X)                                                                                    \
    X(shm, "shared-memory rings; reaches ranks on this host only")                                           \
    X(udp, "shoal's reliable protocol over UDP/IPv4 or IPv6")                                                \
    X(eth, "shoal's reliable protocol over raw Ethernet frames (needs CAP_NET_RAW on every rank, else udp)") \
    X(ofi, "libfabric RDM endpoints; FI_PROVIDER chooses the provider (verbs, efa, cxi, tcp;ofi_rxm, ...)")

#define UTIL_TRANSPORT_ENUM(name, what) UTIL_TP_##name,
enum util_transport { UTIL_TRANSPORTS(UTIL_TRANSPORT_ENUM) UTIL_TP_COUNT };
#undef UTIL_TRANSPORT_ENUM

struct util_transport_info {
    const char *name;
    const char *what;
};
extern const struct util_transport_info util_transport_list[UTIL_TP_COUNT];

/* The index of the transport called name, or -1. */
int util_transport_find(const char *name);
/* "shm, udp, eth or ofi", for messages. */
const char *util_transport_names(void);

#endif
