/* CMAM handler addresses on the wire (docs/CMAM.md §3): a handler travels
 * as (image, offset), the loaded object that holds it and its offset from
 * that object's load address, so ranks whose images load at different
 * addresses (ASLR) agree.  The receiver calls the address only when the
 * offset is the start of a function in that image's symbol table (.symtab,
 * or .dynsym where the file was stripped) and lies in an executable
 * segment: no address from the network is called unchecked. */
#include "cmam/cmam_int.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMAM_MAX_IMAGES 32
#define CMAM_MAX_EXEC 8 /* executable PT_LOAD segments kept per image */

struct cmam_image {
    unsigned id;
    uintptr_t base;                       /* dlpi_addr: symbol values are offsets from it */
    uint64_t exec_lo[CMAM_MAX_EXEC], exec_hi[CMAM_MAX_EXEC];
    unsigned nexec;
    uint64_t *funcs; /* sorted function starts, read at the first lookup */
    size_t nfuncs;
    int read;        /* the file was read (or could not be: then no offset passes) */
    int symtab;      /* 1: the full .symtab, 0: only .dynsym (stripped file) */
    char path[256];  /* "" for the main executable */
};

static struct cmam_image images[CMAM_MAX_IMAGES];
static unsigned nimages;

/* 0 names the main executable, any other id an object by its file name
 * (FNV-1a folded to 16 bits, never 0): every rank runs the same program. */
static unsigned cmam_image_id(const char *path, int is_main)
{
    if (is_main)
        return 0;
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    uint32_t h = 2166136261u;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 16777619u;
    return (h ^ (h >> 16)) % 0xffffu + 1;
}

struct cmam_find {
    uintptr_t addr; /* find the object holding addr (sender) ... */
    unsigned id;    /* ... or the object with id (receiver, addr == 0) */
    struct cmam_image *out;
    int seen; /* objects visited: the first is the main executable */
};

static int cmam_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct cmam_find *f = arg;
    int is_main = !f->seen++;
    unsigned id = cmam_image_id(info->dlpi_name ? info->dlpi_name : "", is_main);
    struct cmam_image im = {.id = id, .base = info->dlpi_addr};
    int holds = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_X) || im.nexec == CMAM_MAX_EXEC)
            continue;
        im.exec_lo[im.nexec] = p->p_vaddr;
        im.exec_hi[im.nexec++] = p->p_vaddr + p->p_memsz;
        holds |= f->addr - info->dlpi_addr >= p->p_vaddr && f->addr - info->dlpi_addr < p->p_vaddr + p->p_memsz;
    }
    if (f->addr ? !holds : id != f->id)
        return 0;
    if (!is_main)
        snprintf(im.path, sizeof im.path, "%s", info->dlpi_name);
    *f->out = im;
    return 1;
}

/* The image holding addr (addr != 0) or named id, looked up once and kept. */
static struct cmam_image *cmam_image_get(uintptr_t addr, unsigned id)
{
    for (unsigned i = 0; i < nimages; i++) {
        struct cmam_image *im = &images[i];
        if (addr) {
            for (unsigned s = 0; s < im->nexec; s++)
                if (addr - im->base >= im->exec_lo[s] && addr - im->base < im->exec_hi[s])
                    return im;
        } else if (im->id == id) {
            return im;
        }
    }
    struct cmam_image found;
    struct cmam_find f = {.addr = addr, .id = id, .out = &found};
    if (nimages == CMAM_MAX_IMAGES || !dl_iterate_phdr(cmam_find_cb, &f))
        return NULL;
    images[nimages] = found;
    return &images[nimages++];
}

static int cmam_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The function symbols of one symbol-table section. */
static size_t cmam_collect(const char *file, size_t len, const ElfW(Shdr) *sh, uint64_t *out)
{
    if (sh->sh_offset > len || sh->sh_size > len - sh->sh_offset || sh->sh_entsize != sizeof(ElfW(Sym)))
        return 0;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)(file + sh->sh_offset);
    size_t n = 0;
    for (size_t i = 0; i < sh->sh_size / sizeof *sym; i++)
        if (ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF && sym[i].st_value)
            out[n++] = sym[i].st_value;
    return n;
}

/* Reads the image's function starts from its file: .symtab when there is
 * one, else .dynsym. */
static void cmam_load_symbols(struct cmam_image *im)
{
    const char *path = im->path[0] ? im->path : "/proc/self/exe";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t len = (size_t)st.st_size;
    const char *file = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (file == MAP_FAILED)
        return;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)file;
    const ElfW(Shdr) *symtab = NULL, *dynsym = NULL;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shentsize == sizeof(ElfW(Shdr)) &&
        eh->e_shoff <= len && (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= len - eh->e_shoff) {
        const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(file + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            if (sh[i].sh_type == SHT_SYMTAB)
                symtab = &sh[i];
            else if (sh[i].sh_type == SHT_DYNSYM)
                dynsym = &sh[i];
        }
    }
    const ElfW(Shdr) *use = symtab ? symtab : dynsym;
    if (use && use->sh_entsize) {
        im->funcs = malloc((use->sh_size / use->sh_entsize + 1) * sizeof *im->funcs);
        if (im->funcs) {
            im->nfuncs = cmam_collect(file, len, use, im->funcs);
            qsort(im->funcs, im->nfuncs, sizeof *im->funcs, cmam_cmp_u64);
            im->symtab = use == symtab;
        }
    }
    munmap((void *)file, len);
}

uint64_t cmam_image_ref(CMAM_fun fn)
{
    uintptr_t addr = (uintptr_t)fn;
    struct cmam_image *im = addr ? cmam_image_get(addr, 0) : NULL;
    if (!im)
        return CMAM_REF_NONE;
    uint64_t off = addr - im->base;
    if (off > CMAM_REF_OFFSET_MASK)
        return CMAM_REF_NONE;
    return (uint64_t)im->id << CMAM_REF_IMAGE_SHIFT | off;
}

CMAM_fun cmam_image_resolve(uint64_t ref, const char **why)
{
    unsigned id = (unsigned)(ref >> CMAM_REF_IMAGE_SHIFT) & 0xffffu;
    uint64_t off = ref & CMAM_REF_OFFSET_MASK;
    struct cmam_image *im = cmam_image_get(0, id);
    if (!im) {
        *why = "no loaded image has that id";
        return NULL;
    }
    int exec = 0;
    for (unsigned s = 0; s < im->nexec; s++)
        exec |= off >= im->exec_lo[s] && off < im->exec_hi[s];
    if (!exec) {
        *why = "the offset is outside the image's executable segments";
        return NULL;
    }
    if (!im->read) {
        im->read = 1;
        cmam_load_symbols(im);
    }
    if (!im->funcs) {
        *why = "the image's file could not be read for its symbol table";
        return NULL;
    }
    if (!bsearch(&off, im->funcs, im->nfuncs, sizeof off, cmam_cmp_u64)) {
        *why = im->symtab ? "the offset is not the start of a function in the image's symbol table"
                          : "the offset is not an exported function and the image has no .symtab (stripped? "
                            "keep its symbols, or link with -rdynamic)";
        return NULL;
    }
    return (CMAM_fun)(im->base + off);
}
