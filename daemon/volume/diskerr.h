/* SPDX-License-Identifier: MIT */
/*
 * When the backing store fails a request: which errors mean the disk is failing (then the
 * volume detaches it, on-io-error detach, or hands the error to the client, pass-on), and the
 * operator's local-io-error hook that runs either way.
 */
#ifndef HAK_DISKERR_H
#define HAK_DISKERR_H

#include <stdbool.h>

struct hak_volume_cfg;

/*
 * Whether a failed request means the disk is failing (EIO, ENXIO, ENODEV, ENOMEDIUM, EROFS,
 * EREMOTEIO, EBADF, EUCLEAN...), as opposed to a request the store merely cannot do (ENOSPC,
 * ENOTSUP, EINVAL, EFBIG): those go to the client and leave the disk attached.
 */
bool diskerr_is_disk_error(int err);
/* "EIO", "ENODEV": the symbolic name (events take no spaces). */
const char *diskerr_errno_name(int err);

/*
 * Run local-io-error-hook (if configured) as "HOOK VOLUME ERRNO-NAME OP POLICY" with the same in
 * HAK_VOLUME, HAK_ERROR, HAK_OP, HAK_POLICY; never waits for it (ev_child reaps it and logs
 * the exit status). At most a few run at once; more are skipped with a log line.
 */
void diskerr_hook_run(const struct hak_volume_cfg *vc, const char *op, int err, const char *policy);

#endif
