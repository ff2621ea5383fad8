#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_scanned.h"

const char *vd_kind_name(vd_artifact_kind k)
{
	return k == VD_KIND_TAR ? "tar" : "dir";
}

void vd_hdrinfo_free(vd_hdrinfo *h)
{
	size_t i;

	free(h->wmcp_version);
	free(h->config_hash);
	free(h->created_at);
	for (i = 0; i < h->n_param_groups; i++)
		free(h->param_groups[i]);
	free(h->param_groups);
	memset(h, 0, sizeof(*h));
}

int vd_fingerprint_eq(const vd_fingerprint *a, const vd_fingerprint *b)
{
	return a->ok && b->ok && memcmp(a->digest, b->digest, sizeof(a->digest)) == 0;
}

void vd_scan_ledger_free(vd_scan_ledger *l)
{
	free(l->relpath);
	free(l->run);
	free(l->entries);
	memset(l, 0, sizeof(*l));
}
