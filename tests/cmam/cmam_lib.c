/* A handler in a shared library (docs/CMAM.md §3): a static function, so
 * the receiver finds it only in the library's .symtab. */
#include <shoal/cmam.h>

static volatile int lib_count;

static void lib_h(int add)
{
    lib_count += add;
}

CMAM_fun cmam_lib_handler(void)
{
    return (CMAM_fun)lib_h;
}

int cmam_lib_count(void)
{
    return lib_count;
}
