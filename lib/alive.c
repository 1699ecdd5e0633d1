/* SPDX-License-Identifier: MIT */
#include "alive.h"

#include <pthread.h>
#include <stdio.h>

#include "clock.h"

static struct alive_slot slots[ALIVE_MAX_SLOTS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

struct alive_slot *alive_register(const char *name)
{
	struct alive_slot *s = NULL;

	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < ALIVE_MAX_SLOTS && !s; i++) {
		if (atomic_load(&slots[i].used))
			continue;
		s = &slots[i];
		snprintf(s->name, sizeof(s->name), "%s", name);
		atomic_store(&s->stamp_ms, clock_mono_ms());
		atomic_store(&s->used, 1);
	}
	pthread_mutex_unlock(&reg_lock);
	return s;
}

void alive_unregister(struct alive_slot *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&reg_lock);
	atomic_store(&s->used, 0);
	pthread_mutex_unlock(&reg_lock);
}

void alive_beat(struct alive_slot *s)
{
	if (s)
		atomic_store_explicit(&s->stamp_ms, clock_mono_ms(), memory_order_relaxed);
}

void alive_park(struct alive_slot *s)
{
	if (s)
		atomic_store_explicit(&s->stamp_ms, 0, memory_order_relaxed);
}

int alive_is_stale(int64_t stamp_ms, int64_t now_ms, int64_t limit_ms)
{
	return stamp_ms != 0 && now_ms - stamp_ms > limit_ms;
}

unsigned alive_check(int64_t now_ms, int64_t limit_ms, char *who, size_t wholen, int64_t *age_ms)
{
	unsigned stale = 0;

	/* No lock: a slot registered or given back meanwhile is seen in either state, and both
	 * are right for a check that runs again at the next tick. */
	for (unsigned i = 0; i < ALIVE_MAX_SLOTS; i++) {
		const struct alive_slot *s = &slots[i];
		int64_t stamp;
		if (!atomic_load_explicit(&s->used, memory_order_relaxed))
			continue;
		stamp = atomic_load_explicit(&s->stamp_ms, memory_order_relaxed);
		if (!alive_is_stale(stamp, now_ms, limit_ms))
			continue;
		if (stale++ == 0) {
			if (who && wholen)
				snprintf(who, wholen, "%s", s->name);
			if (age_ms)
				*age_ms = now_ms - stamp;
		}
	}
	return stale;
}
