/* GAMMA's ping-pong as the thesis writes such programs (§2.1, §4.4.4,
 * §4.7), with nothing but gamma.h's calls: instance 0 sends a message on
 * its port 0, instance 1's handler signals semaphore 0 and its main thread
 * echoes the message back.  Runs unchanged under shoalrun -n 2. */
#include <shoal/gamma.h>

#include <stdio.h>
#include <string.h>

#define PORT 0
#define ROUNDS 1000
#define LEN 64

static char in_buf[LEN], out_buf[LEN];

static void got_message(void)
{
    gamma_signal(PORT);
}

int main(int argc, char **argv)
{
    time_586 start, end;
    int i, other;

    if (gamma_init(2, argc, argv) < 0)
        return 1;
    if (gamma_how_many_nodes() != 2) {
        fprintf(stderr, "run me on 2 instances\n");
        return 1;
    }
    other = 1 - gamma_my_node();
    gamma_mlock(in_buf, LEN);
    gamma_mlock(out_buf, LEN);
    if (gamma_setport(PORT, other, gamma_my_par_pid(), PORT, got_message, NULL, in_buf, LEN) < 0)
        return 1;
    gamma_sync();
    gamma_time(start);
    for (i = 0; i < ROUNDS; i++) {
        if (gamma_my_node() == 0) {
            memset(out_buf, i & 0x7f, LEN);
            gamma_send(PORT, out_buf, LEN);
            if (gamma_wait(PORT, 1) < 0)
                return 1;
            if (in_buf[0] != (char)(i & 0x7f) || in_buf[LEN - 1] != (char)(i & 0x7f))
                return 1;
        } else {
            if (gamma_wait(PORT, 1) < 0)
                return 1;
            memcpy(out_buf, in_buf, LEN);
            gamma_send_fast(PORT, out_buf, LEN);
        }
    }
    gamma_time(end);
    if (gamma_my_node() == 0)
        printf("gamma ping-pong: %d rounds of %d bytes, %.2f us one way\n", ROUNDS, LEN,
               gamma_time_diff(end, start) / ROUNDS / 2);
    gamma_munlockall();
    gamma_exit();
    return 0;
}
