/* Trace files: records written come back field for field (across the
 * writer's buffer), and a truncated or foreign file is refused with
 * SHOAL_EINVAL, not read as records. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shoal.h"
#include "cosmos/trace.h"
#include "../common/check.h"

/* More than the writer buffers (4096 records), so a flush happens mid-way. */
#define NRECS 10000u
static const uint64_t job = 0xabcdef0123ull;

static struct cosmos_rec rec_of(unsigned i)
{
    struct cosmos_rec r = {
        .block = ((uint64_t)(i % 3) << 32) | (i * 7919u),
        .sender = i % 5,
        .role = (uint8_t)(i % 3),
        .type = (uint8_t)(i % 3 == 2 ? 1 + i % 2 : 1 + i % (COSMOS_TYPE_COUNT - 1)),
        .proto = (uint8_t)(i * 13),
        .cause = (uint8_t)(i % 8),
        .seq = i + (1ull << 40),
    };
    return r;
}

static void path_of(char *buf, size_t n, const char *dir)
{
    snprintf(buf, n, "%s/cosmos-%llx-r1.trace", dir, (unsigned long long)job);
}

static void write_trace(const char *dir, unsigned nrecs)
{
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
    struct cosmos_trace_w *w;
    CHECK_RC(cosmos_trace_open_write(dir, job, 1, 3, &w), SHOAL_OK);
    for (unsigned i = 0; i < nrecs; i++) {
        struct cosmos_rec r = rec_of(i);
        cosmos_trace_put(w, &r);
    }
    CHECK_RC(cosmos_trace_close(w), SHOAL_OK);
}

/* Reads the trace at path to its end; returns the last cosmos_trace_next
 * result and the records read in *n. */
static int read_all(const char *path, unsigned *n)
{
    struct cosmos_trace_r *r;
    struct cosmos_trace_hdr h;
    CHECK_RC(cosmos_trace_open_read(path, &r, &h), SHOAL_OK);
    CHECK(h.version == 1 && h.rank == 1 && h.nranks == 3 && h.job_id == job,
          "header: version %u rank %u nranks %u job %llx", h.version, h.rank, h.nranks,
          (unsigned long long)h.job_id);
    struct cosmos_rec got;
    int rc;
    for (*n = 0; (rc = cosmos_trace_next(r, &got)) == 1; (*n)++) {
        struct cosmos_rec want = rec_of(*n);
        CHECK(got.block == want.block && got.sender == want.sender && got.role == want.role &&
              got.type == want.type && got.proto == want.proto && got.cause == want.cause &&
              got.seq == want.seq, "record %u differs", *n);
    }
    cosmos_trace_close_read(r);
    return rc;
}

static void test_roundtrip(const char *dir)
{
    write_trace(dir, NRECS);
    char path[512];
    path_of(path, sizeof path, dir);
    struct stat st;
    CHECK(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
    CHECK(st.st_size == 64 + 24 * (off_t)NRECS, "file is %lld bytes", (long long)st.st_size);
    /* the header byte by byte, as docs/COSMOS_TRACE.md gives it */
    FILE *f = fopen(path, "rb");
    unsigned char h[64];
    CHECK(f && fread(h, 1, 64, f) == 64, "reading the header");
    fclose(f);
    static const unsigned char want[32] = {'S', 'H', 'C', 'O', 'S', 'M', 'O', 'S', 1, 0, 64, 0,
                                           24, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0,
                                           0x23, 0x01, 0xef, 0xcd, 0xab, 0, 0, 0};
    CHECK(memcmp(h, want, 32) == 0, "header bytes differ from the documented layout");
    for (int i = 32; i < 64; i++)
        CHECK(h[i] == 0, "header byte %d is %u, not 0", i, h[i]);
    unsigned n;
    CHECK_RC(read_all(path, &n), 0);
    CHECK(n == NRECS, "read %u records of %u", n, NRECS);
    CHECK(strcmp(cosmos_type_name(COSMOS_GET_RO_REQ), "get_ro_request") == 0 &&
          strcmp(cosmos_type_name(COSMOS_INVAL_RW_REQ), "inval_rw_request") == 0 &&
          strcmp(cosmos_type_name(0), "?") == 0 && strcmp(cosmos_type_name(99), "?") == 0,
          "type names");
}

static void test_truncated(const char *dir)
{
    write_trace(dir, 100);
    char path[512];
    path_of(path, sizeof path, dir);
    CHECK(truncate(path, 64 + 24 * 50 + 10) == 0, "truncate: %s", strerror(errno));
    unsigned n;
    CHECK_RC(read_all(path, &n), SHOAL_EINVAL);
    CHECK(n == 50, "%u whole records before the cut, expected 50", n);
    /* a header cut short is refused at open */
    CHECK(truncate(path, 40) == 0, "truncate: %s", strerror(errno));
    struct cosmos_trace_r *r;
    struct cosmos_trace_hdr h;
    CHECK_RC(cosmos_trace_open_read(path, &r, &h), SHOAL_EINVAL);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.trace", dir);
    CHECK_RC(cosmos_trace_open_read(missing, &r, &h), SHOAL_ESYS);
}

/* Overwrites bytes at off in the trace and expects open to refuse it. */
static void expect_refused(const char *path, long off, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, off, SEEK_SET) == 0 && fwrite(bytes, 1, n, f) == n, "patching %s", path);
    fclose(f);
    struct cosmos_trace_r *r;
    struct cosmos_trace_hdr h;
    CHECK_RC(cosmos_trace_open_read(path, &r, &h), SHOAL_EINVAL);
}

static void test_bad_header(const char *dir)
{
    char path[512];
    path_of(path, sizeof path, dir);
    write_trace(dir, 10);
    expect_refused(path, 0, "SHCOSMOZ", 8);
    write_trace(dir, 10);
    expect_refused(path, 8, "\x02\x00", 2); /* version 2 */
    write_trace(dir, 10);
    expect_refused(path, 12, "\x20\x00", 2); /* 32-byte records */
    write_trace(dir, 10);
    expect_refused(path, 16, "\x03\x00\x00\x00", 4); /* rank 3 of 3 */
    /* a record with a type no writer produces is corrupt, named by offset */
    write_trace(dir, 10);
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, 64 + 24 * 4 + 13, SEEK_SET) == 0 && fputc(15, f) == 15, "patching");
    fclose(f);
    unsigned n;
    CHECK_RC(read_all(path, &n), SHOAL_EINVAL);
    CHECK(n == 4, "%u records before the corrupt one, expected 4", n);
    struct cosmos_trace_w *w;
    CHECK_RC(cosmos_trace_open_write(dir, job, 3, 3, &w), SHOAL_EINVAL);
    CHECK_RC(cosmos_trace_open_write("/nonexistent/dir", job, 0, 1, &w), SHOAL_ESYS);
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: %s roundtrip|truncated|bad_header DIR", argv[0]);
    if (strcmp(argv[1], "roundtrip") == 0)
        test_roundtrip(argv[2]);
    else if (strcmp(argv[1], "truncated") == 0)
        test_truncated(argv[2]);
    else if (strcmp(argv[1], "bad_header") == 0)
        test_bad_header(argv[2]);
    else
        CHECK(0, "unknown test %s", argv[1]);
    printf("ok\n");
    return 0;
}
