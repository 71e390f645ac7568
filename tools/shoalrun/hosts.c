/* Host lists, placement and remote-shell commands for shoalrun (see hosts.h). */
#include "hosts.h"
#include "boot/boot.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "{host}"

static __attribute__((format(printf, 3, 4))) int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int parse_slots(const char *s, int *slots)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > BOOT_MAX_RANKS)
        return -1;
    *slots = (int)v;
    return 0;
}

/* Adds "name" or "name:K" (len bytes at s); slots from a separate
 * "slots=K" word come in *slots (0 if none). */
static int add_host(struct host **hs, int *n, const char *s, size_t len, int slots,
                    const char *where, char *err, size_t errlen)
{
    const char *colon = memchr(s, ':', len);
    size_t namelen = colon ? (size_t)(colon - s) : len;
    if (namelen == 0)
        return fail(err, errlen, "%s: empty host name", where);
    if (colon) {
        char num[16];
        size_t k = len - namelen - 1;
        if (slots || k == 0 || k >= sizeof num)
            return fail(err, errlen, "%s: bad slot count in \"%.*s\"", where, (int)len, s);
        memcpy(num, colon + 1, k);
        num[k] = '\0';
        if (parse_slots(num, &slots))
            return fail(err, errlen, "%s: slots must be 1..%d, not \"%s\"", where,
                        BOOT_MAX_RANKS, num);
    }
    for (int i = 0; i < *n; i++)
        if (strlen((*hs)[i].name) == namelen && !memcmp((*hs)[i].name, s, namelen))
            return fail(err, errlen, "%s: host %.*s is listed twice", where, (int)namelen, s);
    if (*n >= BOOT_MAX_RANKS)
        return fail(err, errlen, "%s: more than %d hosts", where, BOOT_MAX_RANKS);
    struct host *grown = realloc(*hs, (size_t)(*n + 1) * sizeof **hs);
    char *name = strndup(s, namelen);
    if (!grown || !name) {
        free(name);
        if (grown)
            *hs = grown;
        return fail(err, errlen, "out of memory");
    }
    *hs = grown;
    (*hs)[(*n)++] = (struct host){.name = name, .slots = slots};
    return 0;
}

void hosts_free(struct host *hs, int n)
{
    for (int i = 0; i < n; i++)
        free(hs[i].name);
    free(hs);
}

/* On failure nothing stays allocated. */
static int parsed(int rc, struct host **hs, int *n)
{
    if (rc) {
        hosts_free(*hs, *n);
        *hs = NULL;
        *n = 0;
    }
    return rc;
}

int hosts_parse_list(const char *spec, struct host **hs, int *n, char *err, size_t errlen)
{
    *hs = NULL;
    *n = 0;
    for (const char *p = spec;;) {
        const char *end = strchrnul(p, ',');
        for (const char *c = p; c < end; c++)
            if (isspace((unsigned char)*c))
                return parsed(fail(err, errlen, "--hosts: no spaces in host names (\"%s\")", spec),
                              hs, n);
        if (add_host(hs, n, p, (size_t)(end - p), 0, "--hosts", err, errlen))
            return parsed(-1, hs, n);
        if (!*end)
            return 0;
        p = end + 1;
    }
}

int hosts_parse_file(const char *path, struct host **hs, int *n, char *err, size_t errlen)
{
    *hs = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, errlen, "cannot read hostfile %s: %s", path, strerror(errno));
    char line[1024], where[1100];
    int rc = 0;
    for (int lineno = 1; rc == 0 && fgets(line, sizeof line, f); lineno++) {
        snprintf(where, sizeof where, "%s line %d", path, lineno);
        if (!strchr(line, '\n') && !feof(f)) {
            rc = fail(err, errlen, "%s: line too long", where);
            break;
        }
        line[strcspn(line, "#\n")] = '\0';
        char *save, *name = strtok_r(line, " \t\r", &save), *word;
        if (!name)
            continue;
        int slots = 0;
        while (rc == 0 && (word = strtok_r(NULL, " \t\r", &save))) {
            if (strncmp(word, "slots=", 6) || slots)
                rc = fail(err, errlen, "%s: expected \"slots=K\", not \"%s\"", where, word);
            else if (parse_slots(word + 6, &slots))
                rc = fail(err, errlen, "%s: slots must be 1..%d, not \"%s\"", where,
                          BOOT_MAX_RANKS, word + 6);
        }
        if (rc == 0)
            rc = add_host(hs, n, name, strlen(name), slots, where, err, errlen);
    }
    if (rc == 0 && ferror(f))
        rc = fail(err, errlen, "cannot read hostfile %s: %s", path, strerror(errno));
    fclose(f);
    if (rc == 0 && *n == 0)
        rc = fail(err, errlen, "hostfile %s names no host", path);
    return parsed(rc, hs, n);
}

int hosts_place(struct host *hs, int *n, int np, char *err, size_t errlen)
{
    int with = 0, total = 0;
    for (int i = 0; i < *n; i++) {
        with += hs[i].slots > 0;
        total += hs[i].slots;
    }
    if (with && with < *n)
        return fail(err, errlen, "give slots for every host or for none (%d of %d have them)",
                    with, *n);
    if (with) {
        if (total < np)
            return fail(err, errlen, "the hosts have %d slots for %d ranks", total, np);
        int left = np;
        for (int i = 0; i < *n; i++) {
            hs[i].nranks = left < hs[i].slots ? left : hs[i].slots;
            left -= hs[i].nranks;
        }
    } else {
        if (*n > np)
            return fail(err, errlen, "%d hosts for %d ranks: every host needs a rank", *n, np);
        for (int i = 0; i < *n; i++)
            hs[i].nranks = np / *n + (i < np % *n);
    }
    int kept = 0;
    for (int i = 0; i < *n; i++) {
        if (hs[i].nranks > 0)
            hs[kept++] = hs[i];
        else
            free(hs[i].name);
    }
    *n = kept;
    return 0;
}

/* word with every TOKEN replaced by host. */
static char *substitute(const char *word, size_t len, const char *host)
{
    size_t hl = strlen(host), tl = strlen(TOKEN), count = 0;
    for (const char *p = word; (p = memmem(p, len - (size_t)(p - word), TOKEN, tl)); p += tl)
        count++;
    char *out = malloc(len + count * hl + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = word; p < word + len;) {
        const char *t = memmem(p, len - (size_t)(p - word), TOKEN, tl);
        size_t k = t ? (size_t)(t - p) : len - (size_t)(p - word);
        memcpy(o, p, k);
        o += k;
        p += k;
        if (t) {
            memcpy(o, host, hl);
            o += hl;
            p += tl;
        }
    }
    *o = '\0';
    return out;
}

char **hosts_rsh_argv(const char *tmpl, const char *host, char *const extra[], int nextra)
{
    size_t cap = strlen(tmpl) / 2 + 3 + (size_t)nextra;
    char **argv = calloc(cap, sizeof *argv);
    int argc = 0, named = 0;
    if (!argv)
        return NULL;
    for (const char *p = tmpl; *p;) {
        while (isspace((unsigned char)*p))
            p++;
        size_t len = 0;
        while (p[len] && !isspace((unsigned char)p[len]))
            len++;
        if (len == 0)
            break;
        named |= memmem(p, len, TOKEN, strlen(TOKEN)) != NULL;
        if (!(argv[argc++] = substitute(p, len, host)))
            goto oom;
        p += len;
    }
    if (argc == 0)
        goto oom;
    if (!named && !(argv[argc++] = strdup(host)))
        goto oom;
    for (int i = 0; i < nextra; i++)
        if (!(argv[argc++] = strdup(extra[i])))
            goto oom;
    return argv;
oom:
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
    return NULL;
}
