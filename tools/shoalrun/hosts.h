/* Where a multi-host job runs: the host list of --hosts or --hostfile, the
 * placement of ranks on it, and the remote-shell command that starts an
 * agent on a host (docs/BOOT.md, "Several hosts").  Pure functions: errors
 * come back as text for the caller to print. */
#ifndef SHOALRUN_HOSTS_H
#define SHOALRUN_HOSTS_H

#include <stddef.h>

struct host {
    char *name;   /* opaque: handed to the remote-shell template, never resolved */
    int slots;    /* ranks it may run; 0 when not given */
    int nranks;   /* ranks placed on it */
};

/* Parse "h1,h2:4,..." or a hostfile into a new array *hs of *n hosts
 * (hosts_free releases it).  Return 0, or -1 with the reason in err and
 * nothing allocated. */
int hosts_parse_list(const char *spec, struct host **hs, int *n, char *err, size_t errlen);
int hosts_parse_file(const char *path, struct host **hs, int *n, char *err, size_t errlen);

void hosts_free(struct host *hs, int n);

/* Places np ranks in blocks in host order and drops hosts left without a
 * rank (possible only with slots).  Return 0, or -1 with the reason. */
int hosts_place(struct host *hs, int *n, int np, char *err, size_t errlen);

/* The remote shell's argv for host: the template's whitespace-separated
 * words with every "{host}" replaced (the host appended as a last word if
 * none names it), then the extra words.  NULL-terminated; NULL when out of
 * memory or the template has no word. */
char **hosts_rsh_argv(const char *tmpl, const char *host, char *const extra[], int nextra);

#endif
