/* SPDX-License-Identifier: MIT */
/* Clocks. */
#ifndef HAK_CLOCK_H
#define HAK_CLOCK_H

/* Seconds on the monotonic clock. */
double clock_mono(void);

#endif
