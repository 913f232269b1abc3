/* The part of XLA's FFI C API (xla/ffi/api/c_api.h, API 0.x) that
 * runtime/xla_ffi.c reads: each struct starts as XLA's does, and only the
 * fields read are declared. Shared with its test, which makes call frames
 * as XLA would. */
#ifndef TESSERA_RUNTIME_XLA_FFI_H
#define TESSERA_RUNTIME_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

enum { FFI_API_MAJOR = 0, FFI_API_MINOR = 5 }; /* as jaxlib 0.12's header */
enum { FFI_STAGE_EXECUTE = 3, FFI_EXTENSION_METADATA = 1, FFI_ATTR_SCALAR = 3 };
enum { FFI_DTYPE_U64 = 9, FFI_DTYPE_F32 = 11, FFI_DTYPE_BF16 = 16 };
enum { FFI_ERROR_CANCELLED = 1, FFI_ERROR_INVALID_ARGUMENT = 3, FFI_ERROR_INTERNAL = 13 };

typedef struct ffi_ext {
  size_t struct_size;
  int type;
  struct ffi_ext *next;
} ffi_ext_t;

typedef struct {
  size_t struct_size;
  void *ext;
  int major, minor;
} ffi_version_t;

typedef struct {
  size_t struct_size;
  ffi_version_t api_version;
  uint32_t traits;
} ffi_metadata_t;

typedef struct {
  ffi_ext_t base;
  ffi_metadata_t *metadata;
} ffi_metadata_ext_t;

typedef struct {
  size_t struct_size;
  void *ext;
  int64_t size;
  void *types;
  void **args;
} ffi_args_t; /* XLA_FFI_Args and XLA_FFI_Rets */

typedef struct {
  const char *ptr;
  size_t len;
} ffi_span_t;

typedef struct {
  size_t struct_size;
  void *ext;
  int64_t size;
  int *types;
  ffi_span_t **names;
  void **attrs;
} ffi_attrs_t;

typedef struct {
  int dtype;
  void *value;
} ffi_scalar_t;

typedef struct {
  size_t struct_size;
  void *ext;
  int dtype; /* XLA_FFI_DataType */
  void *data;
  int64_t rank;
  int64_t *dims;
} ffi_buffer_t;

typedef struct {
  size_t struct_size;
  void *ext;
  const char *message;
  int errc;
} ffi_error_args_t;

typedef void *(*ffi_error_create_fn)(ffi_error_args_t *args);

typedef struct {
  size_t struct_size;
  void *ext;
  ffi_version_t api_version;
  void *internal_api;
  ffi_error_create_fn error_create;
} ffi_api_t;

typedef struct {
  size_t struct_size;
  ffi_ext_t *ext;
  const ffi_api_t *api;
  void *ctx;
  int stage;
  ffi_args_t args;
  ffi_args_t rets;
  ffi_attrs_t attrs;
} ffi_frame_t;

#endif
