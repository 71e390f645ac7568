/* shoal/gamma.h: GAMMA's Active Ports interface (G. Ciaccio, "Messaging on
 * Gigabit Ethernet...", DISI-TH-1999-02, §4.7) over shoal's active
 * messages, so programs written for GAMMA compile unchanged.
 *
 * A GAMMA group is the shoal job and an instance is a rank: gamma_init runs
 * under shoalrun (or any bootstrap shoal has) instead of spawning copies
 * with rsh.  Every call but gamma_time and gamma_time_diff returns a
 * negative value on error (here a SHOAL_E* code, which the thesis leaves
 * uninformative) and a non-negative one on success.  Receiver and error
 * handlers run when their message arrives (gamma_init chooses
 * SHOAL_PROGRESS=thread unless the program set SHOAL_PROGRESS); they may
 * call any GAMMA call but gamma_wait on a semaphore not yet high enough,
 * gamma_sync and gamma_exit, which would block a handler.  docs/GAMMA.md
 * is the full reference and lists how every gap of the thesis is decided. */
#ifndef SHOAL_GAMMA_H
#define SHOAL_GAMMA_H

#include <shoal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dest_node of an output port that sends to every other instance. */
#define BROADCAST 255

/* gamma_errno in an error handler. */
#define GAMMA_ERR_FRAMELOST 2   /* part of a message was lost (never, over shoal's reliable transports) */
#define GAMMA_ERR_MSGTOOLONG 3  /* no buffer, or less room than the message: truncated */
#define GAMMA_ERR_SENDFAILURE 4 /* a send through this port failed */

/* Ports, semaphores and error semaphores 247..255 are GAMMA's own. */
#define GAMMA_FIRST_RESERVED 247

/* A time stamp.  An array of one, so that gamma_time(t) fills the caller's
 * variable as in the thesis. */
typedef struct gamma_time_s {
    unsigned long hi, lo;
} time_586[1];

SHOAL_API int gamma_init(int num_nodes, int argc, char **argv);
SHOAL_API int gamma_setport(unsigned char activated_port, unsigned char dest_node, unsigned char dest_par_pid,
                            unsigned char dest_port, void (*handler_in)(), void (*handler_err)(), void *buffer_in,
                            unsigned long buffer_len);
SHOAL_API int gamma_send(unsigned char output_port, void *data, unsigned long len);
SHOAL_API int gamma_send_fast(unsigned char output_port, void *data, unsigned long len);
SHOAL_API int gamma_attach_buffer(unsigned char input_port, void *buffer_in);
SHOAL_API int gamma_signal(unsigned char sem);
SHOAL_API int gamma_sigerr(unsigned char sem);
SHOAL_API int gamma_wait(unsigned char sem, unsigned long n);
SHOAL_API int gamma_test(unsigned char sem);
SHOAL_API int gamma_atomic(void (*funct)(void));
SHOAL_API int gamma_sync(void);
SHOAL_API int gamma_my_par_pid(void);
SHOAL_API int gamma_my_node(void);
SHOAL_API int gamma_how_many_nodes(void);
SHOAL_API int gamma_mlock(void *buffer, unsigned long len);
SHOAL_API int gamma_munlock(void *buffer, unsigned long len);
SHOAL_API int gamma_munlockall(void);
SHOAL_API int gamma_exit(void);
SHOAL_API void gamma_time(time_586 t);
SHOAL_API double gamma_time_diff(time_586 b, time_586 a);

/* In a receiver or error handler: the port that triggered it. */
SHOAL_API extern unsigned char gamma_active_port;
/* In an error handler: GAMMA_ERR_*. */
SHOAL_API extern unsigned char gamma_errno;

/* Extensions (the thesis's handlers cannot learn these): in a receiver or
 * error handler, the bytes of the message stored in the buffer (after
 * truncation) and the instance that sent it. */
SHOAL_API extern unsigned long gamma_active_len;
SHOAL_API extern int gamma_active_src;
/* K of gamma_sync's K-chain barrier (default 2, GAMMA's "two-token";
 * 1: serialized; gamma_how_many_nodes() - 1: concurrent).  Every instance
 * sets the same K.  0, or a negative SHOAL_EINVAL for k < 1. */
SHOAL_API int gamma_sync_chains(int k);

#ifdef __cplusplus
}
#endif
#endif
