/*
 * Clients waiting for verdicts (POST /verify?wait=): vd_store_wait and
 * vd_store_wait_cancel (vd_store.h) register and drop them; the store
 * wakes them as jobs finish. The loop thread only.
 */
#ifndef VD_WAITERS_H
#define VD_WAITERS_H

#include "vd_store.h"

/* Answer every waiter whose copies reached their generation; hurry what
 * the others wait for. */
void vd_waiters_check(vd_store *s);
/* Shutting down: answer every waiter as timed out. */
void vd_waiters_fire_all(vd_store *s);

#endif
