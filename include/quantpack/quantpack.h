/* quantpack public API: include this one header. */
#ifndef QUANTPACK_H
#define QUANTPACK_H
#include "quantpack/status.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/model.h"
#include "quantpack/tokenizer.h"
#include "quantpack/sampler.h"
#include "quantpack/runtime.h"
#define QP_VERSION_STRING "0.1.0"
#endif
