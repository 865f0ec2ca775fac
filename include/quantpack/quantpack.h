/* quantpack public API: include this one header (README "Embed"; link with
 * `pkg-config --cflags --libs quantpack` or CMake's find_package(quantpack) ->
 * quantpack::quantpack). */
#ifndef QUANTPACK_H
#define QUANTPACK_H
#include "quantpack/status.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/model.h"
#include "quantpack/tokenizer.h"
#include "quantpack/sampler.h"
#include "quantpack/runtime.h"
#include "quantpack/convert.h"
#include "quantpack/chat.h"
#include "quantpack/generate.h"

/* The version of these headers; equal to the project version in CMakeLists.txt (configure checks
 * it) and to the shared library's VERSION. */
#define QP_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif
/* The version of the library actually linked ("0.1.0"): an embedder loading libquantpack.so can
 * compare it with QP_VERSION_STRING. Static string. */
QP_API const char *qp_version(void);
#ifdef __cplusplus
}
#endif
#endif
