#include "util/transports.h"

#include <stdio.h>
#include <string.h>

#define UTIL_TRANSPORT_INFO(n, w) {.name = #n, .what = w},
const struct util_transport_info util_transport_list[UTIL_TP_COUNT] = {UTIL_TRANSPORTS(UTIL_TRANSPORT_INFO)};

int util_transport_find(const char *name)
{
    for (int i = 0; i < UTIL_TP_COUNT; i++)
        if (strcmp(name, util_transport_list[i].name) == 0)
            return i;
    return -1;
}

const char *util_transport_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t at = 0;
        for (int i = 0; i < UTIL_TP_COUNT; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", util_transport_list[i].name,
                                   i + 2 < UTIL_TP_COUNT ? ", " : i + 1 < UTIL_TP_COUNT ? " or " : "");
    }
    return names;
}
