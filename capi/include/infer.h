/*
 * libinfer — the C API. This header is the manual.
 *
 * Conventions (all functions):
 *   - Names are infer_<object>_<verb>. Nothing here throws or aborts: C++ exceptions never cross
 *     this boundary; a failing call returns an infer_status and, where a handle exists, leaves a
 *     readable message on it.
 *   - Strings returned as `const char *` are borrowed: owned by the library, valid as documented
 *     at each function, never to be freed by the caller.
 *   - New behaviour arrives as new symbols (a `_v2` suffix), never as a changed meaning of an
 *     existing one. Options structs start with `struct_size` so they can grow.
 *
 * Threading: every function in this header is thread-safe unless its comment says otherwise.
 */
#ifndef INFER_H
#define INFER_H

#include <stddef.h>
#include <stdint.h>

#include "infer/export.h"
#include "infer/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ---------------------------------------------------------------------------- */

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. Compare with
 * INFER_VERSION_STRING to detect a header/library mismatch. */
INFER_API const char *infer_version(void);
/* The library's version as INFER_VERSION_NUMBER computes it (major*1e6 + minor*1e3 + patch). */
INFER_API int infer_version_number(void);

/* ---- Status codes ------------------------------------------------------------------------ */

/* Values are stable; new codes may be added at the end. */
typedef enum infer_status {
  INFER_OK = 0,
  INFER_ERR_INVALID_ARGUMENT = 1, /* a caller passed a bad value (NULL where not allowed, ...) */
  INFER_ERR_NOT_FOUND = 2,        /* a file, key, tensor or request does not exist */
  INFER_ERR_IO = 3,               /* the operating system refused a read, write or map */
  INFER_ERR_MALFORMED_FILE = 4,   /* a file's content breaks its format */
  INFER_ERR_UNSUPPORTED = 5,      /* valid input this build cannot handle */
  INFER_ERR_OUT_OF_MEMORY = 6,    /* an allocation failed */
  INFER_ERR_OUT_OF_RANGE = 7,     /* a size or count exceeds a limit */
  INFER_ERR_OVERLOADED = 8,       /* admission control refused new work */
  INFER_ERR_CANCELLED = 9,        /* the request was cancelled */
  INFER_ERR_DEADLINE = 10,        /* the request ran past its deadline */
  INFER_ERR_INTERNAL = 11         /* a bug in libinfer */
} infer_status;

/* A short stable name for a status ("INFER_ERR_MALFORMED_FILE"); a static string, never NULL
 * (unknown values give "INFER_ERR_UNKNOWN"). */
INFER_API const char *infer_status_name(infer_status status);

/* ---- Logging ----------------------------------------------------------------------------- */

typedef enum infer_log_level {
  INFER_LOG_DEBUG = 0,
  INFER_LOG_INFO = 1,
  INFER_LOG_WARN = 2,
  INFER_LOG_ERROR = 3
} infer_log_level;

/* Receives each log message (no trailing newline; borrowed for the duration of the call). May be
 * called from any library thread, several at once: it must be thread-safe and return quickly. */
typedef void (*infer_log_callback)(infer_log_level level, const char *message, void *user_data);

/* Routes the library's log messages to `callback` (user_data is passed back untouched). NULL
 * restores the default, which writes to stderr. */
INFER_API void infer_log_set_callback(infer_log_callback callback, void *user_data);
/* Drops messages below `level` (default INFER_LOG_WARN). Returns INFER_ERR_INVALID_ARGUMENT for a
 * value outside the enum, INFER_OK otherwise. */
INFER_API infer_status infer_log_set_level(infer_log_level level);

#ifdef __cplusplus
}
#endif

#endif /* INFER_H */
