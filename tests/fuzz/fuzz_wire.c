/* Fuzz target for wire_decode (src/net/wire.c, docs/WIRE.md).
 *
 * Every input is decoded as a received packet under both checksum rules
 * (optional, as on UDP; required, as on raw Ethernet frames).  The target
 * aborts if
 *   - a verdict is one wire_decode must never give (the reliability
 *     layer's, or out of range), or an input shorter than a header is not
 *     WIRE_DROP_SHORT;
 *   - a packet accepted with checksums required is refused with them
 *     optional (requiring checksums may only refuse more);
 *   - an accepted packet, encoded again from its decoded header and
 *     payload (with a checksum exactly when it carried one), is not the
 *     same bytes: nothing is accepted that decodes to something else.
 *
 * Built two ways from this file:
 *   - with SHOAL_LIBFUZZER defined and -fsanitize=fuzzer: the libFuzzer
 *     target fuzz_wire (clang, CMake option SHOAL_FUZZ; CTest fuzz.wire);
 *   - otherwise with a main() that replays files and directories of inputs
 *     through the same function (CTest wire.corpus_replay, every build):
 *         wire_corpus_replay [--all-verdicts] FILE|DIR...
 *     --all-verdicts also fails unless the inputs together draw every
 *     verdict wire_decode can give, so the corpus keeps covering them.
 *
 * The receiver below is fixed; tests/fuzz/make_wire_corpus.py writes its
 * seeds for the same one (keep FUZZ_JOB, FUZZ_KEY0/1, FUZZ_SELF, FUZZ_NRANKS in
 * step with JOB, KEY, SELF, NRANKS there). */
#include "net/wire.h"
#include "shoal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_JOB 0x5348424f4a000001ull
#define FUZZ_KEY0 0x0123456789abcdefull
#define FUZZ_KEY1 0xfedcba9876543210ull
#define FUZZ_SELF 1u
#define FUZZ_NRANKS 4u

/* Verdicts drawn so far (per checksum rule), for --all-verdicts. */
static unsigned long seen[2][WIRE_VERDICTS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    enum wire_verdict v[2];
    struct wire_header h[2];
    for (int need = 0; need <= 1; need++) {
        static struct wire_key key;
        if (!key.nh && wire_key_init(&key, FUZZ_KEY0, FUZZ_KEY1, 0) != SHOAL_OK)
            abort();
        const struct wire_expect e = {
            .job = FUZZ_JOB, .key = key, .self = FUZZ_SELF, .nranks = FUZZ_NRANKS, .need_checksum = need};
        v[need] = wire_decode(data, n, &e, &h[need]);
        if ((unsigned)v[need] > WIRE_DROP_CHECKSUM)
            abort(); /* not a verdict of wire_decode's */
        if (n < WIRE_HEADER_BYTES && v[need] != WIRE_DROP_SHORT)
            abort();
        seen[need][v[need]]++;
        if (v[need] != WIRE_OK)
            continue;
        if (h[need].len != n - WIRE_HEADER_BYTES)
            abort();
        unsigned char *re = malloc(n);
        if (!re)
            abort();
        size_t m = wire_encode(re, n, &h[need], data + WIRE_HEADER_BYTES, &e.key, h[need].csum != 0);
        if (m != n || memcmp(re, data, n) != 0)
            abort();
        free(re);
    }
    if (v[1] == WIRE_OK && v[0] != WIRE_OK)
        abort();
    return 0;
}

#ifndef SHOAL_LIBFUZZER
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

static unsigned long files;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* Exactly n bytes, so a sanitizer sees any read beyond the packet. */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    files++;
    return 0;
}

static int replay(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *p = malloc(strlen(path) + strlen(de->d_name) + 2);
        if (!p) {
            rc = -1;
            break;
        }
        sprintf(p, "%s/%s", path, de->d_name);
        if (replay(p) != 0)
            rc = -1;
        free(p);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int all_verdicts = 0, rc = 0, paths = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--all-verdicts") == 0) {
            all_verdicts = 1;
            continue;
        }
        paths++;
        if (replay(argv[i]) != 0)
            rc = 1;
    }
    if (!paths) {
        fprintf(stderr, "usage: %s [--all-verdicts] FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (files == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    for (int need = 0; need <= 1; need++) {
        printf("checksum %s:", need ? "required" : "optional");
        for (int v = 0; v <= WIRE_DROP_CHECKSUM; v++) {
            printf(" %s %lu%s", wire_verdict_name((enum wire_verdict)v), seen[need][v],
                   v < WIRE_DROP_CHECKSUM ? "," : "\n");
            if (all_verdicts && seen[need][v] == 0) {
                fprintf(stderr, "no input gives \"%s\" with checksums %s\n", wire_verdict_name((enum wire_verdict)v),
                        need ? "required" : "optional");
                rc = 1;
            }
        }
    }
    printf("%lu inputs replayed%s\n", files, rc ? "" : ", all passed");
    return rc;
}
#endif
