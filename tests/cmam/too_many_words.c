/* Must not compile: CMAM_4 and CMAM_reply_4 carry at most four words, and
 * a fifth would otherwise vanish (cmam.too_many_words, cmam.cxx_too_many_words). */
#include <shoal/cmam.h>

static void handler(int a, int b, int c, int d)
{
    (void)a, (void)b, (void)c, (void)d;
}

void five_words(void);
void five_words(void)
{
    CMAM_4(0, handler, 1, 2, 3, 4, 5);
}
