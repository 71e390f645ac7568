/* Wait-for graph text for shoalrun's hang summary (waitgraph.h). */
#include "waitgraph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Appends to buf[0, cap) at *k, truncating silently. */
static void put(char *buf, size_t cap, size_t *k, const char *fmt, ...)
{
    if (*k >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + *k, cap - *k, fmt, ap);
    va_end(ap);
    *k += m > 0 ? (size_t)m : 0;
}

static int edge(const int *w, int n, int i)
{
    return w[i] >= 0 && w[i] < n ? w[i] : -1;
}

int waitgraph_edges(const int *waits_for, int n, char *buf, size_t cap)
{
    size_t k = 0;
    int count = 0;
    if (cap)
        buf[0] = '\0';
    for (int i = 0; i < n; i++)
        if (edge(waits_for, n, i) >= 0)
            put(buf, cap, &k, "%s%d -> %d", count++ ? ", " : "", i, waits_for[i]);
    return count;
}

/* Walks from each rank; a walk that comes back to a rank seen on this same
 * walk has found a cycle, reported once from its lowest rank. */
int waitgraph_cycles(const int *waits_for, int n, char *buf, size_t cap)
{
    int *walk = calloc((size_t)n, sizeof *walk); /* 0 unseen, else 1 + the walk that saw it */
    size_t k = 0;
    int count = 0;
    if (cap)
        buf[0] = '\0';
    if (!walk)
        return 0;
    for (int s = 0; s < n; s++) {
        int i = s;
        while (i >= 0 && !walk[i]) {
            walk[i] = s + 1;
            i = edge(waits_for, n, i);
        }
        if (i < 0 || walk[i] != s + 1)
            continue; /* the end of a chain, or a path into an earlier walk */
        int low = i;
        for (int j = edge(waits_for, n, i); j != i; j = edge(waits_for, n, j))
            low = j < low ? j : low;
        put(buf, cap, &k, "%s%d", count++ ? "; " : "", low);
        int j = low;
        do {
            j = edge(waits_for, n, j);
            put(buf, cap, &k, " -> %d", j);
        } while (j != low);
    }
    free(walk);
    return count;
}
