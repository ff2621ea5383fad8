#include "config.h"

#include <string.h>

#include "vd_omsruns.h"

const vd_oms_run *vd_omskeys_run(const vd_omskeys *k, const char *run)
{
	size_t i;

	for (i = 0; k != NULL && i < k->n; i++)
		if (strcmp(k->runs[i].run, run) == 0)
			return &k->runs[i];
	return NULL;
}

const char *vd_omskeys_digest(const vd_omskeys *k, const char *run)
{
	const vd_oms_run *r = vd_omskeys_run(k, run);

	return r != NULL ? r->digest : "";
}

void vd_omskeys_signers(const vd_oms_run *r, vd_oms_signers *out)
{
	memset(out, 0, sizeof(*out));
	if (r == NULL)
		return;
	out->keys = r->keys;
	out->n_keys = r->n_keys;
	out->cas = r->cas;
	out->n_cas = r->n_cas;
}
