/* The MPI side of the comparison: the same measurements as shoal_bench,
 * through the two MPI libraries Debian ships.  bench/compare builds this
 * file with mpicc.openmpi and mpicc.mpich and runs it on 2 ranks bound one
 * per core.  Tests (rank 0 prints):
 *   lat      MPI_Send/MPI_Recv ping-pong, the same size each way; half round
 *            trip per size, from 0 bytes and then --min .. --max ("lat").
 *   bw       streaming: rank 0 keeps --window MPI_Isend in flight, rank 1
 *            receives them and answers every window with a 0-byte ack;
 *            GB/s per size ("bw").
 *   rate     the same stream with 8-byte messages; million messages per
 *            second ("rate").
 *   bcast    back-to-back MPI_Bcast, the root rotating over the ranks (rank
 *            i mod N for the i-th): a root cannot start before the previous
 *            broadcast reached it, so the mean time per call is the latency
 *            to deliver to one rank ("bcast_lat", per size), as shoal_bench's.
 *   barrier  mean time of back-to-back MPI_Barrier calls ("barrier_lat").
 *            A barrier synchronizes, so consecutive calls cannot overlap and
 *            the loop mean is the already-synchronized case of Ciaccio's GAMMA thesis
 *            §5.4 without a clock read inside every call. */
#include "common.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static void pingpong(char *buf, size_t size, long n)
{
    int peer = 1 - rank;
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
    }
}

/* n messages of `size` bytes from rank 0 to rank 1 in windows of w; each
 * message of a window has its own buffer slot so none is overwritten
 * while in flight. */
static void stream(char *buf, size_t size, long n, int w, MPI_Request *req, MPI_Status *st)
{
    for (long done = 0; done < n; done += w) {
        int k = n - done < w ? (int)(n - done) : w;
        for (int j = 0; j < k; j++) {
            char *slot = buf + (size_t)j * size;
            if (rank == 0)
                MPI_Isend(slot, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[j]);
            else
                MPI_Irecv(slot, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[j]);
        }
        /* A real status array: MPICH's MPI_STATUSES_IGNORE, a cast
         * constant, trips GCC's -Wstringop-overflow. */
        MPI_Waitall(k, req, st);
        if (rank == 0)
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = "mpi", .batches = 7, .iters = 0,
        .min_size = 8, .max_size = 1u << 20, .window = 16,
    };
    double v[BENCH_MAX_BATCHES];
    int b;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (bench_parse(argc, argv, &o, "lat bw rate barrier bcast") < 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (nranks != 2 && strcmp(o.test, "barrier") != 0 && strcmp(o.test, "bcast") != 0)
        bench_die("%s needs exactly 2 ranks", o.test);
    bench_pin_if_unpinned(rank);

    int is_stream = strcmp(o.test, "bw") == 0 || strcmp(o.test, "rate") == 0;
    int is_rate = strcmp(o.test, "rate") == 0;
    if (o.iters == 0) /* a streamed message costs a fraction of a round trip */
        o.iters = is_rate ? 200000 : 20000;
    size_t lo = is_rate ? 8 : o.min_size, hi = is_rate ? 8 : o.max_size;
    size_t buf_len = hi * (is_stream ? (size_t)o.window : 1);
    char *buf = malloc(buf_len ? buf_len : 1);
    MPI_Request *req = malloc(sizeof *req * (size_t)o.window);
    MPI_Status *st = malloc(sizeof *st * (size_t)o.window);
    if (!buf || !req || !st)
        bench_die("out of memory");
    memset(buf, 0xa5, buf_len);

    if (strcmp(o.test, "lat") == 0) {
        /* Size 0 first: the minimal message of Ciaccio's GAMMA thesis §2.1.1. */
        for (size_t s = 0; s <= o.max_size; s = s ? s * 2 : o.min_size) {
            long n = bench_iters_for(&o, s);
            for (b = -1; b < o.batches; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = bench_now();
                pingpong(buf, s, n);
                if (b >= 0)
                    v[b] = (bench_now() - t0) / (double)n / 2 * 1e6;
            }
            if (rank == 0)
                bench_emit(&o, "lat", s, nranks, "us", n, v, o.batches);
        }
    } else if (is_stream) {
        for (size_t s = lo; s <= hi; s *= 2) {
            long n = bench_iters_for(&o, s);
            for (b = -1; b < o.batches; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = bench_now();
                stream(buf, s, n, o.window, req, st);
                double t = bench_now() - t0;
                if (b >= 0)
                    v[b] = is_rate ? (double)n / t / 1e6 : (double)n * (double)s / t / 1e9;
            }
            if (rank == 0)
                bench_emit(&o, is_rate ? "rate" : "bw", s, nranks,
                           is_rate ? "Mmsg/s" : "GB/s", n, v, o.batches);
        }
    } else if (strcmp(o.test, "bcast") == 0) {
        for (size_t s = o.min_size; s <= o.max_size; s *= 2) {
            long n = bench_iters_for(&o, s) / 4 + 1;
            for (b = -1; b < o.batches; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = bench_now();
                for (long i = 0; i < n; i++)
                    MPI_Bcast(buf, (int)s, MPI_BYTE, (int)(i % nranks), MPI_COMM_WORLD);
                if (b >= 0)
                    v[b] = (bench_now() - t0) / (double)n * 1e6;
            }
            if (rank == 0)
                bench_emit(&o, "bcast_lat", s, nranks, "us", n, v, o.batches);
        }
    } else {
        for (b = -1; b < o.batches; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bench_now();
            for (long i = 0; i < o.iters; i++)
                MPI_Barrier(MPI_COMM_WORLD);
            if (b >= 0)
                v[b] = (bench_now() - t0) / (double)o.iters * 1e6;
        }
        if (rank == 0)
            bench_emit(&o, "barrier_lat", 0, nranks, "us", o.iters, v, o.batches);
    }
    free(st);
    free(req);
    free(buf);
    MPI_Finalize();
    return 0;
}
