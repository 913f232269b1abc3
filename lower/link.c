/* The in-process linker (lower/link.h): LLVM's relocatable object for a
 * kernel -> a shared object, in memory, in well under a millisecond, where
 * `cc -shared` took 10-14 ms of a cold compile (a fork, the gcc driver,
 * collect2 and ld.bfd; docs/lowering.md).
 *
 * It handles what LLVM emits for kernels on x86-64, and says "not handled"
 * for anything else, so that compile.c links with `cc` instead:
 *   sections   allocated PROGBITS / X86_64_UNWIND / NOBITS, no TLS, no
 *              groups, no constructors (INIT_ARRAY and the like);
 *   relocs     R_X86_64_PC32 / PLT32 / PC64 (to a definition of the object,
 *              or PLT32 to a function of libc or libm, through a stub),
 *              R_X86_64_GOTPCREL / GOTPCRELX / REX_GOTPCRELX (a GOT slot);
 *   symbols    undefined ones must be defined by libc or libm as this
 *              process has them loaded (a libgcc helper, say __truncdfhf2,
 *              is not: `cc` links libgcc.a for those).
 *
 * The output has three PT_LOADs: read-only (ELF and program headers,
 * .hash, .dynsym, .dynstr, .rela.dyn, the object's read-only sections,
 * .eh_frame, .eh_frame_hdr), code (.text, the stubs) and writable
 * (.dynamic, .got, the object's data), each starting on a page with file
 * offset = address; PT_DYNAMIC, PT_GNU_EH_FRAME, PT_GNU_STACK (not
 * executable). GOT slots are bound at load time (R_X86_64_GLOB_DAT,
 * R_X86_64_RELATIVE in .rela.dyn; no lazy binding, no PLT of the usual
 * kind): a symbol nothing defines fails the dlopen that follows the
 * compile, as with `cc`. The object's global definitions are exported
 * (for a kernel: TSR_LOWER_KERNEL_SYMBOL only); its function symbols are
 * kept in .symtab for profilers and debuggers. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include "lower/link.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u
/* DWARF pointer encodings of .eh_frame (the LSB's, not in <elf.h>). */
enum {
  DW_EH_PE_udata4 = 0x03,
  DW_EH_PE_sdata4 = 0x0b,
  DW_EH_PE_pcrel = 0x10,
  DW_EH_PE_datarel = 0x30
};
#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001
#endif

/* ---- Where undefined symbols come from ----------------------------------------- */

/* libm's functions are referenced with the version its default definition
 * has (expf@GLIBC_2.27), as ld records them from -l:libm.so.6: an
 * unversioned reference would bind to the oldest version instead, and
 * glibc's oldest fmodf, say, is the SVID wrapper, whose NaNs differ. libc's
 * are left unversioned (they bind to the oldest), as `cc -nostdlib` left
 * them. The versions come from the libm.so.6 file this process loaded. */
typedef struct versioned {
  char *name;
  const char *version; /* points into `versions` */
} versioned_t;

static pthread_once_t libs_once = PTHREAD_ONCE_INIT;
static void *libc_handle, *libm_handle;
static versioned_t *libm_symbols; /* sorted by name */
static size_t num_libm_symbols;
static char *libm_versions; /* the version names, NUL-separated */

static int compare_versioned(const void *a, const void *b) {
  return strcmp(((const versioned_t *)a)->name, ((const versioned_t *)b)->name);
}

/* Reads the default version of every function libm defines from `path`. */
static void read_libm_versions(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void *map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof(Elf64_Ehdr))
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  const uint8_t *b = map;
  size_t size = (size_t)st.st_size;
  const Elf64_Ehdr *eh = map;
  const Elf64_Shdr *sh = NULL, *dynsym = NULL, *versym = NULL, *verdef = NULL;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff < size &&
      (size - eh->e_shoff) / sizeof(Elf64_Shdr) >= eh->e_shnum)
    sh = (const Elf64_Shdr *)(b + eh->e_shoff);
  for (uint32_t i = 0; sh && i < eh->e_shnum; i++) {
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)
      sh = NULL;
    else if (sh[i].sh_type == SHT_DYNSYM)
      dynsym = &sh[i];
    else if (sh[i].sh_type == SHT_GNU_versym)
      versym = &sh[i];
    else if (sh[i].sh_type == SHT_GNU_verdef)
      verdef = &sh[i];
  }
  if (!sh || !dynsym || !versym || !verdef || dynsym->sh_link >= eh->e_shnum ||
      dynsym->sh_offset % 8 || versym->sh_offset % 2 || verdef->sh_offset % 4)
    goto out;
  const Elf64_Shdr *strs = &sh[dynsym->sh_link];
  const char *str = (const char *)b + strs->sh_offset;
  size_t nsyms = dynsym->sh_size / sizeof(Elf64_Sym);
  if (versym->sh_size / 2 < nsyms) goto out;
  /* Version index -> name, from the definitions. */
  const char *names[64] = {NULL};
  size_t at = verdef->sh_offset, versions_size = 0;
  for (uint32_t n = 0; n < verdef->sh_info && at + sizeof(Elf64_Verdef) <= size; n++) {
    const Elf64_Verdef *vd = (const Elf64_Verdef *)(b + at);
    if (vd->vd_cnt && vd->vd_aux % 4 == 0 && at + vd->vd_aux + sizeof(Elf64_Verdaux) <= size) {
      const Elf64_Verdaux *aux = (const Elf64_Verdaux *)(b + at + vd->vd_aux);
      if (vd->vd_ndx < 64 && aux->vda_name < strs->sh_size) {
        names[vd->vd_ndx] = str + aux->vda_name;
        versions_size += strlen(names[vd->vd_ndx]) + 1;
      }
    }
    if (!vd->vd_next || vd->vd_next % 4) break;
    at += vd->vd_next;
  }
  libm_versions = malloc(versions_size ? versions_size : 1);
  const char *copied[64] = {NULL};
  size_t put = 0;
  for (int v = 0; libm_versions && v < 64; v++)
    if (names[v]) {
      size_t len = strlen(names[v]) + 1;
      memcpy(libm_versions + put, names[v], len);
      copied[v] = libm_versions + put;
      put += len;
    }
  libm_symbols = libm_versions ? calloc(nsyms ? nsyms : 1, sizeof *libm_symbols) : NULL;
  const Elf64_Sym *syms = (const Elf64_Sym *)(b + dynsym->sh_offset);
  const uint16_t *vs = (const uint16_t *)(b + versym->sh_offset);
  for (size_t i = 1; libm_symbols && i < nsyms; i++) {
    uint16_t v = vs[i];
    if ((v & 0x8000) || v < 2 || v >= 64 || !copied[v] || syms[i].st_shndx == SHN_UNDEF ||
        syms[i].st_name >= strs->sh_size)
      continue;
    char *name = strdup(str + syms[i].st_name);
    if (!name) break;
    libm_symbols[num_libm_symbols++] = (versioned_t){name, copied[v]};
  }
  if (libm_symbols) qsort(libm_symbols, num_libm_symbols, sizeof *libm_symbols, compare_versioned);
out:
  munmap(map, size);
}

static void open_libs(void) {
  /* Both are loaded in any process that loads LLVM: RTLD_NOLOAD only takes a
   * handle (never closed: they stay loaded anyway; the table above is kept
   * for the process's life too). */
  libc_handle = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  libm_handle = dlopen("libm.so.6", RTLD_LAZY | RTLD_NOLOAD);
  struct link_map *map = NULL;
  if (libm_handle && dlinfo(libm_handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name)
    read_libm_versions(map->l_name);
}

typedef enum { FROM_NOWHERE, FROM_LIBC, FROM_LIBM } provider_t;

/* Where `name` comes from; for libm, *out_version is its version. */
static provider_t provider_of(const char *name, const char **out_version) {
  pthread_once(&libs_once, open_libs);
  if (libc_handle && dlsym(libc_handle, name)) return FROM_LIBC;
  /* libm's scope includes libc: libc is asked first. */
  if (!libm_handle || !dlsym(libm_handle, name)) return FROM_NOWHERE;
  versioned_t key = {(char *)name, NULL};
  const versioned_t *found =
      libm_symbols ? bsearch(&key, libm_symbols, num_libm_symbols, sizeof key, compare_versioned)
                   : NULL;
  if (!found) return FROM_NOWHERE;
  *out_version = found->version;
  return FROM_LIBM;
}

/* ---- The input --------------------------------------------------------------------- */

enum { SEG_RO, SEG_TEXT, SEG_DATA, SEG_COUNT };

typedef struct input {
  const uint8_t *bytes;
  size_t size;
  const Elf64_Ehdr *eh;
  const Elf64_Shdr *sh;  /* e_shnum of them */
  const Elf64_Sym *syms; /* the symbol table */
  size_t num_syms;
  const char *strtab; /* its names */
  size_t strtab_size;
  const char *shstrtab;
  size_t shstrtab_size;
} input_t;

/* Per symbol of the object: its GOT slot and stub, its .dynsym index. */
typedef struct symbol_use {
  int32_t got;     /* slot number, or -1 */
  int32_t stub;    /* stub number, or -1 */
  uint32_t dynsym; /* 0: none */
  provider_t from;
  const char *version;    /* FROM_LIBM: its version */
  uint16_t version_index; /* in .gnu.version: 2.. for libm's */
} symbol_use_t;

typedef struct linker {
  input_t in;
  char *why;
  size_t why_size;
  bool unsupported;
  /* Per input section: placed (a segment), and its address. */
  int *segment; /* -1: not placed */
  uint64_t *address;
  symbol_use_t *use;
  uint32_t num_got, num_stubs, num_dynsyms, num_exports;
  uint32_t *dynsym_order; /* .dynsym index -> object symbol index */
  bool need_libm;
  uint32_t eh_frame; /* the input .eh_frame section, 0 if none (or several) */
  uint32_t num_fdes;
} linker_t;

static bool unsupported(linker_t *l, const char *format, ...) {
  if (!l->unsupported) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(l->why, l->why_size, format, ap);
    va_end(ap);
  }
  l->unsupported = true;
  return false;
}

static bool in_range(const input_t *in, uint64_t offset, uint64_t size) {
  return offset <= in->size && size <= in->size - offset;
}

static const char *section_name(const input_t *in, uint32_t i) {
  uint32_t n = in->sh[i].sh_name;
  if (!in->shstrtab || n >= in->shstrtab_size) return "?";
  return in->shstrtab + n;
}

static const char *symbol_name(const input_t *in, const Elf64_Sym *s) {
  if (s->st_name >= in->strtab_size) return NULL;
  const char *name = in->strtab + s->st_name;
  return memchr(name, 0, in->strtab_size - s->st_name) ? name : NULL;
}

static bool read_input(linker_t *l, const void *object, size_t size) {
  input_t *in = &l->in;
  in->bytes = object;
  in->size = size;
  if (size < sizeof(Elf64_Ehdr)) return unsupported(l, "not an ELF object");
  /* The headers are read in place (LLVM's buffers are malloc'd). */
  if ((uintptr_t)object % 8 != 0) return unsupported(l, "object not 8-byte aligned in memory");
  const Elf64_Ehdr *eh = object;
  in->eh = eh;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_REL)
    return unsupported(l, "not a 64-bit little-endian ELF relocatable object");
  if (eh->e_machine != EM_X86_64)
    return unsupported(l, "ELF machine %u: the in-process linker does x86-64 only", eh->e_machine);
  if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
      !in_range(in, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
      eh->e_shoff % 8 != 0 || eh->e_shstrndx >= eh->e_shnum)
    return unsupported(l, "malformed section headers");
  in->sh = (const Elf64_Shdr *)(in->bytes + eh->e_shoff);
  for (uint32_t i = 1; i < eh->e_shnum; i++) {
    const Elf64_Shdr *s = &in->sh[i];
    if (s->sh_type != SHT_NOBITS && !in_range(in, s->sh_offset, s->sh_size))
      return unsupported(l, "section %u lies outside the object", i);
    if (s->sh_addralign > PAGE) return unsupported(l, "section %u aligned to more than a page", i);
  }
  const Elf64_Shdr *names = &in->sh[eh->e_shstrndx];
  in->shstrtab = (const char *)in->bytes + names->sh_offset;
  in->shstrtab_size = names->sh_size;
  uint32_t symtab = 0;
  for (uint32_t i = 1; i < eh->e_shnum; i++) {
    if (in->sh[i].sh_type != SHT_SYMTAB) continue;
    if (symtab) return unsupported(l, "several symbol tables");
    symtab = i;
  }
  if (!symtab) return unsupported(l, "no symbol table");
  const Elf64_Shdr *st = &in->sh[symtab];
  if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_offset % 8 != 0 || st->sh_link == 0 ||
      st->sh_link >= eh->e_shnum || in->sh[st->sh_link].sh_type != SHT_STRTAB)
    return unsupported(l, "malformed symbol table");
  in->syms = (const Elf64_Sym *)(in->bytes + st->sh_offset);
  in->num_syms = st->sh_size / sizeof(Elf64_Sym);
  in->strtab = (const char *)in->bytes + in->sh[st->sh_link].sh_offset;
  in->strtab_size = in->sh[st->sh_link].sh_size;
  return true;
}

/* ---- Classifying ---------------------------------------------------------------------- */

static bool place_sections(linker_t *l) {
  const input_t *in = &l->in;
  uint32_t eh_frames = 0;
  for (uint32_t i = 0; i < in->eh->e_shnum; i++) {
    const Elf64_Shdr *s = &in->sh[i];
    l->segment[i] = -1;
    if (i == 0) continue;
    if (s->sh_type == SHT_REL) return unsupported(l, "REL (not RELA) relocations");
    if (!(s->sh_flags & SHF_ALLOC)) continue;
    if (s->sh_flags & (SHF_TLS | SHF_GROUP))
      return unsupported(l, "section %s is TLS or in a group", section_name(in, i));
    if (s->sh_type != SHT_PROGBITS && s->sh_type != SHT_NOBITS && s->sh_type != SHT_X86_64_UNWIND)
      return unsupported(l, "section %s of type %#x", section_name(in, i), s->sh_type);
    l->segment[i] = (s->sh_flags & SHF_EXECINSTR) ? SEG_TEXT
                    : (s->sh_flags & SHF_WRITE)   ? SEG_DATA
                                                  : SEG_RO;
    if (s->sh_type == SHT_NOBITS && l->segment[i] != SEG_DATA)
      return unsupported(l, "NOBITS section %s not writable", section_name(in, i));
    if (s->sh_type == SHT_X86_64_UNWIND || strcmp(section_name(in, i), ".eh_frame") == 0) {
      eh_frames++;
      l->eh_frame = i;
    }
  }
  if (eh_frames != 1) l->eh_frame = 0;
  return true;
}

/* The symbol a relocation refers to, checked. */
static const Elf64_Sym *reloc_symbol(linker_t *l, const Elf64_Rela *r, uint32_t *out_index) {
  uint32_t index = ELF64_R_SYM(r->r_info);
  if (index == 0 || index >= l->in.num_syms) {
    unsupported(l, "relocation against symbol %u", index);
    return NULL;
  }
  *out_index = index;
  return &l->in.syms[index];
}

static bool is_defined(const Elf64_Sym *s) { return s->st_shndx != SHN_UNDEF; }

/* Relocation sections that apply to placed sections. */
static bool applies(const linker_t *l, uint32_t i) {
  const Elf64_Shdr *s = &l->in.sh[i];
  return s->sh_type == SHT_RELA && s->sh_info < l->in.eh->e_shnum && l->segment[s->sh_info] >= 0;
}

static bool check_rela(linker_t *l, uint32_t i) {
  const Elf64_Shdr *s = &l->in.sh[i];
  if (s->sh_entsize != sizeof(Elf64_Rela) || s->sh_offset % 8 != 0)
    return unsupported(l, "malformed relocation section %s", section_name(&l->in, i));
  return true;
}

/* First pass over the relocations: which symbols need a GOT slot or a stub,
 * which undefined ones are used, and where they come from. */
static bool scan_relocations(linker_t *l) {
  const input_t *in = &l->in;
  for (uint32_t i = 1; i < in->eh->e_shnum; i++) {
    if (!applies(l, i)) continue;
    if (!check_rela(l, i)) return false;
    const Elf64_Shdr *s = &in->sh[i];
    const Elf64_Shdr *target = &in->sh[s->sh_info];
    const Elf64_Rela *r = (const Elf64_Rela *)(in->bytes + s->sh_offset);
    size_t n = s->sh_size / sizeof *r;
    for (size_t k = 0; k < n; k++) {
      uint32_t type = ELF64_R_TYPE(r[k].r_info), index = 0;
      if (type == R_X86_64_NONE) continue;
      uint64_t width = type == R_X86_64_PC64 ? 8 : 4;
      if (r[k].r_offset > target->sh_size || target->sh_size - r[k].r_offset < width)
        return unsupported(l, "relocation outside its section");
      const Elf64_Sym *sym = reloc_symbol(l, &r[k], &index);
      if (!sym) return false;
      symbol_use_t *u = &l->use[index];
      if (sym->st_shndx == SHN_COMMON ||
          (sym->st_shndx >= SHN_LORESERVE && sym->st_shndx != SHN_ABS))
        return unsupported(l, "symbol in a special section");
      if (is_defined(sym) && sym->st_shndx != SHN_ABS &&
          (sym->st_shndx >= in->eh->e_shnum || l->segment[sym->st_shndx] < 0))
        return unsupported(l, "relocation against unplaced section %s",
                           section_name(in, sym->st_shndx));
      bool undefined = !is_defined(sym);
      if (undefined && u->from == FROM_NOWHERE) {
        const char *name = symbol_name(in, sym);
        if (!name || !*name) return unsupported(l, "undefined symbol without a name");
        u->from = provider_of(name, &u->version);
        if (u->from == FROM_NOWHERE)
          return unsupported(l, "%s is defined by neither libc nor libm", name);
        if (u->from == FROM_LIBM) l->need_libm = true;
        l->num_dynsyms++;
      }
      switch (type) {
        case R_X86_64_PC32:
        case R_X86_64_PC64:
          if (undefined)
            return unsupported(l, "PC-relative data reference to %s", symbol_name(in, sym));
          break;
        case R_X86_64_PLT32:
          if (undefined && u->stub < 0) {
            u->stub = (int32_t)l->num_stubs++;
            if (u->got < 0) u->got = (int32_t)l->num_got++;
          }
          break;
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          if (u->got < 0) u->got = (int32_t)l->num_got++;
          break;
        default:
          return unsupported(l, "relocation type %u in %s", type, section_name(in, s->sh_info));
      }
    }
  }
  return true;
}

static bool exported(const Elf64_Sym *s) {
  unsigned bind = ELF64_ST_BIND(s->st_info), vis = ELF64_ST_VISIBILITY(s->st_other);
  return (bind == STB_GLOBAL || bind == STB_WEAK) && s->st_shndx != SHN_UNDEF &&
         (vis == STV_DEFAULT || vis == STV_PROTECTED);
}

/* .dynsym: the null symbol, the undefined symbols used, the exports. */
static bool number_dynsyms(linker_t *l) {
  const input_t *in = &l->in;
  for (size_t i = 1; i < in->num_syms; i++) {
    const Elf64_Sym *s = &in->syms[i];
    if (exported(s)) {
      if (s->st_shndx != SHN_ABS && (s->st_shndx >= in->eh->e_shnum || l->segment[s->st_shndx] < 0))
        return unsupported(l, "exported symbol in an unplaced section");
      if (!symbol_name(in, s)) return unsupported(l, "symbol name out of range");
      l->num_dynsyms++;
      l->num_exports++;
    }
  }
  l->num_dynsyms++; /* the null symbol */
  l->dynsym_order = tsr_calloc(l->num_dynsyms, sizeof *l->dynsym_order);
  if (!l->dynsym_order) return false;
  uint32_t next = 1;
  for (size_t i = 1; i < in->num_syms; i++)
    if (l->use[i].from != FROM_NOWHERE) {
      l->use[i].dynsym = next;
      l->dynsym_order[next++] = (uint32_t)i;
    }
  for (size_t i = 1; i < in->num_syms; i++)
    if (exported(&in->syms[i])) {
      l->use[i].dynsym = next;
      l->dynsym_order[next++] = (uint32_t)i;
    }
  return true;
}

/* ---- .eh_frame ------------------------------------------------------------------------- */

static uint64_t read_uleb(const uint8_t **p, const uint8_t *end) {
  uint64_t v = 0;
  for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

/* The FDE pointer encoding a CIE (at `cie`, `size` bytes after its length)
 * declares, or -1 when it is not one the header can take (pcrel sdata4). */
static int cie_encoding(const uint8_t *cie, size_t size) {
  const uint8_t *p = cie + 4, *end = cie + size; /* past the CIE id */
  if (p >= end) return -1;
  uint8_t version = *p++;
  const char *aug = (const char *)p;
  const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
  if (!nul) return -1;
  p = nul + 1;
  read_uleb(&p, end); /* code alignment */
  read_uleb(&p, end); /* data alignment (sleb: same length) */
  if (version == 1) {
    p++;
  } else {
    read_uleb(&p, end);
  }
  if (aug[0] != 'z') return 0; /* absptr */
  read_uleb(&p, end);          /* augmentation data length */
  for (const char *a = aug + 1; *a && p < end; a++) {
    if (*a == 'R') return *p;
    if (*a == 'L') {
      p++;
    } else if (*a == 'P') {
      uint8_t enc = *p++;
      if ((enc & 0x0f) != 0x0b && (enc & 0x0f) != 0x03) return -1; /* sdata4/udata4 only */
      p += 4;
    } else {
      return -1;
    }
  }
  return 0;
}

/* Walks the (relocated) .eh_frame at `frame` (address `addr`): counts FDEs,
 * and with `table` fills (initial location, FDE address) pairs. False when
 * some record is not one the header can index. */
static bool walk_eh_frame(const uint8_t *frame, size_t size, uint64_t addr, uint32_t *out_count,
                          int64_t (*table)[2]) {
  uint32_t count = 0;
  size_t at = 0;
  int encodings[64];
  size_t cie_at[64];
  unsigned num_cies = 0;
  while (at + 4 <= size) {
    uint32_t length;
    memcpy(&length, frame + at, 4);
    if (length == 0) break;
    if (length == 0xffffffffu || length > size - at - 4 || length < 4) return false;
    const uint8_t *record = frame + at + 4;
    uint32_t id;
    memcpy(&id, record, 4);
    if (id == 0) {
      if (num_cies == 64) return false;
      cie_at[num_cies] = at; /* FDEs point at its length field */
      encodings[num_cies++] = cie_encoding(record, length);
    } else {
      size_t cie = at + 4 - id; /* the CIE pointer counts back from itself */
      int enc = -1;
      for (unsigned c = 0; c < num_cies; c++)
        if (cie_at[c] == cie) enc = encodings[c];
      if (enc != (DW_EH_PE_pcrel | DW_EH_PE_sdata4) || length < 8) return false;
      int32_t rel;
      memcpy(&rel, record + 4, 4);
      if (table) {
        table[count][0] = (int64_t)(addr + at + 8) + rel;
        table[count][1] = (int64_t)(addr + at);
      }
      count++;
    }
    at += 4 + (size_t)length;
  }
  *out_count = count;
  return true;
}

static int compare_pairs(const void *a, const void *b) {
  int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
  return (x > y) - (x < y);
}

/* ---- Output ---------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t v, uint64_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

static uint32_t sysv_hash(const char *name) {
  uint32_t h = 0;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    h = (h << 4) + *p;
    uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

/* Output sections other than the object's, in order. */
enum {
  OUT_HASH,
  OUT_DYNSYM,
  OUT_DYNSTR,
  OUT_VERSYM,
  OUT_VERNEED,
  OUT_RELA,
  OUT_EH_HDR,
  OUT_STUBS,
  OUT_DYNAMIC,
  OUT_GOT,
  OUT_SYNTH_COUNT
};
static const char *const synth_names[OUT_SYNTH_COUNT] = {
    ".hash",     ".dynsym",       ".dynstr", ".gnu.version", ".gnu.version_r",
    ".rela.dyn", ".eh_frame_hdr", ".plt",    ".dynamic",     ".got"};
#define MAX_VERSIONS 16

typedef struct out_section {
  const char *name;
  uint32_t type, link, info;
  uint64_t flags, addr, size, align, entsize;
} out_section_t;

static void put_sym(Elf64_Sym *out, uint32_t name, unsigned char info, uint16_t shndx,
                    uint64_t value, uint64_t size) {
  *out = (Elf64_Sym){.st_name = name,
                     .st_info = info,
                     .st_other = STV_DEFAULT,
                     .st_shndx = shndx,
                     .st_value = value,
                     .st_size = size};
}

static tsr_status_t emit(linker_t *l, void **out_bytes, size_t *out_size) {
  const input_t *in = &l->in;
  const uint32_t nsec = in->eh->e_shnum;
  tsr_status_t status = NULL;

  /* .dynstr */
  size_t dynstr_size = 1;
  for (uint32_t d = 1; d < l->num_dynsyms; d++)
    dynstr_size += strlen(symbol_name(in, &in->syms[l->dynsym_order[d]])) + 1;
  const char libm_name[] = "libm.so.6";
  uint64_t libm_offset = dynstr_size;
  if (l->need_libm) dynstr_size += sizeof libm_name;
  /* The versions of libm's functions, numbered from 2 in .gnu.version. */
  const char *versions[MAX_VERSIONS];
  uint64_t version_offsets[MAX_VERSIONS];
  uint32_t num_versions = 0;
  for (size_t i = 1; i < in->num_syms; i++) {
    symbol_use_t *u = &l->use[i];
    if (u->from != FROM_LIBM) continue;
    uint32_t v = 0;
    while (v < num_versions && strcmp(versions[v], u->version) != 0) v++;
    if (v == num_versions) {
      if (num_versions == MAX_VERSIONS) {
        unsupported(l, "more than %d versions of libm's functions", MAX_VERSIONS);
        return NULL;
      }
      versions[num_versions] = u->version;
      version_offsets[num_versions++] = dynstr_size;
      dynstr_size += strlen(u->version) + 1;
    }
    u->version_index = (uint16_t)(2 + v);
  }

  uint32_t nbucket = l->num_dynsyms;
  uint64_t hash_size = (2 + (uint64_t)nbucket + l->num_dynsyms) * 4;
  uint32_t num_dynamic = 10 + (l->need_libm ? 4 : 0); /* entries, DT_NULL included */

  uint32_t fde_count = 0;
  bool eh_hdr = false;
  if (l->eh_frame) {
    const Elf64_Shdr *e = &in->sh[l->eh_frame];
    eh_hdr = walk_eh_frame(in->bytes + e->sh_offset, e->sh_size, 0, &fde_count, NULL);
  }

  /* Layout. The program headers: three PT_LOADs, PT_DYNAMIC, PT_GNU_STACK,
   * PT_GNU_EH_FRAME. */
  const uint32_t num_phdrs = eh_hdr ? 6 : 5;
  out_section_t synth[OUT_SYNTH_COUNT];
  memset(synth, 0, sizeof synth);
  uint64_t at = sizeof(Elf64_Ehdr) + num_phdrs * sizeof(Elf64_Phdr);
#define PLACE(i, sz, al)     \
  do {                       \
    at = align_up(at, (al)); \
    synth[i].addr = at;      \
    synth[i].size = (sz);    \
    synth[i].align = (al);   \
    at += (sz);              \
  } while (0)
  PLACE(OUT_HASH, hash_size, 8);
  PLACE(OUT_DYNSYM, (uint64_t)l->num_dynsyms * sizeof(Elf64_Sym), 8);
  PLACE(OUT_DYNSTR, dynstr_size, 1);
  if (num_versions) {
    PLACE(OUT_VERSYM, (uint64_t)l->num_dynsyms * 2, 2);
    PLACE(OUT_VERNEED, sizeof(Elf64_Verneed) + (uint64_t)num_versions * sizeof(Elf64_Vernaux), 8);
  }
  PLACE(OUT_RELA, (uint64_t)l->num_got * sizeof(Elf64_Rela), 8);
  uint64_t seg_start[SEG_COUNT], seg_file_end[SEG_COUNT], seg_mem_end[SEG_COUNT];
  seg_start[SEG_RO] = 0;
  for (uint32_t i = 1; i < nsec; i++)
    if (l->segment[i] == SEG_RO) {
      at = align_up(at, in->sh[i].sh_addralign);
      l->address[i] = at;
      at += in->sh[i].sh_size;
    }
  if (eh_hdr) PLACE(OUT_EH_HDR, 12 + (uint64_t)fde_count * 8, 4);
  seg_file_end[SEG_RO] = seg_mem_end[SEG_RO] = at;

  at = seg_start[SEG_TEXT] = align_up(at, PAGE);
  for (uint32_t i = 1; i < nsec; i++)
    if (l->segment[i] == SEG_TEXT) {
      at = align_up(at, in->sh[i].sh_addralign);
      l->address[i] = at;
      at += in->sh[i].sh_size;
    }
  PLACE(OUT_STUBS, (uint64_t)l->num_stubs * 8, 16);
  seg_file_end[SEG_TEXT] = seg_mem_end[SEG_TEXT] = at;

  at = seg_start[SEG_DATA] = align_up(at, PAGE);
  PLACE(OUT_DYNAMIC, (uint64_t)num_dynamic * sizeof(Elf64_Dyn), 8);
  PLACE(OUT_GOT, (uint64_t)l->num_got * 8, 8);
  for (uint32_t i = 1; i < nsec; i++)
    if (l->segment[i] == SEG_DATA && in->sh[i].sh_type != SHT_NOBITS) {
      at = align_up(at, in->sh[i].sh_addralign);
      l->address[i] = at;
      at += in->sh[i].sh_size;
    }
  seg_file_end[SEG_DATA] = at;
  for (uint32_t i = 1; i < nsec; i++)
    if (l->segment[i] == SEG_DATA && in->sh[i].sh_type == SHT_NOBITS) {
      at = align_up(at, in->sh[i].sh_addralign);
      l->address[i] = at;
      at += in->sh[i].sh_size;
    }
  seg_mem_end[SEG_DATA] = at;
#undef PLACE

  /* Non-allocated tail: .symtab, .strtab, .shstrtab, section headers. The
   * section list: null, the synthetic ones in address order, the object's. */
  uint32_t num_placed = 0;
  for (uint32_t i = 1; i < nsec; i++) num_placed += l->segment[i] >= 0;
  uint32_t num_out = 1 + OUT_SYNTH_COUNT + num_placed + 3; /* + symtab, strtab, shstrtab */
  out_section_t *sections = tsr_calloc(num_out, sizeof *sections);
  uint16_t *out_index = tsr_calloc(nsec, sizeof *out_index); /* object section -> output */
  uint32_t *local_syms = tsr_calloc(in->num_syms + 1, sizeof *local_syms);
  uint8_t *bytes = NULL;
  if (!sections || !out_index || !local_syms) {
    status = TSR_OOM();
    goto done;
  }
  /* Order by address (the synthetic ones interleave with the object's). */
  uint32_t k = 1;
  for (uint32_t s = 0; s < OUT_SYNTH_COUNT; s++) {
    synth[s].name = synth_names[s];
    sections[k++] = synth[s];
  }
  for (uint32_t i = 1; i < nsec; i++) {
    if (l->segment[i] < 0) continue;
    const Elf64_Shdr *s = &in->sh[i];
    out_index[i] = (uint16_t)k;
    sections[k++] = (out_section_t){
        .name = section_name(in, i),
        .type = s->sh_type,
        .flags = s->sh_flags & (SHF_ALLOC | SHF_WRITE | SHF_EXECINSTR | SHF_MERGE | SHF_STRINGS),
        .addr = l->address[i],
        .size = s->sh_size,
        .align = s->sh_addralign,
        .entsize = s->sh_entsize};
  }
  /* Output section numbers of the synthetic ones: 1 + their enum value. */
  sections[1 + OUT_HASH].type = SHT_HASH;
  sections[1 + OUT_HASH].flags = SHF_ALLOC;
  sections[1 + OUT_HASH].link = 1 + OUT_DYNSYM;
  sections[1 + OUT_HASH].entsize = 4;
  sections[1 + OUT_DYNSYM].type = SHT_DYNSYM;
  sections[1 + OUT_DYNSYM].flags = SHF_ALLOC;
  sections[1 + OUT_DYNSYM].link = 1 + OUT_DYNSTR;
  sections[1 + OUT_DYNSYM].entsize = sizeof(Elf64_Sym);
  sections[1 + OUT_DYNSTR].type = SHT_STRTAB;
  sections[1 + OUT_DYNSTR].flags = SHF_ALLOC;
  if (num_versions) {
    sections[1 + OUT_VERSYM].type = SHT_GNU_versym;
    sections[1 + OUT_VERSYM].flags = SHF_ALLOC;
    sections[1 + OUT_VERSYM].link = 1 + OUT_DYNSYM;
    sections[1 + OUT_VERSYM].entsize = 2;
    sections[1 + OUT_VERNEED].type = SHT_GNU_verneed;
    sections[1 + OUT_VERNEED].flags = SHF_ALLOC;
    sections[1 + OUT_VERNEED].link = 1 + OUT_DYNSTR;
    sections[1 + OUT_VERNEED].info = 1;
  }
  sections[1 + OUT_RELA].type = SHT_RELA;
  sections[1 + OUT_RELA].flags = SHF_ALLOC;
  sections[1 + OUT_RELA].link = 1 + OUT_DYNSYM;
  sections[1 + OUT_RELA].entsize = sizeof(Elf64_Rela);
  sections[1 + OUT_EH_HDR].type = eh_hdr ? SHT_PROGBITS : SHT_NULL;
  sections[1 + OUT_EH_HDR].flags = eh_hdr ? SHF_ALLOC : 0;
  sections[1 + OUT_STUBS].type = SHT_PROGBITS;
  sections[1 + OUT_STUBS].flags = SHF_ALLOC | SHF_EXECINSTR;
  sections[1 + OUT_DYNAMIC].type = SHT_DYNAMIC;
  sections[1 + OUT_DYNAMIC].flags = SHF_ALLOC | SHF_WRITE;
  sections[1 + OUT_DYNAMIC].link = 1 + OUT_DYNSTR;
  sections[1 + OUT_DYNAMIC].entsize = sizeof(Elf64_Dyn);
  sections[1 + OUT_GOT].type = SHT_PROGBITS;
  sections[1 + OUT_GOT].flags = SHF_ALLOC | SHF_WRITE;
  sections[1 + OUT_GOT].entsize = 8;
  /* .dynsym's info: one past the last local symbol, which is the null one. */
  sections[1 + OUT_DYNSYM].info = 1;

  /* .symtab: the object's named functions and objects that were placed,
   * locals first. */
  uint32_t num_symtab = 1, num_local = 1;
  size_t strtab_size = 1;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 1; i < in->num_syms; i++) {
      const Elf64_Sym *s = &in->syms[i];
      unsigned type = ELF64_ST_TYPE(s->st_info);
      bool local = ELF64_ST_BIND(s->st_info) == STB_LOCAL;
      const char *name = symbol_name(in, s);
      if ((type != STT_FUNC && type != STT_OBJECT) || !name || !*name || s->st_shndx == SHN_UNDEF ||
          s->st_shndx >= nsec || l->segment[s->st_shndx] < 0 || local != (pass == 0))
        continue;
      local_syms[num_symtab++] = (uint32_t)i;
      if (local) num_local++;
      strtab_size += strlen(name) + 1;
    }
  size_t shstrtab_size = 1 + sizeof ".symtab" + sizeof ".strtab" + sizeof ".shstrtab";
  for (uint32_t s = 1; s < k; s++) shstrtab_size += strlen(sections[s].name) + 1;

  uint64_t symtab_at = align_up(seg_file_end[SEG_DATA], 8);
  uint64_t strtab_at = symtab_at + (uint64_t)num_symtab * sizeof(Elf64_Sym);
  uint64_t shstrtab_at = strtab_at + strtab_size;
  uint64_t shdr_at = align_up(shstrtab_at + shstrtab_size, 8);
  uint64_t file_size = shdr_at + (uint64_t)num_out * sizeof(Elf64_Shdr);
  bytes = tsr_calloc(1, file_size);
  if (!bytes) {
    status = TSR_OOM();
    goto done;
  }

  /* The object's sections. */
  for (uint32_t i = 1; i < nsec; i++)
    if (l->segment[i] >= 0 && in->sh[i].sh_type != SHT_NOBITS)
      memcpy(bytes + l->address[i], in->bytes + in->sh[i].sh_offset, in->sh[i].sh_size);

  /* Stubs: jmp *slot(%rip). */
  uint64_t stubs = synth[OUT_STUBS].addr, got = synth[OUT_GOT].addr;
  for (size_t i = 1; i < in->num_syms; i++) {
    const symbol_use_t *u = &l->use[i];
    if (u->stub < 0) continue;
    uint8_t *p = bytes + stubs + (uint64_t)u->stub * 8;
    int32_t rel = (int32_t)((int64_t)(got + (uint64_t)u->got * 8) -
                            (int64_t)(stubs + (uint64_t)u->stub * 8 + 6));
    p[0] = 0xff;
    p[1] = 0x25;
    memcpy(p + 2, &rel, 4);
    p[6] = 0x66; /* two bytes of padding: xchg %ax,%ax */
    p[7] = 0x90;
  }

  /* Relocations of the object. */
  for (uint32_t i = 1; i < nsec && !l->unsupported; i++) {
    if (!applies(l, i)) continue;
    const Elf64_Shdr *s = &in->sh[i];
    uint32_t target = s->sh_info;
    const Elf64_Rela *r = (const Elf64_Rela *)(in->bytes + s->sh_offset);
    size_t n = s->sh_size / sizeof *r;
    for (size_t j = 0; j < n; j++) {
      uint32_t type = ELF64_R_TYPE(r[j].r_info), index = 0;
      if (type == R_X86_64_NONE) continue;
      const Elf64_Sym *sym = reloc_symbol(l, &r[j], &index);
      if (!sym) break;
      const symbol_use_t *u = &l->use[index];
      uint64_t P = l->address[target] + r[j].r_offset;
      int64_t value;
      if (in->sh[target].sh_type == SHT_NOBITS) {
        unsupported(l, "relocation in a NOBITS section");
        break;
      }
      if (type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
          type == R_X86_64_REX_GOTPCRELX) {
        value = (int64_t)(got + (uint64_t)u->got * 8) + r[j].r_addend - (int64_t)P;
      } else {
        uint64_t S;
        if (!is_defined(sym)) {
          S = stubs + (uint64_t)u->stub * 8; /* PLT32: scan_relocations made one */
        } else if (sym->st_shndx == SHN_ABS) {
          S = sym->st_value;
        } else {
          S = l->address[sym->st_shndx] + sym->st_value;
        }
        value = (int64_t)S + r[j].r_addend - (int64_t)P;
      }
      uint8_t *where = bytes + P;
      if (type == R_X86_64_PC64) {
        memcpy(where, &value, 8);
      } else {
        if (value < INT32_MIN || value > INT32_MAX) {
          unsupported(l, "relocation out of 32-bit range");
          break;
        }
        int32_t v32 = (int32_t)value;
        memcpy(where, &v32, 4);
      }
    }
  }
  if (l->unsupported) goto done;

  /* .dynstr, .dynsym, .hash */
  char *dynstr = (char *)bytes + synth[OUT_DYNSTR].addr;
  Elf64_Sym *dynsym = (Elf64_Sym *)(bytes + synth[OUT_DYNSYM].addr);
  uint32_t *hash = (uint32_t *)(bytes + synth[OUT_HASH].addr);
  uint32_t *buckets = hash + 2, *chains = hash + 2 + nbucket;
  hash[0] = nbucket;
  hash[1] = l->num_dynsyms;
  size_t str_at = 1;
  for (uint32_t d = 1; d < l->num_dynsyms; d++) {
    const Elf64_Sym *s = &in->syms[l->dynsym_order[d]];
    const char *name = symbol_name(in, s);
    size_t len = strlen(name);
    memcpy(dynstr + str_at, name, len + 1);
    if (is_defined(s)) {
      uint16_t shndx = s->st_shndx == SHN_ABS ? SHN_ABS : out_index[s->st_shndx];
      uint64_t value = s->st_shndx == SHN_ABS ? s->st_value : l->address[s->st_shndx] + s->st_value;
      put_sym(&dynsym[d], (uint32_t)str_at, s->st_info, shndx, value, s->st_size);
      dynsym[d].st_other = s->st_other;
    } else {
      unsigned type = ELF64_ST_TYPE(s->st_info);
      put_sym(&dynsym[d], (uint32_t)str_at,
              ELF64_ST_INFO(ELF64_ST_BIND(s->st_info), type == STT_NOTYPE ? STT_FUNC : type),
              SHN_UNDEF, 0, 0);
    }
    str_at += len + 1;
    uint32_t b = sysv_hash(name) % nbucket;
    chains[d] = buckets[b];
    buckets[b] = d;
  }
  if (l->need_libm) memcpy(dynstr + libm_offset, libm_name, sizeof libm_name);
  if (num_versions) {
    uint16_t *versym = (uint16_t *)(bytes + synth[OUT_VERSYM].addr);
    for (uint32_t d = 1; d < l->num_dynsyms; d++) {
      const symbol_use_t *u = &l->use[l->dynsym_order[d]];
      versym[d] = u->from == FROM_LIBM ? u->version_index : 1; /* 1: global, unversioned */
    }
    uint8_t *p = bytes + synth[OUT_VERNEED].addr;
    Elf64_Verneed need = {.vn_version = VER_NEED_CURRENT,
                          .vn_cnt = (uint16_t)num_versions,
                          .vn_file = (uint32_t)libm_offset,
                          .vn_aux = sizeof need,
                          .vn_next = 0};
    memcpy(p, &need, sizeof need);
    for (uint32_t v = 0; v < num_versions; v++) {
      memcpy(dynstr + version_offsets[v], versions[v], strlen(versions[v]) + 1);
      Elf64_Vernaux aux = {.vna_hash = sysv_hash(versions[v]),
                           .vna_flags = 0,
                           .vna_other = (uint16_t)(2 + v),
                           .vna_name = (uint32_t)version_offsets[v],
                           .vna_next = v + 1 < num_versions ? sizeof aux : 0};
      memcpy(p + sizeof need + v * sizeof aux, &aux, sizeof aux);
    }
  }

  /* .got and .rela.dyn */
  Elf64_Rela *rela = (Elf64_Rela *)(bytes + synth[OUT_RELA].addr);
  uint32_t num_relative = 0;
  for (int pass = 0; pass < 2; pass++) /* RELATIVE ones first (DT_RELACOUNT) */
    for (size_t i = 1; i < in->num_syms; i++) {
      const symbol_use_t *u = &l->use[i];
      if (u->got < 0) continue;
      const Elf64_Sym *s = &in->syms[i];
      uint64_t slot = got + (uint64_t)u->got * 8;
      bool relative = is_defined(s);
      if (relative != (pass == 0)) continue;
      Elf64_Rela out;
      if (relative) {
        uint64_t S = s->st_shndx == SHN_ABS ? s->st_value : l->address[s->st_shndx] + s->st_value;
        out = (Elf64_Rela){slot, ELF64_R_INFO(0, R_X86_64_RELATIVE), (int64_t)S};
        memcpy(bytes + slot, &S, 8);
      } else {
        out = (Elf64_Rela){slot, ELF64_R_INFO(u->dynsym, R_X86_64_GLOB_DAT), 0};
      }
      *rela++ = out;
      num_relative += relative;
    }

  /* .dynamic */
  Elf64_Dyn *dyn = (Elf64_Dyn *)(bytes + synth[OUT_DYNAMIC].addr);
  uint32_t nd = 0;
  if (l->need_libm) dyn[nd++] = (Elf64_Dyn){DT_NEEDED, {libm_offset}};
  dyn[nd++] = (Elf64_Dyn){DT_HASH, {synth[OUT_HASH].addr}};
  dyn[nd++] = (Elf64_Dyn){DT_STRTAB, {synth[OUT_DYNSTR].addr}};
  dyn[nd++] = (Elf64_Dyn){DT_SYMTAB, {synth[OUT_DYNSYM].addr}};
  dyn[nd++] = (Elf64_Dyn){DT_STRSZ, {dynstr_size}};
  dyn[nd++] = (Elf64_Dyn){DT_SYMENT, {sizeof(Elf64_Sym)}};
  dyn[nd++] = (Elf64_Dyn){DT_RELA, {synth[OUT_RELA].addr}};
  dyn[nd++] = (Elf64_Dyn){DT_RELASZ, {synth[OUT_RELA].size}};
  dyn[nd++] = (Elf64_Dyn){DT_RELAENT, {sizeof(Elf64_Rela)}};
  dyn[nd++] = (Elf64_Dyn){DT_RELACOUNT, {num_relative}};
  if (num_versions) {
    dyn[nd++] = (Elf64_Dyn){DT_VERSYM, {synth[OUT_VERSYM].addr}};
    dyn[nd++] = (Elf64_Dyn){DT_VERNEED, {synth[OUT_VERNEED].addr}};
    dyn[nd++] = (Elf64_Dyn){DT_VERNEEDNUM, {1}};
  }
  dyn[nd++] = (Elf64_Dyn){DT_NULL, {0}};

  /* .eh_frame_hdr */
  if (eh_hdr) {
    uint64_t hdr = synth[OUT_EH_HDR].addr, frame = l->address[l->eh_frame];
    int64_t(*table)[2] = tsr_calloc(fde_count ? fde_count : 1, sizeof *table);
    if (!table) {
      status = TSR_OOM();
      goto done;
    }
    uint32_t count = 0;
    walk_eh_frame(bytes + frame, in->sh[l->eh_frame].sh_size, frame, &count, table);
    qsort(table, count, sizeof *table, compare_pairs);
    uint8_t *p = bytes + hdr;
    p[0] = 1;
    p[1] = DW_EH_PE_pcrel | DW_EH_PE_sdata4;
    p[2] = DW_EH_PE_udata4;
    p[3] = DW_EH_PE_datarel | DW_EH_PE_sdata4;
    int32_t frame_rel = (int32_t)((int64_t)frame - (int64_t)(hdr + 4));
    memcpy(p + 4, &frame_rel, 4);
    memcpy(p + 8, &count, 4);
    for (uint32_t f = 0; f < count; f++) {
      int32_t pair[2] = {(int32_t)(table[f][0] - (int64_t)hdr),
                         (int32_t)(table[f][1] - (int64_t)hdr)};
      memcpy(p + 12 + 8 * f, pair, 8);
    }
    tsr_free(table);
  }

  /* .symtab, .strtab */
  Elf64_Sym *symtab = (Elf64_Sym *)(bytes + symtab_at);
  char *strtab = (char *)bytes + strtab_at;
  str_at = 1;
  for (uint32_t t = 1; t < num_symtab; t++) {
    const Elf64_Sym *s = &in->syms[local_syms[t]];
    const char *name = symbol_name(in, s);
    size_t len = strlen(name);
    memcpy(strtab + str_at, name, len + 1);
    put_sym(&symtab[t], (uint32_t)str_at, s->st_info, out_index[s->st_shndx],
            l->address[s->st_shndx] + s->st_value, s->st_size);
    symtab[t].st_other = s->st_other;
    str_at += len + 1;
  }
  sections[k] = (out_section_t){.name = ".symtab",
                                .type = SHT_SYMTAB,
                                .addr = 0,
                                .size = (uint64_t)num_symtab * sizeof(Elf64_Sym),
                                .align = 8,
                                .entsize = sizeof(Elf64_Sym),
                                .link = k + 1,
                                .info = num_local};
  sections[k + 1] =
      (out_section_t){.name = ".strtab", .type = SHT_STRTAB, .size = strtab_size, .align = 1};
  sections[k + 2] =
      (out_section_t){.name = ".shstrtab", .type = SHT_STRTAB, .size = shstrtab_size, .align = 1};
  k += 3;

  /* .shstrtab and the section headers */
  char *shstrtab = (char *)bytes + shstrtab_at;
  Elf64_Shdr *shdr = (Elf64_Shdr *)(bytes + shdr_at);
  str_at = 1;
  for (uint32_t s = 1; s < k; s++) {
    const out_section_t *o = &sections[s];
    size_t len = strlen(o->name);
    memcpy(shstrtab + str_at, o->name, len + 1);
    uint64_t offset = o->addr;
    if (o->type == SHT_SYMTAB) offset = symtab_at;
    if (s == k - 2) offset = strtab_at;
    if (s == k - 1) offset = shstrtab_at;
    shdr[s] = (Elf64_Shdr){.sh_name = (uint32_t)str_at,
                           .sh_type = o->type,
                           .sh_flags = o->flags,
                           .sh_addr = o->addr,
                           .sh_offset = offset,
                           .sh_size = o->size,
                           .sh_link = o->link,
                           .sh_info = o->info,
                           .sh_addralign = o->align,
                           .sh_entsize = o->entsize};
    str_at += len + 1;
  }

  /* The headers. */
  Elf64_Ehdr *eh = (Elf64_Ehdr *)bytes;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_ident[EI_VERSION] = EV_CURRENT;
  eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh->e_type = ET_DYN;
  eh->e_machine = EM_X86_64;
  eh->e_version = EV_CURRENT;
  eh->e_phoff = sizeof(Elf64_Ehdr);
  eh->e_shoff = shdr_at;
  eh->e_ehsize = sizeof(Elf64_Ehdr);
  eh->e_phentsize = sizeof(Elf64_Phdr);
  eh->e_phnum = (uint16_t)num_phdrs;
  eh->e_shentsize = sizeof(Elf64_Shdr);
  eh->e_shnum = (uint16_t)k;
  eh->e_shstrndx = (uint16_t)(k - 1);
  Elf64_Phdr *ph = (Elf64_Phdr *)(bytes + sizeof(Elf64_Ehdr));
  static const uint32_t seg_flags[SEG_COUNT] = {PF_R, PF_R | PF_X, PF_R | PF_W};
  for (int sgi = 0; sgi < SEG_COUNT; sgi++)
    ph[sgi] = (Elf64_Phdr){.p_type = PT_LOAD,
                           .p_flags = seg_flags[sgi],
                           .p_offset = seg_start[sgi],
                           .p_vaddr = seg_start[sgi],
                           .p_paddr = seg_start[sgi],
                           .p_filesz = seg_file_end[sgi] - seg_start[sgi],
                           .p_memsz = seg_mem_end[sgi] - seg_start[sgi],
                           .p_align = PAGE};
  ph[3] = (Elf64_Phdr){.p_type = PT_DYNAMIC,
                       .p_flags = PF_R | PF_W,
                       .p_offset = synth[OUT_DYNAMIC].addr,
                       .p_vaddr = synth[OUT_DYNAMIC].addr,
                       .p_paddr = synth[OUT_DYNAMIC].addr,
                       .p_filesz = synth[OUT_DYNAMIC].size,
                       .p_memsz = synth[OUT_DYNAMIC].size,
                       .p_align = 8};
  ph[4] = (Elf64_Phdr){.p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W, .p_align = 16};
  if (eh_hdr)
    ph[5] = (Elf64_Phdr){.p_type = PT_GNU_EH_FRAME,
                         .p_flags = PF_R,
                         .p_offset = synth[OUT_EH_HDR].addr,
                         .p_vaddr = synth[OUT_EH_HDR].addr,
                         .p_paddr = synth[OUT_EH_HDR].addr,
                         .p_filesz = synth[OUT_EH_HDR].size,
                         .p_memsz = synth[OUT_EH_HDR].size,
                         .p_align = 4};

  *out_bytes = bytes;
  *out_size = file_size;
  bytes = NULL;
done:
  tsr_free(bytes);
  tsr_free(sections);
  tsr_free(out_index);
  tsr_free(local_syms);
  return status;
}

tsr_status_t tsr_lower_link_shared(const void *object, size_t size, void **out_bytes,
                                   size_t *out_size, char *why, size_t why_size) {
  linker_t l;
  memset(&l, 0, sizeof l);
  l.why = why;
  l.why_size = why_size;
  if (why_size) why[0] = 0;
  *out_bytes = NULL;
  *out_size = 0;
  if (!read_input(&l, object, size)) return NULL;
  tsr_status_t status = NULL;
  uint32_t nsec = l.in.eh->e_shnum;
  l.segment = tsr_calloc(nsec, sizeof *l.segment);
  l.address = tsr_calloc(nsec, sizeof *l.address);
  l.use = tsr_calloc(l.in.num_syms + 1, sizeof *l.use);
  if (!l.segment || !l.address || !l.use) {
    status = TSR_OOM();
  } else {
    for (size_t i = 0; i < l.in.num_syms; i++)
      l.use[i] = (symbol_use_t){-1, -1, 0, FROM_NOWHERE, NULL, 0};
    if (place_sections(&l) && scan_relocations(&l)) {
      if (!number_dynsyms(&l)) {
        if (!l.unsupported) status = TSR_OOM();
      } else {
        status = emit(&l, out_bytes, out_size);
        if (l.unsupported && *out_bytes) {
          tsr_free(*out_bytes);
          *out_bytes = NULL;
          *out_size = 0;
        }
      }
    }
  }
  tsr_free(l.segment);
  tsr_free(l.address);
  tsr_free(l.use);
  tsr_free(l.dynsym_order);
  return status;
}
