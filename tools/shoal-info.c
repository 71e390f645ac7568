/* shoal-info: what this build contains and how it is configured. */
#include "am/am.h"
#include "boot/boot.h"
#include "shm/shm.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The transport list (util/transports.h) and what this build has of it. */
static void print_transports(void)
{
    printf("transports (SHOAL_TRANSPORT):\n");
    for (int t = 0; t < UTIL_TP_COUNT; t++)
        printf("  %-4s %-15s %s\n", util_transport_list[t].name,
               am_transport_built_in((enum util_transport)t) ? "built in" : "not built in", util_transport_list[t].what);
}

static void print_unknown(const char *var, const char *nearest, void *arg)
{
    (void)arg;
    printf("  ! %-22s is set but is not a shoal setting%s%s%s\n", var, nearest ? " (did you mean " : "",
           nearest ? nearest : "", nearest ? "?)" : "");
}

static void print_settings(void)
{
    size_t n;
    const struct util_cfg_entry *t = util_config_table(&n);
    printf("\nSettings (environment; * = set now):\n");
    for (size_t i = 0; i < n; i++) {
        int set = util_config_is_set((enum util_cfg_id)i);
        printf("  %c %-22s default \"%s\"%s%s%s\n      %s\n", set ? '*' : ' ', t[i].name, t[i].default_str,
               set ? ", now \"" : "", set ? util_config_str((enum util_cfg_id)i) : "", set ? "\"" : "",
               t[i].meaning);
    }
    util_config_unknown(print_unknown, NULL);
}

/* The bootstraps built in, and which one a rank started in this
 * environment would use and why (an error for a launcher shoal cannot
 * join: the message that rank would stop with). */
static void print_bootstrap(void)
{
    const char *name;
    char why[512];
    printf("bootstraps compiled in: %s\n", boot_builtin());
    if (boot_choose(&name, why, sizeof why) == SHOAL_OK)
        printf("bootstrap here: %s (%s)\n", name, why);
    else
        printf("bootstrap here: none, a rank would stop: %s\n", why);
}

static void print_geometry(int nranks)
{
    uint32_t slots = shm_default_ring_slots(nranks);
    printf("\nshm queue geometry for %d ranks on a host:\n", nranks);
    printf("  slot size            %u bytes (control word + 56 bytes)\n", RING_SLOT_BYTES);
    printf("  inline in one slot   %u argument words, or 56 bytes of args + payload\n", 7u);
    printf("  ring depth           %u slots (%u KiB) per sender, per class (request, reply)\n", slots,
           slots * RING_SLOT_BYTES / 1024);
    unsigned lanes = (unsigned)util_config_int(CFG_SHM_LANES);
    printf("  inbox per rank       %zu KiB (%zu KiB at SHOAL_THREAD_MULTIPLE: %u lanes per sender, SHOAL_SHM_LANES)\n",
           shm_region_bytes(nranks, slots, 0) / 1024, shm_region_bytes(nranks, slots, lanes) / 1024, lanes);
    size_t outbox = shm_outbox_bytes(nranks);
    if (outbox)
        printf("  outbox per rank      2 x %zu KiB (mediums that do not fit their ring; SHOAL_SHM_OUTBOX_BYTES)\n",
               outbox / 1024);
    else
        printf("  outbox per rank      none (the rings hold every medium)\n");
    printf("  medium limit         %zu bytes (%zu in a ring, with 16 arguments; the outbox carries larger ones)\n",
           am_medium_limit(slots, outbox), am_medium_limit(slots, 0));
    printf("  inbox at start-up    %zu KiB backed; a ring when its sender first writes to it\n",
           shm_region_eager_bytes(nranks, 0) / 1024);
    unsigned watched = (unsigned)util_config_int(CFG_SHM_WATCHED);
    printf("  polled directly      %s (SHOAL_SHM_WATCHED=%u)\n",
           (unsigned)nranks > watched ? "the senders that talked lately, the rest through a summary" : "every sender",
           watched);
    printf("  max arguments        %u x 64-bit\n", SHOAL_AM_MAX_ARGS);
    printf("  handlers             %u user indices\n", SHOAL_AM_MAX_HANDLERS);
}

int main(int argc, char **argv)
{
    int nranks = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            nranks = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: shoal-info [-n RANKS]   (queue geometry shown for RANKS ranks, default 2)\n");
            return 2;
        }
    }
    if (nranks < 1) {
        fprintf(stderr, "shoal-info: -n needs a positive rank count\n");
        return 2;
    }
    int rc = util_config_load();
    printf("shoal %s\n", SHOAL_VERSION_STRING);
    print_transports();
    printf("launch: shoalrun (local processes; other hosts through a remote shell, --hosts)\n");
    print_bootstrap();
    print_settings();
    if (rc) {
        printf("\nconfiguration error: %s (see the message above)\n", shoal_strerror(rc));
        return 1;
    }
    print_geometry(nranks);
    return 0;
}
