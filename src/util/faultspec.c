/* The fault-injection spec (SHOAL_FAULTS): parsed here, where the
 * configuration is validated when it loads, and by the carriers that
 * inject the faults (net/faults.h), which need nothing else of it. */
#include "util.h"
#include "shoal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int parse_prob(const char *v, double *out)
{
    char *end;
    errno = 0;
    double p = strtod(v, &end);
    if (errno || end == v || *end || !(p >= 0.0 && p <= 1.0)) /* !(..) also refuses NaN */
        return -1;
    *out = p;
    return 0;
}

static int parse_delay(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    double unit = !strcmp(end, "ns") ? 1.0 : !strcmp(end, "us") ? 1e3 : !strcmp(end, "ms") ? 1e6 : 0.0;
    if (errno || end == v || unit == 0.0 || !(t >= 0.0 && t * unit < 1e18))
        return -1;
    *out = (uint64_t)(t * unit + 0.5);
    return 0;
}

static int parse_seed(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 0);
    if (errno || end == v || *end || v[0] == '-' || v[0] == '+')
        return -1;
    *out = s;
    return 0;
}

/* One key=value item; the key tells which field and parser. */
static int parse_item(char *item, struct util_fault_spec *c, unsigned *seen, char *err, size_t errlen)
{
    static const char *const keys[] = {"loss", "dup", "reorder", "corrupt", "delay", "seed"};
    static const char *const wants[] = {"a probability in [0,1]", "a probability in [0,1]",
                                        "a probability in [0,1]", "a probability in [0,1]",
                                        "a time with a unit ns, us or ms", "an unsigned integer"};
    char *eq = strchr(item, '=');
    if (eq)
        *eq = '\0';
    unsigned k = 0;
    while (k < 6 && strcmp(item, keys[k]))
        k++;
    if (k == 6) {
        snprintf(err, errlen, "unknown item \"%s\" (keys: loss, dup, reorder, corrupt, delay, seed)", item);
        return SHOAL_EINVAL;
    }
    if (!eq) {
        snprintf(err, errlen, "\"%s\" needs a value (%s=...)", item, item);
        return SHOAL_EINVAL;
    }
    if (*seen & 1u << k) {
        snprintf(err, errlen, "%s given twice", item);
        return SHOAL_EINVAL;
    }
    *seen |= 1u << k;
    const char *v = eq + 1;
    double *probs[] = {&c->loss, &c->dup, &c->reorder, &c->corrupt};
    int bad = k < 4 ? parse_prob(v, probs[k]) : k == 4 ? parse_delay(v, &c->delay_ns) : parse_seed(v, &c->seed);
    if (bad) {
        snprintf(err, errlen, "bad value \"%s\" for %s (%s)", v, item, wants[k]);
        return SHOAL_EINVAL;
    }
    return SHOAL_OK;
}

int util_fault_parse(const char *spec, struct util_fault_spec *c, char *err, size_t errlen)
{
    char none[1];
    if (!err) {
        err = none;
        errlen = sizeof none;
    }
    *c = (struct util_fault_spec){.seed = 1};
    char *copy = strdup(spec);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return SHOAL_ENOMEM;
    }
    int rc = SHOAL_OK;
    unsigned seen = 0;
    char *item = copy;
    while (rc == SHOAL_OK && *spec) {
        char *next = strchr(item, ',');
        if (next)
            *next = '\0';
        if (!*item) {
            snprintf(err, errlen, "empty item in \"%s\"", spec);
            rc = SHOAL_EINVAL;
        } else {
            rc = parse_item(item, c, &seen, err, errlen);
        }
        if (!next)
            break;
        item = next + 1;
    }
    free(copy);
    return rc;
}

