/* cmam layer: CM-5 Active Messages (include/shoal/cmam.h) on am.  What
 * core and the white-box tests see. */
#ifndef SHOAL_CMAM_INT_H
#define SHOAL_CMAM_INT_H

#include <stdint.h>

#include "shoal/cmam.h"

/* Registers cmam's internal handlers (shoal_init, after am_init). */
void cmam_init(void);

/* Internal handlers: a block of am's (docs/CMAM.md §4, WIRE.md). */
enum cmam_handler { CMAM_H_REQUEST, CMAM_H_REPLY, CMAM_H_XFER, CMAM_HANDLERS };

/* A handler reference (word 0 of a CMAM_4 message): image id 16 | kinds 8
 * | offset 40 (docs/CMAM.md §3). */
#define CMAM_REF_IMAGE_SHIFT 48
#define CMAM_REF_KINDS_SHIFT 40
#define CMAM_REF_OFFSET_MASK ((UINT64_C(1) << CMAM_REF_KINDS_SHIFT) - 1)
#define CMAM_REF_NONE UINT64_MAX
/* fn's reference without kinds, or CMAM_REF_NONE when no loaded image
 * holds it in an executable segment. */
uint64_t cmam_image_ref(CMAM_fun fn);
/* The function ref names, checked against this rank's image; NULL with
 * *why set when it is not a function's start there. */
CMAM_fun cmam_image_resolve(uint64_t ref, const char **why);

#endif
