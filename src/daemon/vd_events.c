#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <uv.h>

#include "vd_events.h"
#include "vd_utf8.h"
#include "vd_http.h"
#include "vd_log.h"
#include "vd_state.h"

#define JSON_OUT (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define COMMIT_KEY_MAX (VD_RUN_MAX + 48)

/* A frame in the ring; start counts the frame bytes published before it,
 * so that a stream's lag is a subtraction. */
typedef struct ring_ent {
	uint64_t id, start;
	char *frame;
	size_t len;
} ring_ent;

/* Frames read from the database for a stream resuming from far back. */
typedef struct page {
	vd_buf text;
	size_t end[VD_EVENTS_PAGE];
	uint64_t id[VD_EVENTS_PAGE];
	size_t count, next, off;     /* frames, the next to finish, bytes taken */
} page;

typedef struct stream {
	struct stream *next, **prevp;
	vd_events *ev;
	vd_req *req;
	uint64_t cursor;             /* the last event taken whole */
	size_t partial;              /* bytes taken of the ring frame after it */
	page pg;
	char note[VD_EVENTS_NOTE_MAX];  /* a lost event, sent before the next frame */
	size_t note_len, note_off;
	int live;                    /* within VD_EVENTS_STREAM_BUFFER of the newest */
	uint64_t last_write_ms;      /* loop time its last bytes went out */
	int keepalive_due;
	int dead;                    /* cut: waiting for its connection to close */
} stream;

/* What was last announced for a run's head; cand is this refresh's. */
typedef struct head_seen {
	int64_t round, cand_round;   /* -1: none */
	char hash[VD_HASH_HEX_LEN + 1], cand_hash[VD_HASH_HEX_LEN + 1];
	unsigned gen;
} head_seen;

/* A commitment that counted at the refresh numbered gen; its map key
 * follows it in the same allocation (the first refresh after a scan
 * records one per slot and source: 16,000 and more). */
typedef struct commit_seen {
	char hash[VD_HASH_HEX_LEN + 1];
	unsigned gen;
	char key[];
} commit_seen;

struct vd_events {
	uv_timer_t keepalive;
	vd_state *state;
	unsigned history, max_streams, keepalive_s;
	uint64_t keepalive_ms, tick_ms;
	uint64_t last_id;            /* the newest event's id; 0: none yet */
	uint64_t bytes;              /* frame bytes published (ring offsets) */
	uint64_t db_first;           /* the oldest id in the database */
	ring_ent *ring;
	size_t ring_head, ring_n, ring_bytes;
	stream *streams;
	unsigned n_streams;
	vd_map heads;                /* run -> head_seen */
	vd_map commits;              /* "run\nround\nsource" -> commit_seen (its key) */
	unsigned head_gen, commit_gen;
	int primed;                  /* the first lineage after the first scan was seen */
	int primed_early;            /* by vd_events_prime, when the lineage's
	                              * slots_gen was slots_primed */
	uint64_t slots_primed;
	int closed, timer_open;
	uint64_t cut_logged_ms;
};

/* ---- pure parts -------------------------------------------------------- */

int vd_events_parse_id(const char *s, uint64_t *id)
{
	uint64_t v = 0;
	size_t i;

	if (s == NULL || s[0] == '\0')
		return -EINVAL;
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*id = v;
	return 0;
}

int vd_events_frame(vd_buf *b, uint64_t id, const char *type, const char *data)
{
	if (strpbrk(data, "\r\n") != NULL || strpbrk(type, "\r\n") != NULL)
		return -EINVAL;
	vd_buf_printf(b, "id: %" PRIu64 "\nevent: %s\ndata: %s\n\n", id, type, data);
	return b->oom ? -ENOMEM : 0;
}

uint64_t vd_events_resume_point(uint64_t after, uint64_t newest, uint64_t history, int *lost)
{
	uint64_t oldest = newest >= history ? newest - history + 1 : 1;

	*lost = 0;
	if (after > newest) {
		*lost = 1;          /* never published: the history was reset */
		return newest;
	}
	if (after + 1 < oldest) {
		*lost = 1;
		return oldest - 1;
	}
	return after;
}

/* ---- the ring ---------------------------------------------------------- */

static ring_ent *ring_at(vd_events *ev, size_t i)
{
	return &ev->ring[(ev->ring_head + i) % VD_EVENTS_RING_MAX];
}

static ring_ent *ring_get(vd_events *ev, uint64_t id)
{
	uint64_t first;

	if (ev->ring_n == 0)
		return NULL;
	first = ring_at(ev, 0)->id;
	if (id < first || id > ev->last_id)
		return NULL;
	return ring_at(ev, (size_t)(id - first));
}

static void ring_drop_oldest(vd_events *ev)
{
	ring_ent *e = ring_at(ev, 0);

	ev->ring_bytes -= e->len;
	free(e->frame);
	e->frame = NULL;
	ev->ring_head = (ev->ring_head + 1) % VD_EVENTS_RING_MAX;
	ev->ring_n--;
}

/* Takes the frame. */
static void ring_push(vd_events *ev, uint64_t id, char *frame, size_t len)
{
	ring_ent *e;

	while (ev->ring_n > 0 && (ev->ring_n == VD_EVENTS_RING_MAX ||
	    ev->ring_bytes + len > VD_EVENTS_RING_BYTES))
		ring_drop_oldest(ev);
	e = ring_at(ev, ev->ring_n++);
	e->id = id;
	e->start = ev->bytes;
	e->frame = frame;
	e->len = len;
	ev->ring_bytes += len;
	ev->bytes += len;
}

/* ---- streams ----------------------------------------------------------- */

/* Bytes published that s has not taken; UINT64_MAX when what it needs
 * next has left the ring. */
static uint64_t lag(vd_events *ev, const stream *s)
{
	const ring_ent *e;

	if (s->cursor >= ev->last_id)
		return 0;
	if ((e = ring_get(ev, s->cursor + 1)) == NULL)
		return UINT64_MAX;
	return ev->bytes - (e->start + s->partial);
}

static void maybe_free(vd_events *ev)
{
	size_t i;
	const char *k;
	void *v;

	if (!ev->closed || ev->timer_open || ev->n_streams > 0)
		return;
	while (ev->ring_n > 0)
		ring_drop_oldest(ev);
	free(ev->ring);
	for (i = 0; vd_map_next(&ev->heads, &i, &k, &v); )
		free(v);
	vd_map_free(&ev->heads);
	for (i = 0; vd_map_next(&ev->commits, &i, &k, &v); )
		free(v);
	vd_map_free(&ev->commits);
	free(ev);
}

static void cut(vd_events *ev, stream *s)
{
	uint64_t now = uv_now(ev->keepalive.loop);

	s->dead = 1;
	/* One line now and then: a burst can cut many streams at once. */
	if (ev->cut_logged_ms == 0 || now - ev->cut_logged_ms >= VD_EVENTS_CUT_LOG_MS) {
		ev->cut_logged_ms = now;
		log_info("GET /events: a client fell more than %u KiB behind; its stream is closed (it may resume with Last-Event-ID)",
		    VD_EVENTS_STREAM_BUFFER >> 10);
	}
	vd_http_stream_cut(s->req);
}

/* After a publish: each stream waiting is woken; one too far behind is cut. */
static void notify(vd_events *ev)
{
	stream *s;

	for (s = ev->streams; s != NULL; s = s->next) {
		if (s->dead)
			continue;
		if (s->live && lag(ev, s) > VD_EVENTS_STREAM_BUFFER)
			cut(ev, s);
		else
			vd_http_stream_wake(s->req);
	}
}

static size_t put(char *buf, size_t max, size_t *n, const char *src, size_t len)
{
	size_t k = len < max - *n ? len : max - *n;

	memcpy(buf + *n, src, k);
	*n += k;
	return k;
}

static void set_lost(stream *s, uint64_t after, uint64_t next)
{
	int n = snprintf(s->note, sizeof(s->note),
	    "event: lost\ndata: {\"last_event_id\":%" PRIu64 ",\"first_available_id\":%" PRIu64 "}\n\n",
	    after, next);

	s->note_len = n > 0 && (size_t)n < sizeof(s->note) ? (size_t)n : 0;
	s->note_off = 0;
}

static size_t page_frame_start(const page *p)
{
	return p->next > 0 ? p->end[p->next - 1] : 0;
}

/* Halfway through a frame or a note: it must be finished before anything
 * else is sent, and before a stream ends. */
static int mid_frame(const stream *s)
{
	return s->note_off > 0 || s->partial > 0 ||
	    (s->pg.next < s->pg.count && s->pg.off > page_frame_start(&s->pg));
}

static void page_row(uint64_t id, const char *type, const char *data, void *arg)
{
	page *p = arg;

	if (p->count == VD_EVENTS_PAGE || type == NULL || data == NULL ||
	    vd_events_frame(&p->text, id, type, data) < 0)
		return;
	p->id[p->count] = id;
	p->end[p->count++] = p->text.len;
}

/* The next frames of a stream behind the ring, from the database. Events
 * neither there nor in the ring (trimmed meanwhile, or never stored) are
 * skipped with a lost event. */
static void load_page(vd_events *ev, stream *s)
{
	page *p = &s->pg;
	uint64_t next;

	p->text.len = 0;
	p->count = p->next = p->off = 0;
	if (ev->state != NULL)
		vd_state_load_events(ev->state, s->cursor, VD_EVENTS_PAGE, page_row, p);
	if (p->count > 0 && p->id[0] == s->cursor + 1)
		return;
	next = p->count > 0 ? p->id[0] : ev->ring_n > 0 ? ring_at(ev, 0)->id : ev->last_id + 1;
	set_lost(s, s->cursor, next);
	if (p->count == 0)
		s->cursor = next - 1;
}

static void take_page_frame(stream *s, char *buf, size_t max, size_t *n)
{
	page *p = &s->pg;
	size_t end = p->end[p->next];

	p->off += put(buf, max, n, (const char *)p->text.p + p->off, end - p->off);
	if (p->off == end)
		s->cursor = p->id[p->next++];
}

static void take_ring_frame(stream *s, const ring_ent *e, char *buf, size_t max, size_t *n)
{
	s->partial += put(buf, max, n, e->frame + s->partial, e->len - s->partial);
	if (s->partial == e->len) {
		s->cursor = e->id;
		s->partial = 0;
	}
}

/* libmicrohttpd wants up to max bytes: notes, then frames, each source
 * in turn, until the buffer is full or nothing is left. */
static ssize_t stream_fill(void *arg, char *buf, size_t max, int ending)
{
	stream *s = arg;
	vd_events *ev = s->ev;
	const ring_ent *e;
	size_t n = 0;

	if (s->dead)
		return -ECONNABORTED;
	while (n < max && (!ending || mid_frame(s))) {
		if (s->note_len > 0) {
			s->note_off += put(buf, max, &n, s->note + s->note_off, s->note_len - s->note_off);
			if (s->note_off == s->note_len)
				s->note_len = s->note_off = 0;
		} else if (s->pg.next < s->pg.count) {
			take_page_frame(s, buf, max, &n);
		} else if (s->cursor >= ev->last_id) {
			break;
		} else if ((e = ring_get(ev, s->cursor + 1)) != NULL) {
			take_ring_frame(s, e, buf, max, &n);
		} else if (s->partial > 0) {
			/* The frame half sent left the ring: its rest would be
			 * spliced onto another. The client resumes from its last
			 * whole event. */
			s->dead = 1;
			return -ECONNABORTED;
		} else {
			load_page(ev, s);
		}
	}
	if (n == 0 && !ending && s->keepalive_due && max >= sizeof(VD_EVENTS_KEEPALIVE) - 1)
		put(buf, max, &n, VD_EVENTS_KEEPALIVE, sizeof(VD_EVENTS_KEEPALIVE) - 1);
	if (n > 0) {
		s->last_write_ms = uv_now(ev->keepalive.loop);
		s->keepalive_due = 0;
	}
	if (!s->live && s->pg.next == s->pg.count && lag(ev, s) <= VD_EVENTS_STREAM_BUFFER)
		s->live = 1;
	return (ssize_t)n;
}

/* The client went away (or the stream was cut, or the server stopped). */
static void stream_gone(vd_req *r)
{
	stream *s = r->handler_state;
	vd_events *ev = s->ev;

	*s->prevp = s->next;
	if (s->next)
		s->next->prevp = s->prevp;
	ev->n_streams--;
	vd_buf_free(&s->pg.text);
	free(s);
	r->handler_state = NULL;
	maybe_free(ev);
}

int vd_events_open(vd_events *ev, vd_req *r, int resume, uint64_t after)
{
	stream *s;
	int lost = 0, rc;

	if (ev == NULL || ev->closed)
		return -ESHUTDOWN;
	if (ev->n_streams >= ev->max_streams)
		return -EAGAIN;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->ev = ev;
	s->req = r;
	s->last_write_ms = uv_now(ev->keepalive.loop);   /* the headers */
	vd_buf_init(&s->pg.text);
	s->cursor = resume ? vd_events_resume_point(after, ev->last_id, ev->history, &lost) :
	    ev->last_id;
	if (lost)
		set_lost(s, after, s->cursor + 1);
	s->live = lag(ev, s) <= VD_EVENTS_STREAM_BUFFER;
	if ((rc = vd_http_stream(r, "text/event-stream", stream_fill, s)) < 0) {
		free(s);
		return rc;
	}
	s->next = ev->streams;
	if (ev->streams)
		ev->streams->prevp = &s->next;
	ev->streams = s;
	s->prevp = &ev->streams;
	ev->n_streams++;
	r->handler_state = s;
	r->cancel = stream_gone;
	return 0;
}

/* A stream that would be silent for longer than event_keepalive by the
 * next tick gets a comment now: no stream stays silent longer than that
 * (and a loop turn), and one not due stays suspended. Its client may have
 * left meanwhile: a waiting stream is not polled, and a first write to a
 * closed connection still succeeds, so each stream due is asked first
 * (one recv), and one whose client left is closed now. */
static void on_keepalive(uv_timer_t *t)
{
	vd_events *ev = t->data;
	uint64_t now = uv_now(t->loop);
	stream *s;

	for (s = ev->streams; s != NULL; s = s->next) {
		if (s->dead || now - s->last_write_ms + ev->tick_ms <= ev->keepalive_ms)
			continue;
		if (vd_http_stream_gone(s->req)) {
			s->dead = 1;
			vd_http_stream_cut(s->req);
			continue;
		}
		s->keepalive_due = 1;
		vd_http_stream_wake(s->req);
	}
}

/* ---- publishing -------------------------------------------------------- */

/* The database keeps event_history events (at least the newest, so that
 * ids go on increasing after a restart), trimmed a batch at a time. */
static void store_event(vd_events *ev, uint64_t id, const char *type, const char *data)
{
	uint64_t keep = ev->history > 0 ? ev->history : 1;

	if (ev->state == NULL || vd_state_put_event(ev->state, id, type, data) < 0)
		return;
	if (ev->db_first == 0 || ev->db_first > id)
		ev->db_first = id;
	if (id - ev->db_first + 1 >= keep + VD_EVENTS_TRIM_BATCH &&
	    vd_state_trim_events(ev->state, id - keep) == 0)
		ev->db_first = id - keep + 1;
}

static void publish(vd_events *ev, const char *type, json_object *o)
{
	const char *data = json_object_to_json_string_ext(o, JSON_OUT);
	uint64_t id = ev->last_id + 1;
	vd_buf b;

	vd_buf_init(&b);
	if (vd_events_frame(&b, id, type, data) < 0) {
		log_error("GET /events: cannot format a %s event (out of memory); it is not sent", type);
		vd_buf_free(&b);
		json_object_put(o);
		return;
	}
	ev->last_id = id;
	store_event(ev, id, type, data);
	ring_push(ev, id, (char *)b.p, b.len);
	json_object_put(o);
	notify(ev);
}

static json_object *jstr(const char *s)
{
	return s != NULL ? json_object_new_string(s) : NULL;
}

/* A path, run or sentence from the store: bytes that are not UTF-8 are
 * replaced, so that every frame is JSON a strict client decodes. */
static json_object *text(const char *s)
{
	json_object *o;
	char *copy;

	if (vd_utf8_valid((const uint8_t *)s, strlen(s)) || (copy = strdup(s)) == NULL)
		return json_object_new_string(s);
	vd_utf8_sanitize(copy);
	o = json_object_new_string(copy);
	free(copy);
	return o;
}

void vd_events_verdict(vd_events *ev, const vd_copy *c)
{
	json_object *o;

	if (ev == NULL || ev->closed)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "content_hash", jstr(c->hdr.code == VD_OK ? c->hdr.content_hash : NULL));
	json_object_object_add(o, "path", text(c->relpath));
	json_object_object_add(o, "state", json_object_new_string(vd_astate_name(vd_copy_settled(c))));
	json_object_object_add(o, "code", jstr(c->code != VD_OK ? vd_code_name(c->code) : NULL));
	publish(ev, "verdict", o);
}

void vd_events_alert(vd_events *ev, const char *kind, const char *subject,
    const char *detail, int raised)
{
	json_object *o;

	if (ev == NULL || ev->closed)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "state", json_object_new_string(raised ? "raised" : "cleared"));
	json_object_object_add(o, "subject", text(subject));
	json_object_object_add(o, "detail", text(detail));
	publish(ev, "alert", o);
}

static void publish_head(vd_events *ev, const char *run, int64_t round, const char *hash)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "run", text(vd_run_name(run)));
	json_object_object_add(o, "round_index", json_object_new_int64(round));
	json_object_object_add(o, "content_hash", json_object_new_string(hash));
	publish(ev, "head", o);
}

/* ---- heads and commitments after a refresh ------------------------------ */

static head_seen *head_of(vd_events *ev, const char *run)
{
	head_seen *h = vd_map_get(&ev->heads, run);

	if (h != NULL)
		return h;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->round = h->cand_round = -1;
	if (vd_map_put(&ev->heads, run, h) < 0) {
		free(h);
		return NULL;
	}
	return h;
}

/* A run's committed head: its trusted artifact of the highest round (the
 * lowest hash among equals, as for the store's committed head). Trusted
 * by its settled verdict: a re-check under way is no change of head, as
 * it is none for the alerts. */
static int head_worthy(const vd_group *g)
{
	return vd_trust_reason(g, vd_group_settled(g)) == NULL;
}

/* g as a candidate for the head of each run it is in; this refresh's
 * candidate starts from none (a whole look) or from the head announced. */
static void offer(vd_events *ev, const vd_group *g, int whole)
{
	head_seen *h;
	size_t i;

	for (i = 0; i < g->n; i++) {
		if ((h = head_of(ev, g->copies[i]->run)) == NULL)
			continue;
		if (h->gen != ev->head_gen) {
			h->gen = ev->head_gen;
			h->cand_round = whole ? -1 : h->round;
			memcpy(h->cand_hash, whole ? "" : h->hash, whole ? 1 : sizeof(h->cand_hash));
		}
		if (g->round_index > h->cand_round ||
		    (g->round_index == h->cand_round && strcmp(g->hash, h->cand_hash) < 0)) {
			h->cand_round = g->round_index;
			memcpy(h->cand_hash, g->hash, sizeof(h->cand_hash));
		}
	}
}

/* Between whole passes a head moves forward with the groups the refresh
 * recomputed; it moves back (a whole look) only when a head announced is
 * gone or no longer trusted: O(runs + groups recomputed). */
static int heads_hold(vd_events *ev, const vd_model *m)
{
	const char *k;
	void *v;
	size_t it = 0;
	const vd_group *g;

	while (vd_map_next(&ev->heads, &it, &k, &v)) {
		const head_seen *h = v;
		if (h->round >= 0 && ((g = vd_model_group(m, h->hash)) == NULL || !head_worthy(g) ||
		    !vd_group_in_run(g, k)))
			return 0;
	}
	return 1;
}

static void heads_update(vd_events *ev, const vd_lineage_delta *d, const vd_model *m)
{
	int whole = d->whole || !ev->primed || !heads_hold(ev, m);
	const vd_group *g;
	const char *k;
	void *v;
	size_t it = 0, i;

	ev->head_gen++;
	if (whole) {
		while ((g = vd_model_next_group(m, &it)) != NULL)
			if (head_worthy(g))
				offer(ev, g, 1);
	} else {
		for (i = 0; i < d->n_touched; i++)
			if (head_worthy(d->touched[i]))
				offer(ev, d->touched[i], 0);
	}
	it = 0;
	while (vd_map_next(&ev->heads, &it, &k, &v)) {
		head_seen *h = v;
		if (h->gen != ev->head_gen) {
			/* No head now: forgotten, so that the map holds the runs
			 * that have one, and the next one is news. */
			if (whole)
				free(vd_map_del(&ev->heads, k));
			continue;
		}
		if (h->round == h->cand_round && strcmp(h->hash, h->cand_hash) == 0)
			continue;
		h->round = h->cand_round;
		memcpy(h->hash, h->cand_hash, sizeof(h->hash));
		publish_head(ev, k, h->round, h->hash);
	}
}

typedef struct new_commit {
	const vd_commit_slot *sl;
	int src;
} new_commit;

static int new_commit_cmp(const void *a, const void *b)
{
	const new_commit *x = a, *y = b;
	int c = strcmp(x->sl->run, y->sl->run);

	if (c != 0)
		return c;
	if (x->sl->round_index != y->sl->round_index)
		return x->sl->round_index < y->sl->round_index ? -1 : 1;
	return x->src - y->src;
}

/* "run\nround\n": a slot's key, written without snprintf (one per slot
 * at every refresh of the commitments); its length, to which each
 * source appends its digit and NUL (commit_key_src). Truncated like
 * snprintf. */
static size_t commit_key(char *key, size_t max, const char *run, int64_t round)
{
	size_t len = strlen(run);

	if (len + VD_I64_DIGITS_MAX + 4 > max) {
		snprintf(key, max - 2, "%s\n%" PRId64 "\n", run, round);
		return strlen(key);
	}
	memcpy(key, run, len);
	key[len++] = '\n';
	len += vd_i64_digits(key + len, round);
	key[len++] = '\n';
	key[len] = '\0';
	return len;
}

/* The slot's key with the source's: src is below VD_SRC_COUNT (< 10). */
static const char *commit_key_src(char *key, size_t len, int src)
{
	key[len] = (char)('0' + src);
	key[len + 1] = '\0';
	return key;
}

static commit_seen *commit_new(vd_events *ev, const char *key)
{
	size_t n = strlen(key) + 1;
	commit_seen *c = calloc(1, sizeof(*c) + n);

	if (c == NULL)
		return NULL;
	memcpy(c->key, key, n);
	if (vd_map_put(&ev->commits, c->key, c) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* Whether (slot, source) counts now and did not at the last refresh, or
 * named another hash; remembered either way. key holds the slot's key,
 * len long (commit_key). Into an empty map (the first refresh), each key
 * is new: one a slot and source, and the slots' keys are distinct. */
static int commit_is_new(vd_events *ev, const vd_commit_slot *sl, int src, char *key, size_t len,
    int empty)
{
	commit_seen *c = NULL;
	int fresh;

	commit_key_src(key, len, src);
	if ((empty || (c = vd_map_get(&ev->commits, key)) == NULL) &&
	    (c = commit_new(ev, key)) == NULL)
		return 0;
	fresh = c->gen + 1 != ev->commit_gen || strcmp(c->hash, sl->src[src].hash) != 0;
	c->gen = ev->commit_gen;
	memcpy(c->hash, sl->src[src].hash, sizeof(c->hash));
	return fresh;
}

static void publish_commit(vd_events *ev, const vd_commit_slot *sl, int src)
{
	const vd_commit_entry *e = &sl->src[src];
	json_object *o = json_object_new_object();

	/* The bare genesis pin applies to every run: shown as the root's. */
	json_object_object_add(o, "run", text(strcmp(sl->run, "*") == 0 ? "." :
	    vd_run_name(sl->run)));
	json_object_object_add(o, "round_index", sl->round_index < 0 ? NULL :
	    json_object_new_int64(sl->round_index));
	json_object_object_add(o, "content_hash", json_object_new_string(e->hash));
	json_object_object_add(o, "source", json_object_new_string(
	    vd_commit_source_name((vd_commit_source)src)));
	json_object_object_add(o, "key_id", e->is_signed ? json_object_new_string(e->key_id) : NULL);
	publish(ev, "commitment", o);
}

/* After the lineage rebuilt some slots alone (the others are as they
 * were, and as remembered at the current generation): those slots only,
 * the same news as commits_update would find. */
static void commits_rebuilt(vd_events *ev, const vd_lineage *l, const vd_config *cfg)
{
	int policy = vd_config_policy(cfg), src;
	new_commit *fresh = NULL, *grown;
	char key[COMMIT_KEY_MAX];
	const vd_commit_slot *sl;
	commit_seen *c;
	size_t n = 0, cap = 0, i, len;

	for (i = 0; i < l->n_only; i++) {
		if (l->only[i].run == NULL)
			continue;
		sl = vd_lineage_slot(l, l->only[i].run, l->only[i].round);
		len = commit_key(key, sizeof(key), l->only[i].run, l->only[i].round);
		for (src = 0; src < VD_SRC_COUNT; src++) {
			c = vd_map_get(&ev->commits, commit_key_src(key, len, src));
			if (sl == NULL || !vd_commit_counts(&sl->src[src], (vd_commit_source)src, policy)) {
				free(vd_map_del(&ev->commits, key));
				continue;
			}
			if (c != NULL && strcmp(c->hash, sl->src[src].hash) == 0)
				continue;
			if (c == NULL && (c = commit_new(ev, key)) == NULL)
				continue;
			c->gen = ev->commit_gen;
			memcpy(c->hash, sl->src[src].hash, sizeof(c->hash));
			if ((grown = vd_grow(fresh, &cap, n, sizeof(*fresh))) == NULL)
				continue;
			fresh = grown;
			fresh[n++] = (new_commit){ sl, src };
		}
	}
	if (n > 0)
		qsort(fresh, n, sizeof(*fresh), new_commit_cmp);
	for (i = 0; i < n; i++)
		publish_commit(ev, fresh[i].sl, fresh[i].src);
	free(fresh);
}

/* Announced in run and round order, whatever the order of the slots. */
static void commits_update(vd_events *ev, const vd_lineage *l, const vd_config *cfg, int announce)
{
	int policy = vd_config_policy(cfg), src;
	new_commit *fresh = NULL, *grown;
	char key[COMMIT_KEY_MAX];
	const vd_commit_slot *sl;
	size_t it = 0, n = 0, cap = 0, i, len;
	const char *k;
	void *v;
	int empty = ev->commits.count == 0;

	ev->commit_gen++;
	/* Out of memory, the map grows as it goes. */
	if (empty)
		(void)vd_map_reserve(&ev->commits, vd_lineage_slot_count(l));
	while ((sl = vd_lineage_next_slot(l, &it)) != NULL) {
		len = 0;
		for (src = 0; src < VD_SRC_COUNT; src++) {
			if (!vd_commit_counts(&sl->src[src], (vd_commit_source)src, policy))
				continue;
			if (len == 0)
				len = commit_key(key, sizeof(key), sl->run, sl->round_index);
			if (!commit_is_new(ev, sl, src, key, len, empty) || !announce)
				continue;
			if ((grown = vd_grow(fresh, &cap, n, sizeof(*fresh))) == NULL)
				continue;
			fresh = grown;
			fresh[n++] = (new_commit){ sl, src };
		}
	}
	/* What no longer counts (a ledger rewritten or forgotten, a run
	 * gone) is forgotten: it is news if it counts again. */
	it = 0;
	while (vd_map_next(&ev->commits, &it, &k, &v))
		if (((commit_seen *)v)->gen != ev->commit_gen)
			free(vd_map_del(&ev->commits, k));
	if (n > 0)
		qsort(fresh, n, sizeof(*fresh), new_commit_cmp);
	for (i = 0; i < n; i++)
		publish_commit(ev, fresh[i].sl, fresh[i].src);
	free(fresh);
}

void vd_events_lineage(vd_events *ev, const vd_lineage *l, const vd_lineage_delta *d,
    const vd_model *m, const vd_config *cfg, int commits, int ready)
{
	if (ev == NULL || ev->closed || !ready)
		return;
	if (ev->primed_early && ev->slots_primed == l->slots_gen)
		;       /* recorded as they are (vd_events_prime) */
	else if (commits && ev->primed && l->commits_in_place)
		commits_rebuilt(ev, l, cfg);
	else if (commits || !ev->primed)
		commits_update(ev, l, cfg, ev->primed);
	ev->primed_early = 0;
	heads_update(ev, d, m);
	ev->primed = 1;
}

int vd_events_prime(vd_events *ev, const vd_lineage *l, const vd_config *cfg, int ready)
{
	if (ev == NULL || ev->closed || !ready || ev->primed)
		return 0;
	commits_update(ev, l, cfg, 0);
	ev->primed_early = 1;
	ev->slots_primed = l->slots_gen;
	ev->primed = 1;
	return 1;
}

void vd_events_tracked(const vd_events *ev, size_t *heads, size_t *commits)
{
	*heads = ev != NULL ? ev->heads.count : 0;
	*commits = ev != NULL ? ev->commits.count : 0;
}

/* ---- life cycle -------------------------------------------------------- */

/* The heads last announced, from the history: a restart announces only
 * heads that changed meanwhile. */
static void seed_head(uint64_t id, const char *type, const char *data, void *arg)
{
	vd_events *ev = arg;
	json_object *o, *run, *round, *hash;
	head_seen *h;

	(void)id;
	if (type == NULL || data == NULL || strcmp(type, "head") != 0 ||
	    (o = json_tokener_parse(data)) == NULL)
		return;
	if (json_object_object_get_ex(o, "run", &run) && json_object_object_get_ex(o, "round_index", &round) &&
	    json_object_object_get_ex(o, "content_hash", &hash) &&
	    vd_is_hex64((vd_str){ json_object_get_string(hash), strlen(json_object_get_string(hash)) }) &&
	    (h = head_of(ev, strcmp(json_object_get_string(run), ".") == 0 ? "" :
	    json_object_get_string(run))) != NULL) {
		h->round = json_object_get_int64(round);
		memcpy(h->hash, json_object_get_string(hash), sizeof(h->hash));
	}
	json_object_put(o);
}

static void load_history(vd_events *ev)
{
	uint64_t first, last, from;

	if (ev->state == NULL || vd_state_event_range(ev->state, &first, &last) < 0)
		return;
	ev->last_id = last;
	ev->db_first = first;
	from = last > ev->history ? last - ev->history : 0;
	vd_state_load_events(ev->state, from, ev->history, seed_head, ev);
	if (last > 0)
		log_info("GET /events: %" PRIu64 " events held, ids %" PRIu64 " to %" PRIu64,
		    last - first + 1, first, last);
}

vd_events *vd_events_new(uv_loop_t *loop, const vd_config *cfg, vd_state *st)
{
	vd_events *ev = calloc(1, sizeof(*ev));

	if (ev == NULL || (ev->ring = calloc(VD_EVENTS_RING_MAX, sizeof(*ev->ring))) == NULL) {
		free(ev);
		log_error("GET /events: out of memory; no events are published");
		return NULL;
	}
	ev->state = st;
	vd_map_init(&ev->heads);
	vd_map_init_borrowed(&ev->commits);
	uv_timer_init(loop, &ev->keepalive);
	ev->keepalive.data = ev;
	ev->timer_open = 1;
	vd_events_set_config(ev, cfg);
	load_history(ev);
	return ev;
}

/* The timer ticks VD_EVENTS_KEEPALIVE_TICKS times an interval: a stream
 * is due at most a tick before its silence reaches the interval. */
void vd_events_set_config(vd_events *ev, const vd_config *cfg)
{
	if (ev == NULL || ev->closed)
		return;
	ev->history = cfg->event_history;
	ev->max_streams = cfg->max_event_streams;
	if (ev->keepalive_s != cfg->event_keepalive) {
		ev->keepalive_s = cfg->event_keepalive;
		ev->keepalive_ms = (uint64_t)cfg->event_keepalive * 1000;
		ev->tick_ms = ev->keepalive_ms / VD_EVENTS_KEEPALIVE_TICKS;
		uv_timer_start(&ev->keepalive, on_keepalive, ev->tick_ms, ev->tick_ms);
	}
}

static void keepalive_closed(uv_handle_t *h)
{
	vd_events *ev = h->data;

	ev->timer_open = 0;
	maybe_free(ev);
}

void vd_events_close(vd_events *ev)
{
	if (ev == NULL || ev->closed)
		return;
	ev->closed = 1;
	uv_close((uv_handle_t *)&ev->keepalive, keepalive_closed);
}
