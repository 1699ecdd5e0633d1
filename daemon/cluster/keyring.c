/* SPDX-License-Identifier: MIT */
/* The cluster key and its rotation without a gap: see keyring.h. */
#include "keyring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "lib/log.h"

static bool same_key(const struct key_bytes *a, const struct key_bytes *b)
{
	return a->len == b->len && CRYPTO_memcmp(a->bytes, b->bytes, a->len) == 0;
}

void keyring_init_key(struct keyring *kr, const struct key_bytes *key, unsigned need)
{
	memset(kr, 0, sizeof(*kr));
	kr->what = "cluster key";
	kr->need = need ? need : 1;
	kr->cur = *key;
	kr->switched_ms = -1;
}

int keyring_init(struct keyring *kr, const char *path, const char *what, unsigned need, char *err,
                 size_t errlen)
{
	struct key_bytes *k = calloc(1, sizeof(*k));
	struct file_stamp st;
	int rc = -1;

	memset(kr, 0, sizeof(*kr));
	if (!k) {
		snprintf(err, errlen, "Out of memory reading the %s.", what);
		errno = ENOMEM;
		goto out;
	}
	if (strlen(path) >= sizeof(kr->path)) {
		snprintf(err, errlen, "The %s file name is longer than %u bytes.", what,
		         KEYRING_PATH_MAX - 1);
		errno = ENAMETOOLONG;
		goto out;
	}
	/* stamped before the read: a replacement between the two is seen at the next check */
	if (keyfile_stamp(path, &st) < 0 || keyfile_load(path, what, k, err, errlen) < 0) {
		if (errno && !err[0])
			snprintf(err, errlen, "Cannot read the %s file %s: %s.", what, path,
			         strerror(errno));
		goto out;
	}
	keyring_init_key(kr, k, need);
	kr->stamp = st;
	memcpy(kr->path, path, strlen(path) + 1);
	kr->what = what;
	rc = 0;
out:
	if (k)
		OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return rc;
}

/* Take next as the current key; called only when it differs from the current one. */
static void rotate(struct keyring *kr, const struct key_bytes *next)
{
	/* Before the other side caught up, the old key is the one it is known to use: keep it. */
	if (!kr->rotating || kr->switched_ms >= 0)
		kr->old = kr->cur;
	kr->cur = *next;
	kr->rotating = true;
	kr->seen = 0;
	kr->switched_ms = -1;
	kr->rotations++;
	log_notice("The %s file %s was replaced: packets now go out under both the old and the new "
	           "key until the other side is seen using the new one.",
	           kr->what, kr->path);
}

static void end_grace(struct keyring *kr, int64_t now_ms)
{
	if (!kr->rotating || kr->switched_ms < 0 || now_ms - kr->switched_ms < KEYRING_GRACE_MS)
		return;
	OPENSSL_cleanse(&kr->old, sizeof(kr->old));
	kr->rotating = false;
	log_notice("The %s rotation is complete: the old key from before %s was replaced is no "
	           "longer accepted.",
	           kr->what, kr->path);
}

int keyring_refresh(struct keyring *kr, int64_t now_ms)
{
	struct file_stamp st;
	struct key_bytes *k = NULL;
	char err[300] = "";
	int rc = 0;

	end_grace(kr, now_ms);
	if (!kr->path[0] || now_ms < kr->next_check_ms)
		return 0;
	kr->next_check_ms = now_ms + KEYRING_CHECK_MS;
	if (keyfile_stamp(kr->path, &st) < 0 || file_stamp_same(&st, &kr->stamp))
		return 0;
	kr->stamp = st; /* a bad file is reported once, not at every check */
	k = calloc(1, sizeof(*k));
	if (!k || keyfile_load(kr->path, kr->what, k, err, sizeof(err)) < 0) {
		log_warn("%s The %s in use stays.", k ? err : "Out of memory reading a key file.",
		         kr->what);
		rc = -1;
	} else if (!same_key(k, &kr->cur)) {
		rotate(kr, k);
		rc = 1;
	}
	if (k)
		OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return rc;
}

unsigned keyring_send_keys(const struct keyring *kr, const struct key_bytes *out[2])
{
	if (kr->rotating && kr->switched_ms < 0) {
		out[0] = &kr->old;
		out[1] = &kr->cur;
		return 2;
	}
	out[0] = &kr->cur;
	return 1;
}

unsigned keyring_recv_keys(const struct keyring *kr, const struct key_bytes *out[2])
{
	out[0] = &kr->cur;
	if (!kr->rotating)
		return 1;
	out[1] = &kr->old;
	return 2;
}

void keyring_seen(struct keyring *kr, unsigned idx, unsigned side, int64_t now_ms)
{
	if (!kr->rotating || idx != 0 || kr->switched_ms >= 0)
		return;
	kr->seen |= side & kr->need;
	if (kr->seen != kr->need)
		return;
	kr->switched_ms = now_ms;
	log_notice("The other side uses the new %s: packets go out under it alone; the old one is "
	           "accepted for %d s more.",
	           kr->what, KEYRING_GRACE_MS / 1000);
}

const char *keyring_state(const struct keyring *kr)
{
	return !kr->rotating ? "none" : kr->switched_ms < 0 ? "waiting" : "grace";
}

void keyring_clear(struct keyring *kr)
{
	OPENSSL_cleanse(&kr->cur, sizeof(kr->cur));
	OPENSSL_cleanse(&kr->old, sizeof(kr->old));
	kr->rotating = false;
}
