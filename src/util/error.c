/* Status codes and their names. */
#include "shoal.h"

const char *shoal_strerror(int status)
{
    switch (status) {
    case SHOAL_OK: return "SHOAL_OK: success";
    case SHOAL_EINVAL: return "SHOAL_EINVAL: invalid argument";
    case SHOAL_ERANK: return "SHOAL_ERANK: rank out of range";
    case SHOAL_ENOHANDLER: return "SHOAL_ENOHANDLER: handler index not registered";
    case SHOAL_ETOOBIG: return "SHOAL_ETOOBIG: payload or argument count above the limit";
    case SHOAL_EAGAIN: return "SHOAL_EAGAIN: no resources now (immediate mode)";
    case SHOAL_EHANDLER: return "SHOAL_EHANDLER: call not allowed in this handler context";
    case SHOAL_ENOTINIT: return "SHOAL_ENOTINIT: shoal is not initialized";
    case SHOAL_EINIT: return "SHOAL_EINIT: shoal is already initialized";
    case SHOAL_ENOMEM: return "SHOAL_ENOMEM: out of memory or shared backing store";
    case SHOAL_ESYS: return "SHOAL_ESYS: system call failed";
    case SHOAL_EBOOT: return "SHOAL_EBOOT: launcher protocol failed";
    case SHOAL_EPEERDEAD: return "SHOAL_EPEERDEAD: a peer rank died";
    case SHOAL_ESEGMENT: return "SHOAL_ESEGMENT: unknown segment";
    case SHOAL_ERANGE: return "SHOAL_ERANGE: offset or length outside the segment";
    case SHOAL_ETIMEDOUT: return "SHOAL_ETIMEDOUT: wait timed out";
    case SHOAL_EALIGN: return "SHOAL_EALIGN: misaligned address or offset";
    case SHOAL_ECONFIG: return "SHOAL_ECONFIG: invalid SHOAL_* setting";
    case SHOAL_EACCES: return "SHOAL_EACCES: wrong access key or permission";
    case SHOAL_EFULL: return "SHOAL_EFULL: FIFO full, entry cancelled";
    case SHOAL_ESTOPPED: return "SHOAL_ESTOPPED: FIFOe stopped, send RETRY";
    case SHOAL_ECANCELED: return "SHOAL_ECANCELED: signal refused by its state or condition";
    case SHOAL_ENOSTRUCT: return "SHOAL_ENOSTRUCT: no FIFO or signal structure there";
    default: return "unknown shoal status code";
    }
}
