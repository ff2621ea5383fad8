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

#include "vd_api.h"

/* How many raised alerts GET /summary lists at most: the rest are counted
 * (GET /alerts?active=1 pages through them all). */
#define VD_SUMMARY_ALERTS_MAX 500

void vd_page_index(vd_api *api, vd_req *r);
void vd_page_css(vd_api *api, vd_req *r);
void vd_page_js(vd_api *api, vd_req *r);
void vd_page_icon(vd_api *api, vd_req *r);
void vd_page_summary(vd_api *api, vd_req *r);

#endif
