/* Symbol visibility for libinfer's public API. C and C++.
 * The shared library is built with -fvisibility=hidden: only what is marked INFER_API is
 * exported. INFER_STATIC is defined for users of the static library. */
#ifndef INFER_EXPORT_H
#define INFER_EXPORT_H

#if defined(INFER_STATIC)
#  define INFER_API
#elif defined(_WIN32)
#  if defined(INFER_BUILDING)
#    define INFER_API __declspec(dllexport)
#  else
#    define INFER_API __declspec(dllimport)
#  endif
#else
#  define INFER_API __attribute__((visibility("default")))
#endif

#endif
