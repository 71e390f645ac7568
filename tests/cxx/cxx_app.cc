// A C++ program on shoal's public headers: active messages with shoal_args
// (arguments of mixed types, each evaluated once), a medium message, and a
// CRL region every rank increments.  Built at every C++ standard from 11 to
// 20 (tests/cxx/CMakeLists.txt) and run under shoalrun.
#include <shoal.h>
#include <shoal/crl.h>
#include <shoal/gamma.h> // compiles as C++ too (not run here: tests/gamma)

#include <cstdio>
#include <cstring>

namespace {

enum { H_ARGS = 1, H_MEDIUM = 2, H_ACK = 3 };
volatile uint64_t acks, args_ok, medium_ok;

void fail(const char *what)
{
    shoal_abort(1, "cxx_app (C++ %ld): %s", static_cast<long>(__cplusplus), what);
}

void on_args(shoal_token_t tok, void *, size_t, const uint64_t *a, unsigned n)
{
    // sent as shoal_args(me, -7, 2.75, 'x', next()): C's conversions
    if (n != 5 || a[1] != static_cast<uint64_t>(-7) || a[2] != 2 || a[3] != 'x' || a[4] != 1)
        fail("short request arrived with the wrong arguments");
    args_ok = args_ok + 1; // C++20 deprecates ++ on volatile
    if (shoal_am_reply_short(tok, H_ACK, 0, shoal_args(a[0])) != SHOAL_OK)
        fail("reply");
}

void on_medium(shoal_token_t tok, void *buf, size_t len, const uint64_t *a, unsigned n)
{
    const char *p = static_cast<const char *>(buf);
    if (n != 1 || len != a[0] || len < 2 || p[0] != 'c' || p[len - 1] != '+')
        fail("medium request arrived damaged");
    medium_ok = medium_ok + 1;
    if (shoal_am_reply_short(tok, H_ACK, 0, shoal_noargs) != SHOAL_OK)
        fail("reply");
}

void on_ack(shoal_token_t, void *, size_t, const uint64_t *, unsigned)
{
    acks = acks + 1;
}

int calls;
int next()
{
    return ++calls;
}

void check(int rc, const char *what)
{
    if (rc != SHOAL_OK)
        fail(what);
}

} // namespace

int main(int argc, char **argv)
{
    check(shoal_am_register(H_ARGS, on_args), "register");
    check(shoal_am_register(H_MEDIUM, on_medium), "register");
    check(shoal_am_register(H_ACK, on_ack), "register");
    check(shoal_init(&argc, &argv), "shoal_init");
    crl_init();
    int me = shoal_rank(), n = shoal_size(), right = (me + 1) % n;

    check(shoal_am_request_short(right, H_ARGS, 0, shoal_args(me, -7, 2.75, 'x', next())), "request");
    if (calls != 1)
        fail("shoal_args evaluated an argument more than once");
    char text[100];
    std::memset(text, '.', sizeof text);
    text[0] = 'c';
    text[sizeof text - 1] = '+';
    check(shoal_am_request_medium(right, H_MEDIUM, 0, text, sizeof text, shoal_args(sizeof text)), "medium");
    check(shoal_wait_until(&acks, 2), "waiting for the acks");
    check(shoal_wait_until(&args_ok, 1), "waiting for the short request");
    check(shoal_wait_until(&medium_ok, 1), "waiting for the medium request");

    rid_t rid = 0;
    if (me == 0)
        rid = rgn_create(sizeof(int));
    if (me == 0)
        rgn_bcast_send(sizeof rid, &rid);
    else
        rgn_bcast_recv(sizeof rid, &rid);
    int *count = static_cast<int *>(rgn_map(rid));
    rgn_start_write(count);
    ++*count;
    rgn_end_write(count);
    rgn_barrier();
    rgn_start_read(count);
    int total = *count;
    rgn_end_read(count);
    if (total != n)
        fail("the CRL counter missed increments");
    rgn_unmap(count);
    if (me == 0)
        std::printf("cxx_app: C++ %ld, %d ranks: arguments, medium and CRL region as in C\n",
                    static_cast<long>(__cplusplus), n);
    crl_exit();
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
