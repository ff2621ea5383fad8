/*
 * The status page: GET / (HTML), GET /status.css, /status.js and
 * /status.svg (its icon, which spares the browser a GET /favicon.ico), built
 * into the daemon from src/daemon/page/, and GET /summary, the little the page
 * needs that no other route says (version, policies, key ids, readiness,
 * the alerts raised now). The page itself reads /chain, /chain?run=,
 * /artifact/<hash> and /events like any client: read-only, no token.
 */
#ifndef VD_PAGE_H
#define VD_PAGE_H

#include "vd_config.h"
#include "vd_http.h"
#include "vd_keys.h"
#include "vd_lineage.h"

/* How many raised alerts GET /summary lists at most: the rest are counted
 * (GET /alerts?active=1 pages through them all). */
#define VD_SUMMARY_ALERTS_MAX 500

/* What GET /summary says of the daemon, gathered by the API. */
typedef struct vd_page_facts {
	const char *not_ready;         /* why the daemon is not ready, or NULL */
	const vd_config *cfg;
	const vd_key *signing_key;
	const vd_keyring *trusted;     /* NULL: none */
	const vd_lineage *lineage;     /* the alerts raised now */
	const char *retry_after;       /* seconds, with a 503 */
} vd_page_facts;

void vd_page_index(vd_req *r);
void vd_page_css(vd_req *r);
void vd_page_js(vd_req *r);
void vd_page_icon(vd_req *r);
void vd_page_summary(vd_req *r, const vd_page_facts *f);

#endif
