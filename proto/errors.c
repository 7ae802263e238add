/* SPDX-License-Identifier: MIT */
#include "cumod/errors.h"

const char *
cumod_strerror(int err)
{
    switch (err) {
#define CUMOD_ERR_STR(name, num, msg)                                          \
    case num:                                                                  \
        return msg;
        CUMOD_ERRNO_MAP(CUMOD_ERR_STR)
#undef CUMOD_ERR_STR
    }
    return "unknown error";
}

const char *
cumod_errname(int err)
{
    switch (err) {
#define CUMOD_ERR_NAME(name, num, msg)                                         \
    case num:                                                                  \
        return "CUMOD_" #name;
        CUMOD_ERRNO_MAP(CUMOD_ERR_NAME)
#undef CUMOD_ERR_NAME
    }
    return "CUMOD_E?";
}
