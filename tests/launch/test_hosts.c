/* shoalrun's host lists, placement and remote-shell commands (hosts.c),
 * checked directly: every accepted form, every refused one with its
 * message. */
#include "hosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            failures++;                                                                \
        }                                                                              \
    } while (0)

static char err[1200];

/* Places the hosts a parser gave (rc 0) for np ranks; "NAME=RANKS ..." of
 * the result, or "!" + the parser's or the placement's error. */
static const char *placed(int rc, struct host *hs, int n, int np)
{
    static char out[1300];
    if (rc || hosts_place(hs, &n, np, err, sizeof err)) {
        hosts_free(hs, n);
        snprintf(out, sizeof out, "!%s", err);
        return out;
    }
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s=%d", i ? " " : "",
                 hs[i].name, hs[i].nranks);
    hosts_free(hs, n);
    return out;
}

/* want: the exact result, or "!" + a part of the error message. */
static void expect(const char *what, const char *input, int np, const char *got, const char *want)
{
    int ok = want[0] == '!' ? got[0] == '!' && strstr(got, want + 1) != NULL : !strcmp(got, want);
    if (!ok) {
        fprintf(stderr, "%s \"%s\" for %d = \"%s\", want \"%s\"\n", what, input, np, got, want);
        failures++;
    }
}

static void check_place(const char *spec, int np, const char *want)
{
    struct host *hs;
    int n;
    int rc = hosts_parse_list(spec, &hs, &n, err, sizeof err);
    expect("host list", spec, np, placed(rc, hs, n, np), want);
}

static void check_lists(void)
{
    check_place("a", 3, "a=3");
    check_place("a,b", 4, "a=2 b=2");
    check_place("a,b,c,d", 10, "a=3 b=3 c=2 d=2");
    check_place("10.78.0.1,10.78.0.2", 3, "10.78.0.1=2 10.78.0.2=1");
    check_place("a:3,b:1", 4, "a=3 b=1");
    check_place("a:3,b:5", 4, "a=3 b=1");
    check_place("a:4,b:4", 2, "a=2");          /* b gets no rank and no agent */
    check_place("a:2,b:1", 4, "!the hosts have 3 slots for 4 ranks");
    check_place("a:2,b", 2, "!give slots for every host or for none");
    check_place("a,b,c", 2, "!3 hosts for 2 ranks");
    check_place("a,a", 2, "!host a is listed twice");
    check_place("a,,b", 2, "!empty host name");
    check_place("", 2, "!empty host name");
    check_place("a:0", 2, "!slots must be");
    check_place("a:x", 2, "!slots must be");
    check_place("a:", 2, "!bad slot count");
    check_place("a b", 2, "!no spaces");
}

static void check_file(const char *text, int np, const char *want)
{
    char path[] = "/tmp/shoal-hostfile-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    struct host *hs;
    int n;
    int rc = hosts_parse_file(path, &hs, &n, err, sizeof err);
    expect("hostfile", text, np, placed(rc, hs, n, np), want);
    unlink(path);
}

static void check_files(void)
{
    check_file("# the cluster\nn0\n\n  n1   # second\nn2\n", 3, "n0=1 n1=1 n2=1");
    check_file("n0 slots=2\nn1:2\n", 4, "n0=2 n1=2");
    check_file("n0 slots=2\tslots=3\n", 2, "!line 1: expected \"slots=K\"");
    check_file("n0 cpus=2\n", 2, "!line 1: expected \"slots=K\"");
    check_file("n0\nn1 slots=0\n", 2, "!line 2: slots must be");
    check_file("n0\nn0\n", 2, "!line 2: host n0 is listed twice");
    check_file("# nothing\n\n", 2, "!names no host");
    struct host *hs;
    int n;
    CHECK(hosts_parse_file("/nonexistent/hosts", &hs, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot read hostfile /nonexistent/hosts") != NULL);
}

static void check_argv(const char *tmpl, const char *host, const char *want)
{
    char *extra[] = {"/bin/shoalrun", "--agent"};
    char **argv = hosts_rsh_argv(tmpl, host, extra, 2);
    char got[512] = "";
    for (int i = 0; argv && argv[i]; i++) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "|" : "", argv[i]);
        free(argv[i]);
    }
    free(argv);
    if (strcmp(got, want)) {
        fprintf(stderr, "rsh \"%s\" for %s = \"%s\", want \"%s\"\n", tmpl, host, got, want);
        failures++;
    }
}

static void check_rsh(void)
{
    check_argv("ssh", "10.0.0.1", "ssh|10.0.0.1|/bin/shoalrun|--agent");
    check_argv("  ssh  -p 22 ", "h", "ssh|-p|22|h|/bin/shoalrun|--agent");
    check_argv("ip netns exec {host}", "shoal-n1", "ip|netns|exec|shoal-n1|/bin/shoalrun|--agent");
    check_argv("env X={host}:{host} Y={host}", "b", "env|X=b:b|Y=b|/bin/shoalrun|--agent");
    check_argv("   ", "h", "");
}

int main(void)
{
    check_lists();
    check_files();
    check_rsh();
    if (failures)
        fprintf(stderr, "test_hosts: %d failures\n", failures);
    else
        printf("test_hosts: ok\n");
    return failures ? 1 : 0;
}
