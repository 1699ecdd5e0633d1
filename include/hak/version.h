/* SPDX-License-Identifier: MIT */
#ifndef HAK_VERSION_H
#define HAK_VERSION_H
#define HAK_VERSION "0.1.0"
#endif
