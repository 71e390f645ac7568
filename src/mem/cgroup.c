/* Memory cgroup limits.  memfd memory is charged to the rank's memory
 * cgroup, and reserving more than the cgroup has left meets the OOM killer
 * (signal 9) instead of failing; so a reservation is checked against every
 * limit above the rank first (cgroup v1 and v2). */
#include "mem/mem.h"
#include "shoal.h"
#include "util/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room kept free: page tables, kernel memory, what the rank allocates next. */
#define CG_MARGIN (16ull << 20)
#define CG_DIR_LEN (2 * PATH_MAX) /* a mount point and a path in its hierarchy */

struct cg_files {
    const char *limit, *usage;
    const char *cache[2]; /* memory.stat keys of file cache the kernel reclaims before an OOM kill */
};
static const struct cg_files cg_v1 = {"memory.limit_in_bytes", "memory.usage_in_bytes",
                                      {"total_active_file", "total_inactive_file"}};
static const struct cg_files cg_v2 = {"memory.max", "memory.current", {"active_file", "inactive_file"}};

/* The tightest limit found: its cgroup and what it has left. */
struct cg_room {
    char dir[CG_DIR_LEN];
    unsigned long long limit, left;
};

static int read_text(const char *dir, const char *file, char *buf, size_t len)
{
    char path[PATH_MAX + 64];
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
        return -1; /* no cgroup file has so long a path */
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

/* A number file; "max" (v2's no limit) and anything unreadable fail. */
static int read_num(const char *dir, const char *file, unsigned long long *v)
{
    char buf[64], *end;
    if (read_text(dir, file, buf, sizeof buf))
        return -1;
    *v = strtoull(buf, &end, 10);
    return end == buf ? -1 : 0;
}

static unsigned long long stat_value(const char *stat, const char *key)
{
    size_t k = strlen(key);
    for (const char *l = stat; l; l = strchr(l, '\n')) {
        l += *l == '\n';
        if (!strncmp(l, key, k) && l[k] == ' ')
            return strtoull(l + k + 1, NULL, 10);
    }
    return 0;
}

/* Notes in best what the cgroup at dir can still take, if less than what
 * best holds; 0 when dir has no memory limit files. */
static int cg_level(const char *dir, const struct cg_files *fs, struct cg_room *best)
{
    unsigned long long limit, usage;
    char stat[8192]; /* memory.stat: a few dozen lines */
    if (read_num(dir, fs->limit, &limit) || read_num(dir, fs->usage, &usage))
        return 0;
    unsigned long long cache = 0;
    if (read_text(dir, "memory.stat", stat, sizeof stat) == 0)
        cache = stat_value(stat, fs->cache[0]) + stat_value(stat, fs->cache[1]);
    unsigned long long used = usage > cache ? usage - cache : 0;
    unsigned long long left = limit > used ? limit - used : 0;
    if (left < best->left) {
        snprintf(best->dir, sizeof best->dir, "%s", dir);
        best->limit = limit;
        best->left = left;
    }
    return 1;
}

/* This process's path in the hierarchy whose /proc/self/cgroup line
 * matches v1's memory controller, or v2's "0::". */
static int cg_path(int v2, char *path, size_t len)
{
    char buf[4096];
    if (read_text("/proc/self", "cgroup", buf, sizeof buf))
        return -1;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        char *ctl = strchr(l, ':'), *p = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!p)
            continue;
        *p++ = '\0';
        ctl++;
        int match = v2 ? !strcmp(l, "0") && !*ctl : strstr(ctl, "memory") != NULL;
        if (match) {
            snprintf(path, len, "%s", p);
            return 0;
        }
    }
    return -1;
}

/* Mount point and root of the memory hierarchy (v1's memory, else v2). */
static int cg_mount(char *point, char *root, size_t len, int *v2)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char r[PATH_MAX], m[PATH_MAX], type[64], opts[1024];
        const char *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2 ||
            sscanf(sep + 3, "%63s %*s %1023s", type, opts) != 2)
            continue;
        int is_v1 = !strcmp(type, "cgroup") && strstr(opts, "memory");
        if (is_v1 || (!strcmp(type, "cgroup2") && !*v2)) {
            snprintf(point, len, "%s", m);
            snprintf(root, len, "%s", r);
            *v2 = !is_v1;
            found = is_v1; /* a v1 memory hierarchy holds the controller: stop there */
        }
    }
    if (f)
        fclose(f);
    return point[0] ? 0 : -1;
}

/* The tightest memory limit over this process's cgroup and its ancestors. */
static int cg_tightest(struct cg_room *best)
{
    char point[PATH_MAX] = "", root[PATH_MAX] = "", path[PATH_MAX], dir[CG_DIR_LEN];
    int v2 = 0;
    if (cg_mount(point, root, sizeof point, &v2) || cg_path(v2, path, sizeof path))
        return 0;
    size_t rl = strlen(root);
    const char *rel = strcmp(root, "/") && !strncmp(path, root, rl) ? path + rl : path;
    if (!strcmp(rel, "/"))
        rel = ""; /* the hierarchy's root itself */
    snprintf(dir, sizeof dir, "%s%s", point, rel);
    size_t top = strlen(point);
    int limited = 0;
    for (;;) {
        limited |= cg_level(dir, v2 ? &cg_v2 : &cg_v1, best);
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < top)
            return limited;
        *slash = '\0';
    }
}

int mem_cgroup_check(const char *what, size_t bytes, unsigned ranks)
{
    struct cg_room best = {.left = ULLONG_MAX};
    unsigned long long all = ranks && bytes > ULLONG_MAX / ranks ? ULLONG_MAX : (unsigned long long)bytes * ranks;
    if (!cg_tightest(&best) || (best.left >= CG_MARGIN && all <= best.left - CG_MARGIN))
        return SHOAL_OK;
    LOG(LOG_ERROR, "%s of %zu bytes (x %u ranks of this host at once) refused: memory cgroup %s "
        "(limit %llu bytes) has %llu bytes left, less than that plus a %llu-byte margin; "
        "reserving it would bring the OOM killer", what, bytes, ranks, best.dir, best.limit, best.left, CG_MARGIN);
    return SHOAL_ENOMEM;
}
