/*
 * GET /events: what the daemon learns, as Server-Sent Events.
 *
 * A publish numbers the event, formats its frame once, keeps the frame in
 * a ring in memory and the event in the state database's history (in the
 * batched transaction: no fsync of its own), and wakes the streams waiting
 * for one: O(streams), and a stream still sending is not even woken. Each
 * stream takes frames from the ring (from the database when it resumes
 * from further back) at the pace its client reads them; a stream more than
 * VD_EVENTS_STREAM_BUFFER bytes behind the newest event is cut, and its
 * client can resume with Last-Event-ID. Runs on the loop thread.
 */
#ifndef VD_EVENTS_H
#define VD_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "vd_config.h"
#include "vd_limits.h"
#include "vd_lineage.h"
#include "vd_model.h"
#include "vd_util.h"

#define VD_EVENTS_KEEPALIVE ": keepalive\n\n"

typedef struct vd_events vd_events;
struct vd_req;
struct vd_state;
struct uv_loop_s;

/* The history continues from what st holds (st may be NULL: memory only).
 * NULL when out of memory. */
vd_events *vd_events_new(struct uv_loop_s *loop, const vd_config *cfg, struct vd_state *st);
void vd_events_set_config(vd_events *ev, const vd_config *cfg);
/* No more events; freed once its last stream is gone (vd_http_stop ends them). */
void vd_events_close(vd_events *ev);

/* Publishers; each does nothing when ev is NULL. A copy's verification
 * finished (state verified or failed). */
void vd_events_verdict(vd_events *ev, const vd_copy *c);
void vd_events_alert(vd_events *ev, const char *kind, const char *subject,
    const char *detail, int raised);
/* After a lineage refresh (d, what it changed): a head event for each run
 * whose committed head changed (among the groups the refresh recomputed,
 * or all of them after a whole pass), a commitment event for each commitment that now counts
 * and did not before (looked for when commits is set: the slots were
 * rebuilt).
 * Nothing before ready (the first complete scan): what the daemon finds
 * then is where it starts from. */
void vd_events_lineage(vd_events *ev, const vd_lineage *l, const vd_lineage_delta *d,
    const vd_model *m, const vd_config *cfg, int commits, int ready);
/* While the first whole lineage pass goes on in slices, its slots are
 * final: the commitments they hold are recorded (never announced: they
 * are where the daemon starts from) in a turn of their own, and the turn
 * that ends the pass records the heads only. 1 when it recorded them now;
 * 0 when there was nothing to do (not ready, or a lineage seen already). */
int vd_events_prime(vd_events *ev, const vd_lineage *l, const vd_config *cfg, int ready);

/* Answer r with a stream: the events after the one numbered after when
 * resume is set (as far as the history goes), else those from now on.
 * When no stream can be opened nothing was sent, and it returns -EAGAIN
 * (max_event_streams are open), -ESHUTDOWN (the daemon is stopping; ev
 * NULL too) or -ENOMEM. */
int vd_events_open(vd_events *ev, struct vd_req *r, int resume, uint64_t after);

/* Diagnostics: how many runs ev remembers a head for, and how many (run,
 * round, source) commitments that counted at the last rebuild of the
 * slots; neither outgrows what the last refresh saw. */
void vd_events_tracked(const vd_events *ev, size_t *heads, size_t *commits);

/* ---- pure parts -------------------------------------------------------- */

/* An event id as Last-Event-ID gives it: decimal digits, no sign, at most
 * a uint64_t. 0, or -EINVAL when malformed. */
int vd_events_parse_id(const char *s, uint64_t *id);
/* "id: ID\nevent: TYPE\ndata: DATA\n\n" appended to b: 0, -EINVAL when
 * type or data holds a line break (it would end the field), or -ENOMEM. */
int vd_events_frame(vd_buf *b, uint64_t id, const char *type, const char *data);
/* Where a stream resuming after the event numbered after starts, newest
 * being the last event published and history how many are kept: the id
 * of the last event it will not get. *lost is set when events it asked
 * for are gone (or after is an id never published). */
uint64_t vd_events_resume_point(uint64_t after, uint64_t newest, uint64_t history, int *lost);

#endif
