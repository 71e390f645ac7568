/* The one place SHOAL_* environment variables are read. */
#include "util.h"
#include "util/transports.h"
#include "shoal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct util_cfg_entry table[CFG_COUNT] = {
    [CFG_LOG] = {"SHOAL_LOG", "warn", "log level: error, warn, info, debug, trace"},
    [CFG_STRICT] = {"SHOAL_STRICT", "",
                    "1: abort with a message on handler-rule violations instead of returning SHOAL_EHANDLER (unset: 1 in debug builds, 0 in release)"},
    [CFG_SHM_RING_SLOTS] = {"SHOAL_SHM_RING_SLOTS", "0",
                            "64-byte slots per shm ring, a power of two >= 64; 0 picks the largest up to 16384 that keeps a rank's rings within 128 MiB / (ranks on the host), or 4 MiB when that is more (16384 up to 8 ranks per host, 128 at 256)"},
    [CFG_SHM_MEDIUM_MAX] = {"SHOAL_SHM_MEDIUM_MAX", "65536",
                            "largest medium AM payload in bytes, >= 4096 (capped at the larger of what fits in half a ring with 16 arguments and a quarter of SHOAL_SHM_OUTBOX_BYTES)"},
    [CFG_SHM_LANES] = {"SHOAL_SHM_LANES", "4",
                       "SHOAL_THREAD_MULTIPLE: request rings per local sender (lanes, 0-16) in the inbox, one per sending thread, so up to this many threads send to ranks on the host without a lock (the rest share the request ring under its lock); each lane adds a request ring per sender to the inbox (at 2 ranks with the default rings 2 MiB); 0: no lanes; every rank at MULTIPLE on a host must have the same"},
    [CFG_SHM_OUTBOX_BYTES] = {"SHOAL_SHM_OUTBOX_BYTES", "1M",
                              "bytes of each of a rank's two outbox pools (requests, replies) in its inbox, which hold the payloads of medium messages too large for their ring (K/M/G suffixes; 0, or 16K to 1G); the medium limit is at least a quarter of it, so 1M keeps 64 KiB mediums at any rank count; 0: no outbox, mediums only as large as half a ring; the same for every rank on a host"},
    [CFG_SHM_WATCHED] = {"SHOAL_SHM_WATCHED", "4",
                         "senders on this host whose rings a rank polls directly (1-4096); with more ranks on the host, the others are watched only while they talk and reach an idle rank through a summary byte each, so an empty poll costs O(W), not O(ranks); every rank of a host must have the same"},
    [CFG_SPIN] = {"SHOAL_SPIN", "0",
                  "polls a wait spins (the first 4096 without a pause instruction) before it yields the CPU; 0 picks 20000 when ranks <= cores, 64 when oversubscribed"},
    [CFG_SEG_SIZE] = {"SHOAL_SEG_SIZE", "16M", "segment size used by tools and benchmarks (bytes, K/M/G suffixes)"},
    [CFG_TRANSPORT] = {"SHOAL_TRANSPORT", "udp",
                       "transport between ranks on different hosts, one of util/transports.h (shoal-info lists them): udp (UDP/IPv4 or IPv6), eth (raw Ethernet frames; needs CAP_NET_RAW, else udp with a notice), ofi (libfabric, where built in), shm (the job must run on one host); ranks on one host always use shm between themselves unless SHOAL_NET_LOCAL=1"},
    [CFG_RMA_HEAP] = {"SHOAL_RMA_HEAP", "16G",
                      "address space of each rank's shared heap, which shoal_mem_create carves segments from (sparse: only segments use memory; every local peer maps every heap)"},
    [CFG_RMA_DIRECT] = {"SHOAL_RMA_DIRECT", "1",
                        "1: one-sided commands on memory mapped here run directly with CPU copies and atomics; 0: every command is sent for the target's progress engine to run (the path other hosts take)"},
    [CFG_RMA_NATIVE] = {"SHOAL_RMA_NATIVE", "auto",
                        "one-sided commands to peers on a transport with native RMA (ofi, where the provider has it), run by the provider once the initiator has the segment's entry cached: auto (put and get, and 64-bit fetch-add and compare-swap where the provider has atomics, when the provider moves data without the target's calls; else as 0), on (the same even when the provider needs the target to poll), rw (put and get only, as on), 0 (every command is executed by the target, as on udp and eth)"},
    [CFG_FAULTS] = {"SHOAL_FAULTS", "",
                    "fault injection on the cluster carriers, for tests: loss=P,dup=P,reorder=P,corrupt=P,delay=T(ns|us|ms),seed=N; each carrier applies it to what it sends and to what it receives; empty: none"},
    [CFG_NET_LOCAL] = {"SHOAL_NET_LOCAL", "0",
                       "1: ranks on the same host also talk over SHOAL_TRANSPORT (udp or eth) instead of shared memory, one-sided commands included (tests, benchmarks)"},
    [CFG_IFACE] = {"SHOAL_IFACE", "",
                   "interface of the cluster transport: a name (eth0), a CIDR block (10.1.0.0/16, fd00::/8) or an address; empty: the first interface that is up with an IPv4 address, else loopback (eth needs a name)"},
    [CFG_PORT_RANGE] = {"SHOAL_PORT_RANGE", "0",
                        "UDP ports each rank may bind, LO-HI (the first free one); 0: any port the kernel picks"},
    [CFG_NET_SOCKBUF] = {"SHOAL_NET_SOCKBUF", "8M",
                         "send and receive buffer of the cluster transport's socket (bytes, K/M/G suffixes; past the sysctl caps when the process may)"},
    [CFG_NET_CONNECTED] = {"SHOAL_NET_CONNECTED", "64",
                           "udp: how many peers get a send socket of their own, connected to them (the first ones sent to; it skips a route lookup per packet); the rest are sent to from the one receiving socket. Each costs a file descriptor and sends from an ephemeral port"},
    [CFG_NET_DEAD_MS] = {"SHOAL_NET_DEAD_MS", "3000",
                         "milliseconds without a packet after which an unanswering peer is declared dead and the job ends naming it (>= 100)"},
    [CFG_PROGRESS] = {"SHOAL_PROGRESS", "poll",
                      "who runs handlers: poll (only the application's shoal calls) or thread (also a progress thread per rank, woken by arrival, while the application computes outside shoal)"},
    [CFG_PROGRESS_SPIN_US] = {"SHOAL_PROGRESS_SPIN_US", "auto",
                              "SHOAL_PROGRESS=thread: microseconds the progress thread keeps polling (yielding the CPU between looks) after it last ran a handler or woke, before it sleeps in the kernel, 0-100000 (0: sleep at once); auto: 50 when shared memory is its only way in (a look costs a few loads), 0 when it reads a socket (a look costs system calls)"},
    [CFG_PROGRESS_SLICE_US] = {"SHOAL_PROGRESS_SLICE_US", "100",
                               "SHOAL_PROGRESS=thread: the scheduler time slice (microseconds, 100-100000) the progress thread asks Linux for (sched_setattr; honoured from Linux 6.12); a short slice lets the thread, woken by a message, take the CPU from a thread that computes at once instead of at the next scheduler tick (~4 ms); 0: keep the kernel's default"},
    [CFG_NET_WAIT] = {"SHOAL_NET_WAIT", "auto",
                      "how a wait receives from the cluster transport once its spin budget is spent: spin (keep polling, then yield and nap), block (sleep in the kernel until a packet or a timer is due: no CPU while idle), auto (spin when this host's ranks fit its cores, else block)"},
    [CFG_NET_THREAD] = {"SHOAL_NET_THREAD", "1",
                        "1: a progress thread keeps the cluster transport's acknowledgements, retransmissions and keepalives going while the application computes without calling shoal (it looks every 10 ms, works only after 5 ms without a call, never runs handlers); 0: only calls into shoal do; with SHOAL_PROGRESS=thread that thread does this work and this one is not started"},
    [CFG_NET_BCAST] = {"SHOAL_NET_BCAST", "1",
                       "1: the barrier's release, and shoal_broadcast payloads of up to 8 packets on 3 hosts or more, cross hosts as ONE broadcast packet (a raw frame to ff:ff:ff:ff:ff:ff on eth; on udp a datagram to the interface's broadcast address, when every rank's interface has the same one), with reliable recovery of what is lost, and shoal_am_bcast_* messages leave as one packet every other rank takes in its reliable stream; 2: as 1, and on loopback too (127.255.255.255: jobs on one host with SHOAL_NET_LOCAL=1); 0: only reliable messages along a tree, and a request per rank"},
    [CFG_NET_GSO] = {"SHOAL_NET_GSO", "1",
                     "udp: 1: a run of up to 64 equal-sized datagrams to one peer (a large message's fragments) leaves in one system call that the kernel cuts into datagrams (UDP_SEGMENT, Linux 4.18+; kept only where the kernel accepts it), and arrives in one buffer where the kernel keeps it whole (UDP_GRO; 64 KiB receive buffers); 0: one datagram per system call entry"},
    [CFG_NET_AUTH] = {"SHOAL_NET_AUTH", "full",
                      "what the tag of every cluster packet covers (SipHash-2-4 under a per-job secret that only the launcher hands out and no packet carries): full (header and payload: nothing an outsider sends or alters is accepted), header (the 64-byte header only: no outsider can inject, replay into another incarnation or end the job, but one that sees a packet on its way can alter its payload; saves the payload's hashing, for bandwidth on a trusted link)"},
    [CFG_ETH_RING] = {"SHOAL_ETH_RING", "auto",
                      "eth: auto (receive through a ring of frames the kernel shares with the process, PACKET_RX_RING with TPACKET_V2, of about SHOAL_NET_SOCKBUF bytes and at least 1024 frames: no system call and no copy to user space per receive; frames the interface's size where that is at most 16 KiB, MTUs of 1500 and 9000; on larger ones, loopback's 64 KiB, frames for 8 KiB of payload from which the kernel spills larger packets whole into the socket, read with recvmmsg; recvmmsg where the kernel refuses a ring, logged), 1 (a ring whose frames hold the largest packet whole, whatever its size), 0 (recvmmsg)"},
    [CFG_CRL_URC_SIZE] = {"SHOAL_CRL_URC_SIZE", "1024",
                          "CRL unmapped region cache: remote regions kept (mapping and data) after their last rgn_unmap; 0 drops each at once"},
    [CFG_CRL_STATS] = {"SHOAL_CRL_STATS", "0",
                       "1: every rank prints its CRL call, message and time counters at crl_exit"},
    [CFG_COSMOS_TRACE] = {"SHOAL_COSMOS_TRACE", "",
                          "a directory: every rank of a CRL program records the coherence messages it receives to DIR/cosmos-<job id>-r<rank>.trace (docs/COSMOS_TRACE.md), for shoal-cosmos replay; empty: no trace"},
    [CFG_COSMOS] = {"SHOAL_COSMOS", "0",
                    "1: every rank of a CRL program runs the Cosmos predictor (docs/COSMOS.md) in-line on the coherence messages it receives, home and remote side; with SHOAL_CRL_STATS=1 crl_exit prints its accuracy and cost per message"},
    [CFG_COSMOS_DEPTH] = {"SHOAL_COSMOS_DEPTH", "3", "SHOAL_COSMOS's message history depth, 1-4"},
    [CFG_COSMOS_FILTER] = {"SHOAL_COSMOS_FILTER", "0",
                           "SHOAL_COSMOS's filter: the max count of each prediction's saturating counter, 0-2 (0: none)"},
    [CFG_COSMOS_SENDER_INDEX] = {"SHOAL_COSMOS_SENDER_INDEX", "0",
                                 "1: SHOAL_COSMOS keeps a history per region and sender (the thesis's §6.6)"},
    [CFG_COSMOS_ACT] = {"SHOAL_COSMOS_ACT", "",
                        "actions a CRL program's protocol takes on the Cosmos predictor's predictions (docs/COSMOS.md, Actions), a comma-separated list of: rmw (the home answers a read exclusive when it predicts the reader's upgrade), dsi (a remote copy predicted to be invalidated is flushed at its operation's end), migratory (after recalling a modified copy for a reader, the home grants it exclusive when it predicts the reader's upgrade), push (after the home's write, the new data goes unasked to a rank whose read the home predicts next), xpush (such a push goes exclusive when the home predicts that rank's upgrade after its read; without push, only those pushes go), upgrade (after the home's last read of a region one rank holds shared, that rank's upgrade is granted before it asks, when the home predicts it); any action runs the predictor as SHOAL_COSMOS=1 does; empty: none"},
    [CFG_HANG_REPORT] = {"SHOAL_HANG_REPORT", "0",
                         "seconds a rank may wait in a blocking call without any message arriving or leaving before it prints what it waits for (and, under shoalrun, the launcher asks every rank and prints the job's wait-for graph); 0: only on request (SIGQUIT, shoalrun --timeout)"},
    [CFG_BACKTRACE] = {"SHOAL_BACKTRACE", "1",
                       "1: a rank that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints the signal, the faulting address and a backtrace (symbolized by addr2line where binutils is installed) before it dies of the signal; 0: no report. Either way a crash ends the rank by its signal, also where a library (libfabric's psm) installed a handler that would make it an ordinary exit; signals the program handles itself are never touched"},
    [CFG_STATS] = {"SHOAL_STATS", "0",
                   "1: at shoal_finalize rank 0 prints a table of every rank's and the job's messages and bytes sent by class, one-sided commands, network packets, retransmissions and drops, and time spent waiting in blocking calls (timing costs two clock reads per call that has to wait)"},
    [CFG_AM_LARGE_MAX] = {"SHOAL_AM_LARGE_MAX", "1G",
                          "largest payload of shoal's internal messages above the medium limit (CRL messages, rgn_bcast), which am cuts into pieces; each rank reassembles at most one such message per sender and class at a time (bytes, K/M/G suffixes; 4096 to 1T)"},
    [CFG_BARRIER] = {"SHOAL_BARRIER", "auto",
                     "how shoal_barrier's hosts' leaders meet: auto (concurrent where the network broadcasts natively, else dissemination), dissemination (ceil(log2 hosts) rounds of flags), concurrent (every leader tells rank 0, which releases all with one broadcast), chain (GAMMA's K-chain of Ciaccio's thesis §5.3: SHOAL_BARRIER_CHAINS chains of leaders pass a token to rank 0, which releases all with one broadcast)"},
    [CFG_BARRIER_CHAINS] = {"SHOAL_BARRIER_CHAINS", "2",
                            "K of SHOAL_BARRIER=chain, 1-255: 1 is the serialized barrier, 2 GAMMA's two-token gamma_sync, K >= hosts - 1 the concurrent one"},
    [CFG_RANK] = {"SHOAL_RANK", "", "set by shoalrun: this process's rank"},
    [CFG_SIZE] = {"SHOAL_SIZE", "", "set by shoalrun: number of ranks"},
    [CFG_BOOT_FD] = {"SHOAL_BOOT_FD", "", "set by shoalrun: Unix socket to the launcher"},
    [CFG_JOB_FD] = {"SHOAL_JOB_FD", "", "set by shoalrun: memfd of the job control block"},
    [CFG_JOB_ID] = {"SHOAL_JOB_ID", "", "set by shoalrun: 64-bit job identifier (hex)"},
};

static const char *values[CFG_COUNT];
static int loaded;

static int parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v < 0 || v > (LLONG_MAX >> shift))
        return -1;
    v <<= shift;
    *out = v;
    return 0;
}

int util_port_range(const char *v, uint16_t *lo, uint16_t *hi)
{
    unsigned a = 0, b = 0;
    int end = 0;
    if (!strcmp(v, "0"))
        a = b = 0;
    else if (sscanf(v, "%u-%u%n", &a, &b, &end) != 2 || v[end] || a == 0 || a > b || b > 65535)
        return -1;
    if (lo)
        *lo = (uint16_t)a;
    if (hi)
        *hi = (uint16_t)b;
    return 0;
}

const char *const util_cosmos_act_names[UTIL_COSMOS_ACTS] = {"rmw", "dsi", "migratory", "push", "xpush", "upgrade"};

int util_cosmos_act_mask(const char *v)
{
    int mask = 0;
    while (*v) {
        size_t n = strcspn(v, ",");
        unsigned k = 0;
        const char *const *names = util_cosmos_act_names;
        while (k < UTIL_COSMOS_ACTS && !(strlen(names[k]) == n && !strncmp(v, names[k], n)))
            k++;
        if (n && k == UTIL_COSMOS_ACTS)
            return -1;
        mask |= n ? 1 << k : 0;
        v += n + (v[n] == ',');
    }
    return mask;
}

/* Says which item of the spec is wrong. */
static int validate_faults(const char *v, char *why, size_t n)
{
    struct util_fault_spec c;
    return util_fault_parse(v, &c, why, n) == SHOAL_OK ? 0 : -1;
}

/* 0 when v is a valid value of id; else -1, and why may say more than the
 * setting's description. */
static int validate(enum util_cfg_id id, const char *v, char *why, size_t why_len)
{
    long long n;
    switch (id) {
    case CFG_LOG:
        return (strcmp(v, "error") && strcmp(v, "warn") && strcmp(v, "info") &&
                strcmp(v, "debug") && strcmp(v, "trace")) ? -1 : 0;
    case CFG_TRANSPORT:
        return util_transport_find(v) < 0 ? -1 : 0;
    case CFG_NET_AUTH:
        return (strcmp(v, "full") && strcmp(v, "header")) ? -1 : 0;
    case CFG_NET_BCAST:
        return (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2")) ? -1 : 0;
    case CFG_RMA_DIRECT: case CFG_NET_LOCAL: case CFG_NET_THREAD: case CFG_NET_GSO:
    case CFG_CRL_STATS: case CFG_BACKTRACE: case CFG_STATS: case CFG_COSMOS: case CFG_COSMOS_SENDER_INDEX:
        return (strcmp(v, "0") && strcmp(v, "1")) ? -1 : 0;
    case CFG_RMA_NATIVE:
        return (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "rw") && strcmp(v, "0")) ? -1 : 0;
    case CFG_ETH_RING:
        return (strcmp(v, "auto") && strcmp(v, "0") && strcmp(v, "1")) ? -1 : 0;
    case CFG_NET_WAIT:
        return (strcmp(v, "auto") && strcmp(v, "spin") && strcmp(v, "block")) ? -1 : 0;
    case CFG_PROGRESS:
        return (strcmp(v, "poll") && strcmp(v, "thread")) ? -1 : 0;
    case CFG_BARRIER:
        return (strcmp(v, "auto") && strcmp(v, "dissemination") && strcmp(v, "concurrent") && strcmp(v, "chain"))
                   ? -1 : 0;
    case CFG_BARRIER_CHAINS:
        return (parse_int(v, &n) || n < 1 || n > 255) ? -1 : 0;
    case CFG_PROGRESS_SPIN_US:
        return strcmp(v, "auto") && (parse_int(v, &n) || n < 0 || n > 100000) ? -1 : 0;
    case CFG_PROGRESS_SLICE_US:
        return (parse_int(v, &n) || (n != 0 && (n < 100 || n > 100000))) ? -1 : 0;
    case CFG_IFACE:        /* resolved, with a message naming it, when the transport starts */
    case CFG_COSMOS_TRACE: /* opened, with a message naming it, by crl_init */
        return 0;
    case CFG_PORT_RANGE:
        return util_port_range(v, NULL, NULL);
    case CFG_COSMOS_ACT:
        return util_cosmos_act_mask(v) < 0 ? -1 : 0;
    case CFG_NET_DEAD_MS:
        return (parse_int(v, &n) || n < 100 || n > 3600000) ? -1 : 0;
    case CFG_NET_CONNECTED:
        return (parse_int(v, &n) || n < 0 || n > (1 << 20)) ? -1 : 0;
    case CFG_STRICT:
        return (v[0] && strcmp(v, "0") && strcmp(v, "1")) ? -1 : 0;
    case CFG_SHM_RING_SLOTS:
        if (parse_int(v, &n) || n > (1 << 20) || (n & (n - 1)))
            return -1;
        return (n != 0 && n < 64) ? -1 : 0;
    case CFG_JOB_ID:
        return v[0] == '\0' || parse_int(v, &n) == 0 ? 0 : -1;
    case CFG_RANK: case CFG_SIZE: case CFG_BOOT_FD: case CFG_JOB_FD:
        if (v[0] == '\0')
            return 0;
        return parse_int(v, &n) ? -1 : 0;
    case CFG_SHM_MEDIUM_MAX:
        return (parse_int(v, &n) || n < UTIL_MEDIUM_MIN) ? -1 : 0;
    case CFG_SHM_LANES:
        return (parse_int(v, &n) || n < 0 || n > UTIL_SHM_LANES_MAX) ? -1 : 0;
    case CFG_SHM_OUTBOX_BYTES:
        return (parse_int(v, &n) || (n != 0 && (n < UTIL_SHM_OUTBOX_MIN || n > UTIL_SHM_OUTBOX_MAX))) ? -1 : 0;
    case CFG_SHM_WATCHED:
        return (parse_int(v, &n) || n < 1 || n > 4096) ? -1 : 0;
    case CFG_AM_LARGE_MAX:
        return (parse_int(v, &n) || n < UTIL_MEDIUM_MIN || n > (1ll << 40)) ? -1 : 0;
    case CFG_RMA_HEAP:
        return (parse_int(v, &n) || n < (1 << 20) || n > (1ll << 40)) ? -1 : 0;
    case CFG_COSMOS_DEPTH:
        return (parse_int(v, &n) || n < 1 || n > 4) ? -1 : 0;
    case CFG_COSMOS_FILTER:
        return (parse_int(v, &n) || n > 2) ? -1 : 0;
    case CFG_HANG_REPORT:
        return (parse_int(v, &n) || n > 86400) ? -1 : 0;
    case CFG_CRL_URC_SIZE:
        return (parse_int(v, &n) || n > (1 << 24)) ? -1 : 0;
    case CFG_SPIN:
        return (parse_int(v, &n) || n > UINT32_MAX) ? -1 : 0;
    case CFG_FAULTS:
        return validate_faults(v, why, why_len);
    default:
        return parse_int(v, &n) ? -1 : 0;
    }
}

int util_config_check(char *err, size_t n)
{
    for (int i = 0; i < CFG_COUNT; i++) {
        const char *v = getenv(table[i].name);
        v = v ? v : table[i].default_str;
        char why[160] = "";
        if (validate((enum util_cfg_id)i, v, why, sizeof why)) {
            snprintf(err, n, "invalid %s=\"%s\"%s%s; accepted: %s", table[i].name, v, why[0] ? ": " : "", why,
                     table[i].meaning);
            return SHOAL_ECONFIG;
        }
    }
    return SHOAL_OK;
}

/* Edit distance (insert, delete, substitute) of two setting names. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

int util_config_unknown(void (*report)(const char *var, const char *nearest, void *arg), void *arg)
{
    extern char **environ;
    int count = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        char name[64];
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (strncmp(*e, "SHOAL_", 6) || len >= sizeof name)
            continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        size_t best = SIZE_MAX;
        const char *nearest = NULL;
        for (int i = 0; i < CFG_COUNT && best; i++) {
            size_t d = distance(name, table[i].name);
            if (d < best) {
                best = d;
                nearest = table[i].name;
            }
        }
        if (best == 0)
            continue;
        report(name, best <= 3 ? nearest : NULL, arg);
        count++;
    }
    return count;
}

int util_config_load(void)
{
    char err[512];
    if (util_config_check(err, sizeof err)) {
        util_log(LOG_ERROR, "%s", err);
        return SHOAL_ECONFIG;
    }
    for (int i = 0; i < CFG_COUNT; i++) {
        const char *v = getenv(table[i].name);
        values[i] = v ? v : table[i].default_str;
    }
    loaded = 1;
    const char *lv = values[CFG_LOG];
    util_log_level = !strcmp(lv, "error") ? LOG_ERROR : !strcmp(lv, "warn") ? LOG_WARN
                   : !strcmp(lv, "info") ? LOG_INFO : !strcmp(lv, "debug") ? LOG_DEBUG : LOG_TRACE;
    return SHOAL_OK;
}

const char *util_config_str(enum util_cfg_id id)
{
    if (!loaded) {
        const char *v = getenv(table[id].name);
        return v ? v : table[id].default_str;
    }
    return values[id];
}

long long util_config_int(enum util_cfg_id id)
{
    long long n = 0;
    if (parse_int(util_config_str(id), &n))
        return 0;
    return n;
}

int util_config_is_set(enum util_cfg_id id)
{
    return getenv(table[id].name) != NULL;
}

const struct util_cfg_entry *util_config_table(size_t *count)
{
    *count = CFG_COUNT;
    return table;
}
