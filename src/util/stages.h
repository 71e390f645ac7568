/* util layer: cycle stamps along the cluster transport's path from a
 * packet's arrival to the system call that sends the reply, for the
 * breakdown in docs/PERFORMANCE.md ("The short paths, stage by stage").
 *
 * Compiled in only by `cmake -DSHOAL_STAGES=ON` (a measuring build: each
 * stamp is one rdtsc, 20-40 cycles on a VM, which the figures include);
 * otherwise UTIL_STAGE is empty.  A chain opens when a receive takes a
 * packet and closes at the next one (so of a batch of packets only the last
 * one's chain can count: a ping-pong's batches are single packets); a chain
 * that reached the send's system call counts, and at exit the exiting
 * thread (the application's) prints the mean cycles between consecutive
 * stages of its own chains (a stage a chain skipped adds nothing) to stderr. */
#ifndef SHOAL_UTIL_STAGES_H
#define SHOAL_UTIL_STAGES_H

enum util_stage {
    UTIL_STAGE_RECEIVED, /* a receive returned the packet (socket or ring) */
    UTIL_STAGE_ACCEPTED, /* the reliable engine took it: tag checked, state updated */
    UTIL_STAGE_HANDLER,  /* its message goes to the AM layer's handler */
    UTIL_STAGE_SEND,     /* the handler's reply enters the transport */
    UTIL_STAGE_ENCODE,   /* the lock taken: the engine stores and encodes it */
    UTIL_STAGE_FLUSH,    /* the poll's end flushes the batch */
    UTIL_STAGE_SYSCALL,  /* the send's system call */
    UTIL_STAGES
};

#if defined(SHOAL_STAGES) && defined(__x86_64__)
void util_stage(enum util_stage s);
#define UTIL_STAGE(s) util_stage(s)
#else
#define UTIL_STAGE(s) ((void)0)
#endif

#endif
