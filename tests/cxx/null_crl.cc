// The sequential CRL baseline (-DSHOAL_CRL_NULL) from C++: the inline
// definitions in shoal/crl.h compile and run without shoal.
#include <shoal/crl.h>

#include <cstdio>

int main()
{
    crl_init();
    rid_t rid = rgn_create(4 * sizeof(double));
    double *v = static_cast<double *>(rgn_map(rid));
    rgn_start_write(v);
    v[3] = 1.5;
    rgn_end_write(v);
    rgn_start_read(v);
    bool ok = rgn_size(v) == 4 * sizeof(double) && v[0] == 0.0 && v[3] == 1.5 && rgn_rid(v) == rid;
    rgn_end_read(v);
    rgn_unmap(v);
    rgn_delete(rid);
    crl_exit();
    std::printf("null_crl: %s\n", ok ? "ok" : "wrong contents");
    return ok ? 0 : 1;
}
