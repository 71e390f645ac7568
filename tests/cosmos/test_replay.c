/* shoal-cosmos replay on traces this test writes with the trace writer:
 * exact accuracies of a hand-made job, and a clear refusal (message, exit
 * status) of every kind of bad input.
 *
 *   test_cosmos_replay TOOL WORKDIR tables|windows|corrupt|mixed|missing|empty|sender|usage */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "shoal.h"
#include "cosmos/trace.h"
#include "../common/check.h"

static const char *tool, *work;
static const uint64_t job = 0x5eed19ull;

static void put(struct cosmos_trace_w *w, uint64_t block, uint32_t sender, uint8_t role, uint8_t type,
                uint64_t *seq)
{
    struct cosmos_rec r = {.block = block, .sender = sender, .role = role, .type = type, .seq = (*seq)++};
    cosmos_trace_put(w, &r);
}

/* Fig. 6-2's shared counter for 100 iterations, 3 ranks: rank 0 is the
 * home of block 1 and hears <1,get_rw_request>, <2,inval_ro_response>,
 * <2,get_ro_request>, <1,inval_rw_response>; rank 1 (producer) hears
 * get_rw_response, inval_rw_request; rank 2 (consumer) get_ro_response,
 * inval_ro_request, all from rank 0; each rank marks a barrier after every
 * iteration.  `ranks` says which ranks' traces to write (bit mask). */
static void write_job(const char *dir, uint64_t jobid, unsigned ranks)
{
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
    static const uint8_t home[4][2] = {{1, COSMOS_GET_RW_REQ}, {2, COSMOS_INVAL_RO_RESP},
                                       {2, COSMOS_GET_RO_REQ}, {1, COSMOS_INVAL_RW_RESP}};
    static const uint8_t cache[3][2] = {{0, 0},
                                        {COSMOS_GET_RW_RESP, COSMOS_INVAL_RW_REQ},
                                        {COSMOS_GET_RO_RESP, COSMOS_INVAL_RO_REQ}};
    for (int r = 0; r < 3; r++) {
        if (!(ranks & (1u << r)))
            continue;
        struct cosmos_trace_w *w;
        CHECK_RC(cosmos_trace_open_write(dir, jobid, r, 3, &w), SHOAL_OK);
        uint64_t seq = 0, marks = 0;
        for (int it = 0; it < 100; it++) {
            for (int m = 0; m < (r == 0 ? 4 : 2); m++) {
                if (r == 0)
                    put(w, 1, home[m][0], COSMOS_ROLE_HOME, home[m][1], &seq);
                else
                    put(w, 1, 0, COSMOS_ROLE_REMOTE, cache[r][m], &seq);
            }
            put(w, 0, 0, COSMOS_ROLE_MARKER, COSMOS_MARK_BARRIER, &marks);
        }
        CHECK_RC(cosmos_trace_close(w), SHOAL_OK);
    }
}

/* Runs the tool with args; returns its exit status, output in *out and
 * *err (static buffers). */
static int run(const char *args, char **out, char **err)
{
    static char obuf[1 << 16], ebuf[1 << 14];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >%s/out.txt 2>%s/err.txt", tool, args, work, work);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st), "%s did not exit normally", cmd);
    char path[1024];
    char *bufs[2] = {obuf, ebuf};
    size_t sizes[2] = {sizeof obuf, sizeof ebuf};
    const char *names[2] = {"out.txt", "err.txt"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", work, names[i]);
        FILE *f = fopen(path, "r");
        CHECK(f, "open %s", path);
        size_t n = fread(bufs[i], 1, sizes[i] - 1, f);
        bufs[i][n] = 0;
        fclose(f);
    }
    *out = obuf;
    *err = ebuf;
    return WEXITSTATUS(st);
}

static void expect_in(const char *text, const char *want, const char *what)
{
    CHECK(strstr(text, want), "%s: \"%s\" not in:\n%s", what, want, text);
}

static char *subdir(const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", work, name);
    return buf;
}

/* Accuracies by hand.  Depth d: the home's cycle has 4 distinct histories,
 * so d + 4 of its 400 messages are not predicted and the rest hit; each
 * cache's cycle has 2, so d + 2 of its 200.  Depth 1: C 394/400 = 0.985,
 * D 395/400 = 0.9875, O 789/800 = 0.98625; depth 2: 392, 394, 786; depth
 * 3: 390, 393, 783; depth 4: 388, 392, 780.  The sender index at depth 1:
 * the home's two senders each alternate two types, 3 of 200 unpredicted
 * each: D 394/400, C as before, O 788/800.  No misses anywhere, so the
 * filters change nothing.  Memory at depth 1: 3 MHRs (block 1 at each
 * rank's one busy side), 4 + 2 + 2 PHT entries: ratio 8/3, overhead
 * 2 (1 + 2 x 8/3) / 128 = 9.8958 %.  With the sender: the home's block has
 * an MHR per sender, 4 in all over the 3 blocks, the same 8 entries:
 * 2 (1 x 4 + 2 x 8) / (128 x 3) = 10.4167 % per block. */
static void test_tables(void)
{
    char *dir = subdir("pc"), *out, *err, args[1200];
    write_job(dir, job, 7);
    snprintf(args, sizeof args, "replay --json %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    static const char *const rows[] = {
        "\"depth\": 1, \"filter\": 0, \"sender_index\": false, \"cache\": 0.985000, \"home\": 0.987500, "
        "\"overall\": 0.986250, \"messages\": 800",
        "\"depth\": 2, \"filter\": 0, \"sender_index\": false, \"cache\": 0.980000, \"home\": 0.985000, "
        "\"overall\": 0.982500, \"messages\": 800",
        "\"depth\": 3, \"filter\": 0, \"sender_index\": false, \"cache\": 0.975000, \"home\": 0.982500, "
        "\"overall\": 0.978750, \"messages\": 800",
        "\"depth\": 4, \"filter\": 0, \"sender_index\": false, \"cache\": 0.970000, \"home\": 0.980000, "
        "\"overall\": 0.975000, \"messages\": 800",
        "\"depth\": 1, \"filter\": 2, \"sender_index\": false, \"cache\": 0.985000, \"home\": 0.987500, "
        "\"overall\": 0.986250, \"messages\": 800",
        "\"depth\": 1, \"filter\": 0, \"sender_index\": true, \"cache\": 0.985000, \"home\": 0.985000, "
        "\"overall\": 0.985000, \"messages\": 800",
        "\"blocks\": 3, \"mhr_entries\": 3, \"pht_entries\": 8, \"ratio\": 2.6667, \"overhead_pct\": 9.8958",
        "\"blocks\": 3, \"mhr_entries\": 4, \"pht_entries\": 8, \"ratio\": 2.0000, \"overhead_pct\": 10.4167",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        expect_in(out, rows[i], "json");
    /* 4 depths, 2 x 2 filtered, 4 with the sender: 12 rows */
    int n = 0;
    for (const char *p = out; (p = strstr(p, "\"depth\"")); p++)
        n++;
    CHECK(n == 12, "%d JSON rows, expected 12", n);

    snprintf(args, sizeof args, "replay %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    const char *shapes[] = {"Table 6.4", "Table 6.5", "Table 6.6", "Table 6.7", "Table 6.8", "Fig. 6-8",
                            "job 5eed19, 3 ranks, 800 messages, 100 barriers"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        expect_in(out, shapes[i], "text");
    /* Table 6.4's depth-1 row starts with C = 98.5 */
    expect_in(out, "    1   0  no    98.5", "Table 6.4 depth 1");

    snprintf(args, sizeof args, "replay --depth 2 --json %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    expect_in(out, rows[1], "--depth 2");
    CHECK(!strstr(out, "\"depth\": 1"), "--depth 2 printed another configuration:\n%s", out);
}

/* Table 6.6 and Fig. 6-8 at depth 1 with windows of 10 barriers, and the
 * warm-up left out.  The
 * consumer's <get_ro_response, inval_ro_request> happens 100 times, the
 * first unpredicted: 99 % hits; of the 797 messages with a predecessor
 * (399 + 199 + 199) it is 100, 12.5 %.  Window 0 (iterations 0-9) holds
 * 40 + 20 + 20 messages of which 5 + 3 + 3 are unpredicted (86.25 %);
 * every later window hits all: steady state 100 %, adapted after one
 * window, 10 iterations. */
static void test_windows(void)
{
    char *dir = subdir("pcw"), *out, *err, args[1200];
    write_job(dir, job, 7);
    snprintf(args, sizeof args, "replay --depth 1 --window 10 %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    const char *line = strstr(out, "<get_ro_response, inval_ro_request>");
    CHECK(line, "no transition line:\n%s", out);
    double refs, hits;
    CHECK(sscanf(line + strlen("<get_ro_response, inval_ro_request>"), "%lf %lf", &refs, &hits) == 2, "%s", line);
    CHECK(refs == 12.5 && hits == 99.0, "transition refs %.1f hits %.1f, expected 12.5 99.0", refs, hits);
    expect_in(out, "0-9                      80", "window 0");
    expect_in(out, "90-99                    80   100.0", "window 9");
    expect_in(out, "steady state 100.0 %", "steady state");
    expect_in(out, "time to adapt: 10 iterations", "time to adapt");

    /* --warmup 2: the first 2 iterations hold every unpredicted message (the
     * home's first 5, each cache's first 3), so the 98 x 8 = 784 counted
     * ones all hit. */
    snprintf(args, sizeof args, "replay --depth 1 --warmup 2 --json %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    expect_in(out, "\"cache\": 1.000000, \"home\": 1.000000, \"overall\": 1.000000, \"messages\": 784", "warm-up");
    expect_in(out, "\"warmup\": 2,", "warm-up");

    /* --pool 1: each key's 4 own PHT entries hold the cycles' 4 and 2
     * histories, so the one-entry pool is never needed and the accuracy is
     * the unbounded one (depth 1: O 789/800). */
    snprintf(args, sizeof args, "replay --depth 1 --pool 1 --json %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    expect_in(out, "\"overall\": 0.986250", "bounded pool");
    expect_in(out, "\"pool\": 1, \"pool_failed\": 0}", "bounded pool");

    /* --until 10: as if the run had ended at each rank's 10th barrier:
     * C 2 x (20 - 3) = 34 of 40, D 40 - 5 = 35 of 40, O 69/80. */
    snprintf(args, sizeof args, "replay --depth 1 --until 10 --json %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    expect_in(out, "\"cache\": 0.850000, \"home\": 0.875000, \"overall\": 0.862500, \"messages\": 80", "until");
}

/* A final gather is no iteration: one rank's home side hears a 2-cycle for
 * 20 iterations, each ending in a barrier, then 8 messages of other types
 * after the last barrier.  Depth 1, windows of 1: window 0 hits 0 of 2,
 * window 1 1 of 2, then all; the tail (window 20, alone) is shown but left
 * out of the steady state (100 %) and of the time to adapt (2: counted in,
 * the tail's 0 % would make it 21). */
static void test_tail(void)
{
    char *dir = subdir("tail"), *out, *err, args[1200];
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
    struct cosmos_trace_w *w;
    CHECK_RC(cosmos_trace_open_write(dir, job + 1, 0, 1, &w), SHOAL_OK);
    uint64_t seq = 0, marks = 0;
    for (int it = 0; it < 20; it++) {
        put(w, 1, 0, COSMOS_ROLE_HOME, COSMOS_GET_RO_REQ, &seq);
        put(w, 1, 0, COSMOS_ROLE_HOME, COSMOS_FLUSH, &seq);
        put(w, 0, 0, COSMOS_ROLE_MARKER, COSMOS_MARK_BARRIER, &marks);
    }
    static const uint8_t gather[4] = {COSMOS_GET_RW_REQ, COSMOS_UPGRADE_REQ, COSMOS_INVAL_RO_RESP,
                                      COSMOS_INVAL_RW_RESP};
    for (int m = 0; m < 8; m++)
        put(w, 1, 0, COSMOS_ROLE_HOME, gather[m % 4], &seq);
    CHECK_RC(cosmos_trace_close(w), SHOAL_OK);
    snprintf(args, sizeof args, "replay --depth 1 --window 1 %s", dir);
    CHECK(run(args, &out, &err) == 0, "exit status, stderr:\n%s", err);
    expect_in(out, "after the last barrier: 8 messages", "tail");
    expect_in(out, "steady state 100.0 %", "steady state");
    expect_in(out, "time to adapt: 2 iterations", "time to adapt");
}

static void expect_refused(const char *dir, int status, const char *want)
{
    char *out, *err, args[1200];
    snprintf(args, sizeof args, "replay %s", dir);
    int st = run(args, &out, &err);
    CHECK(st == status, "exit status %d, expected %d; stderr:\n%s", st, status, err);
    expect_in(err, want, "stderr");
}

/* A trace cut inside a record, and a file that is not a trace. */
static void test_corrupt(void)
{
    char *dir = subdir("cut"), path[1200];
    write_job(dir, job, 7);
    snprintf(path, sizeof path, "%s/cosmos-%llx-r1.trace", dir, (unsigned long long)job);
    FILE *f = fopen(path, "ab");
    CHECK(f && fwrite("0123456789", 1, 10, f) == 10 && fclose(f) == 0, "append to %s", path);
    expect_refused(dir, 1, "cosmos-5eed19-r1.trace: corrupt trace");
    expect_refused(dir, 1, "truncated record at offset 7264"); /* 64 + 300 x 24 */

    dir = subdir("foreign");
    write_job(dir, job, 7);
    snprintf(path, sizeof path, "%s/cosmos-%llx-r2.trace", dir, (unsigned long long)job);
    f = fopen(path, "r+b");
    CHECK(f && fwrite("NOTCOSMO", 1, 8, f) == 8 && fclose(f) == 0, "overwrite %s", path);
    expect_refused(dir, 1, "cosmos-5eed19-r2.trace: not a readable trace");
}

static void test_mixed(void)
{
    char *dir = subdir("mixed");
    write_job(dir, job, 7);
    write_job(dir, job + 1, 1);
    expect_refused(dir, 1, "mixed jobs");
}

static void test_missing(void)
{
    char *dir = subdir("missing");
    write_job(dir, job, 5);
    expect_refused(dir, 1, "has 3 ranks but no trace of rank 1");
}

static void test_empty(void)
{
    char *dir = subdir("empty");
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s", dir);
    expect_refused(dir, 1, "no traces");
    expect_refused(subdir("does-not-exist"), 1, "cannot open the directory");
}

/* A message from rank 7 in a job of 3. */
static void test_sender(void)
{
    char *dir = subdir("sender");
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s", dir);
    struct cosmos_trace_w *w;
    CHECK_RC(cosmos_trace_open_write(dir, job, 0, 1, &w), SHOAL_OK);
    uint64_t seq = 0;
    put(w, 1, 0, COSMOS_ROLE_HOME, COSMOS_GET_RO_REQ, &seq);
    put(w, 1, 7, COSMOS_ROLE_HOME, COSMOS_GET_RO_REQ, &seq);
    CHECK_RC(cosmos_trace_close(w), SHOAL_OK);
    expect_refused(dir, 1, "record 1 has sender 7, not a rank of the job's 1");
}

static void test_usage(void)
{
    char *out, *err;
    const char *bad[] = {"", "replay", "replay --depth 5 x", "replay --filter 3 x", "replay --depth x",
                         "replay --pool 0 x", "replay --until 0 x", "replay --bogus x", "frobnicate x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(run(bad[i], &out, &err) == 2, "\"%s\" not refused as usage", bad[i]);
        expect_in(err, "usage: shoal-cosmos replay", bad[i]);
    }
}

int main(int argc, char **argv)
{
    static const struct test_case tests[] = {{"tables", test_tables},   {"windows", test_windows}, {"corrupt", test_corrupt},
                 {"mixed", test_mixed},     {"missing", test_missing}, {"empty", test_empty},
                 {"sender", test_sender},   {"usage", test_usage},     {"tail", test_tail}};
    CHECK(argc == 4, "usage: %s TOOL WORKDIR test", argv[0]);
    tool = argv[1];
    work = argv[2];
    CHECK(mkdir(work, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", work, strerror(errno));
    TEST_RUN_CASE(tests, argv[3]);
    printf("cosmos.replay.%s: ok\n", argv[3]);
    return 0;
}
