/* What a rank prints when it crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT): the signal, the faulting address and why, then a backtrace,
 * symbolized by addr2line where binutils is installed; then the signal's
 * default action, so the process still dies of it and the launcher reports
 * "killed by signal N" (not in sanitizer builds, whose reports say more).
 * Only async-signal-safe calls, apart from dladdr,
 * which crash handlers commonly rely on (it takes the loader's lock, which a
 * crash inside the loader would hold: then the handler hangs until the
 * launcher's grace period ends the rank).  A program that installed its own
 * handler for a signal (or ignores it) keeps it. */
#include "util.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define CRASH_FRAMES 64
#define CRASH_ALTSTACK (64 * 1024)
#define CRASH_ADDR2LINE_MS 3000 /* a symbolizer that hangs cannot keep the rank alive */

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static char crash_who[96]; /* "shoal: rank R on HOST" */
static char crash_exe[4096]; /* this program's file: glibc names it by argv[0], not a path */

/* snprintf is not async-signal-safe: numbers by hand. */
static size_t fmt_hex(char *out, uintptr_t v)
{
    char tmp[2 + 16];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    out[0] = '0';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++)
        out[2 + i] = tmp[n - 1 - i];
    return n + 2;
}

static void put(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static const char *code_text(int sig, int code)
{
    if (sig == SIGSEGV)
        return code == SEGV_MAPERR ? "address not mapped" : code == SEGV_ACCERR ? "no permission for that access" : NULL;
    if (sig == SIGBUS)
        return code == BUS_ADRALN ? "misaligned address" : code == BUS_ADRERR ? "no such physical address (past the end of a mapped file?)" : NULL;
    if (sig == SIGFPE)
        return code == FPE_INTDIV ? "integer division by zero" : code == FPE_INTOVF ? "integer overflow" : NULL;
    return NULL;
}

static void put_header(int sig, const siginfo_t *si)
{
    char hex[20];
    put(crash_who);
    put(": fatal: ");
    put(sigabbrev_np(sig) ? "SIG" : "signal ");
    put(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    put(" (");
    put(sigdescr_np(sig) ? sigdescr_np(sig) : "unknown signal");
    put(")");
    if (sig != SIGABRT) {
        hex[fmt_hex(hex, (uintptr_t)si->si_addr)] = '\0';
        put(" at address ");
        put(hex);
        const char *why = code_text(sig, si->si_code);
        if (why) {
            put(": ");
            put(why);
        }
    }
    put("\n");
}

/* Runs addr2line on the frames that belong to module `path`, as offsets
 * into it; prints "  #i function at file:line" lines. */
static void symbolize(const char *path, char offs[][20], int n)
{
    char *argv[8 + CRASH_FRAMES];
    int a = 0;
    argv[a++] = "addr2line";
    argv[a++] = "-f";
    argv[a++] = "-p";
    argv[a++] = "-C";
    argv[a++] = "-e";
    argv[a++] = (char *)path;
    for (int i = 0; i < n; i++)
        argv[a++] = offs[i];
    argv[a] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1);
        char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
        execve("/usr/bin/addr2line", argv, envp);
        _exit(127);
    }
    if (pid < 0)
        return;
    for (int waited = 0; waited < CRASH_ADDR2LINE_MS; waited += 10) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void *lookup_addr(void **frames, int i)
{
    return i ? (char *)frames[i] - 1 : frames[i];
}

/* From the faulting instruction outwards: the frames of this handler and
 * the kernel's signal trampoline are left out.  Return addresses point
 * after their call, so each but the first is looked up one byte back. */
static void put_backtrace(void *pc)
{
    void *all[CRASH_FRAMES], **frames = all;
    int n = backtrace(all, CRASH_FRAMES);
    for (int i = 0; i < n; i++)
        if (all[i] == pc) {
            frames = all + i;
            n -= i;
            break;
        }
    put(crash_who);
    put(": backtrace (innermost first):\n");
    if (access("/usr/bin/addr2line", X_OK) != 0) { /* no binutils: exported names only */
        backtrace_symbols_fd(frames, n, 2);
        return;
    }
    static char offs[CRASH_FRAMES][20];
    for (int first = 0; first < n;) {
        Dl_info info;
        if (!dladdr(lookup_addr(frames, first), &info) || !info.dli_fname || !info.dli_fname[0]) {
            first++;
            continue;
        }
        /* addr2line wants offsets into a shared object or PIE, absolute
         * addresses in a fixed-address executable */
        uintptr_t base = ((const Elf64_Ehdr *)info.dli_fbase)->e_type == ET_EXEC ? 0 : (uintptr_t)info.dli_fbase;
        int k = 0;
        for (int i = first; i < n; i++) {
            Dl_info other;
            if (!dladdr(lookup_addr(frames, i), &other) || other.dli_fbase != info.dli_fbase)
                break;
            offs[k][fmt_hex(offs[k], (uintptr_t)lookup_addr(frames, i) - base)] = '\0';
            k++;
        }
        int is_main = !strcmp(info.dli_fname, program_invocation_name) && crash_exe[0];
        symbolize(is_main ? crash_exe : info.dli_fname, offs, k ? k : 1);
        first += k ? k : 1;
    }
}

static void on_crash(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno;
    put_header(sig, si);
    put_backtrace((void *)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP]);
    /* the default action on return: the instruction faults again (or, for
     * SIGABRT and a sent signal, re-raising it) and the process dies of it */
    signal(sig, SIG_DFL);
    if (si->si_code <= 0 || sig == SIGABRT)
        raise(sig);
    errno = saved;
}

/* The program's own handler stays.  A library's does not, even without a
 * report: libfabric pulls in libpsm_infinipath, whose constructor installs
 * a SIGSEGV handler that exits with status 1, so the launcher would report
 * a crash as an ordinary failure. */
static int crash_program_handles(const struct sigaction *sa)
{
    void *fn = sa->sa_flags & SA_SIGINFO ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
    if (!(sa->sa_flags & SA_SIGINFO) && (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN))
        return sa->sa_handler == SIG_IGN;
    Dl_info info;
    return !dladdr(fn, &info) || !info.dli_fname || !strcmp(info.dli_fname, program_invocation_name);
}

void util_crash_init(int rank, int report)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)rank, (void)report; /* the sanitizer's handler stays: its report says more */
    return;
#endif
    snprintf(crash_who, sizeof crash_who, "shoal: rank %d on %s", rank, util_hostname());
    static int installed;
    if (installed)
        return;
    installed = 1;
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc's unwinder now, not in the handler */
    ssize_t len = readlink("/proc/self/exe", crash_exe, sizeof crash_exe - 1);
    crash_exe[len > 0 ? len : 0] = '\0';
    static char altstack[CRASH_ALTSTACK]; /* a stack overflow leaves no stack to report on */
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(crash_signals[i], NULL, &old) || crash_program_handles(&old))
            continue;
        struct sigaction sa = {.sa_sigaction = on_crash, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND};
        if (!report)
            sa = (struct sigaction){.sa_handler = SIG_DFL};
        sigemptyset(&sa.sa_mask);
        sigaction(crash_signals[i], &sa, NULL);
    }
}
