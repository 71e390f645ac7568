/* A hostile flood for the UDP receive path (issue 17, defect 8): an
 * outsider that knows a job's ports and id (they travel in clear) but not
 * its key sends 65,000-byte datagrams, as fast as one socket can, to every
 * port of a range, round robin, for a given time, while a job measures its
 * throughput on those ports:
 *
 *   udp_flood ADDR PORT_LO PORT_HI SECONDS [JOB_HEX | junk]
 *
 * With JOB_HEX each datagram is back-to-back 64-byte shoal headers of that
 * job with an empty payload and no key (a receiver that cut datagrams by
 * the lengths they claim decoded a thousand packets per datagram; another
 * job's id costs it the same decodes, so any id measures the cut); with
 * `junk` it is bytes that are not shoal's at all.  Prints what it sent.
 * Example, the job on ports 41000-41001 of loopback:
 *
 *   SHOAL_TRANSPORT=udp SHOAL_NET_LOCAL=1 SHOAL_IFACE=lo SHOAL_PORT_RANGE=41000-41001 \
 *     shoalrun --bind -n 2 shoal_bench bw --min 1048576 --max 1048576 &
 *   udp_flood 127.0.0.1 41000 41001 10 1234 */
#include "net/wire.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FLOOD_BYTES 65000u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> 8 * i);
}

/* Headers of job `job` back to back: a DATA packet from rank 0 to rank 1,
 * len 0, key and checksum 0 (UDP accepts an uncomputed checksum). */
static void fill_headers(unsigned char *d, uint64_t job)
{
    memset(d, 0, FLOOD_BYTES);
    for (size_t at = 0; at + WIRE_HEADER_BYTES <= FLOOD_BYTES; at += WIRE_HEADER_BYTES) {
        unsigned char *h = d + at;
        put32(h, WIRE_MAGIC);
        h[4] = WIRE_VERSION;
        h[5] = WIRE_DATA;
        put32(h + WIRE_OFF_JOB, (uint32_t)job);
        put32(h + WIRE_OFF_JOB + 4, (uint32_t)(job >> 32));
        put32(h + 28, 1); /* dst */
        put32(h + 32, 7); /* src_inc */
        put32(h + 40, 1); /* seq */
    }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s ADDR PORT_LO PORT_HI SECONDS JOB_HEX|junk\n", argv[0]);
        return 2;
    }
    struct sockaddr_in to = {.sin_family = AF_INET};
    unsigned lo = (unsigned)atoi(argv[2]), hi = (unsigned)atoi(argv[3]);
    double secs = atof(argv[4]);
    if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 || !lo || hi < lo || hi > 65535 || secs <= 0) {
        fprintf(stderr, "udp_flood: bad address, port range or time\n");
        return 2;
    }
    static unsigned char d[FLOOD_BYTES];
    if (strcmp(argv[5], "junk") == 0)
        memset(d, 0xab, sizeof d);
    else
        fill_headers(d, strtoull(argv[5], NULL, 16));
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("udp_flood: socket");
        return 1;
    }
    unsigned long long tries = 0, sent = 0;
    double t0 = now_s(), t = t0;
    for (unsigned port = lo; t - t0 < secs; port = port == hi ? lo : port + 1) {
        to.sin_port = htons((uint16_t)port);
        /* failures (ECONNREFUSED: an earlier datagram met a closed port) are only counted */
        sent += sendto(fd, d, sizeof d, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)sizeof d;
        if (++tries % 64 == 0)
            t = now_s();
    }
    printf("udp_flood: %llu datagrams of %u bytes in %.1f s (%.0f MB/s), %llu not sent\n", sent, FLOOD_BYTES,
           t - t0, (double)sent * FLOOD_BYTES / (t - t0) / 1e6, tries - sent);
    close(fd);
    return 0;
}
