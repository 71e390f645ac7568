/* The job-wide wait-for graph of a hang report: each waiting rank waits
 * for at most one other (its innermost wait's), so the graph is a set of
 * chains, and each cycle is a deadlock. */
#ifndef SHOALRUN_WAITGRAPH_H
#define SHOALRUN_WAITGRAPH_H

#include <stddef.h>

/* Writes the edges of waits_for[0, n) ("0 -> 1, 2 -> 0"; -1: no edge, an
 * out-of-range rank counts as none) into buf; returns the edge count. */
int waitgraph_edges(const int *waits_for, int n, char *buf, size_t cap);

/* Writes every cycle ("0 -> 1 -> 0; 3 -> 3") into buf, each once, starting
 * at its lowest rank; returns the cycle count. */
int waitgraph_cycles(const int *waits_for, int n, char *buf, size_t cap);

#endif
