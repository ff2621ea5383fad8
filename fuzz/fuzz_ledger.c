/*
 * ledger.jsonl: the input as a whole file for the chain verifier, and as a
 * single record line for the record parser. The verifier's counts must
 * agree with one another and with what it hands its callback.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_ledger.h"
#include "vd_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t calls, trusted, last_line;
	int untrusted;
};

static int hex64(const char *s)
{
	vd_str v = { s, strlen(s) };

	return vd_is_hex64(v);
}

static void check_record(const vd_ledger_record *r)
{
	if (r->schema_version != VD_LEDGER_SCHEMA || r->round_index < 0 ||
	    !hex64(r->global_model_hash) || !hex64(r->record_hash) ||
	    (r->has_prev ? !hex64(r->prev_record_hash) : r->prev_record_hash[0] != '\0'))
		abort();
}

static void on_record(const vd_ledger_record *rec, size_t line, int trusted,
    void *arg)
{
	struct seen *s = arg;

	check_record(rec);
	if (line <= s->last_line)
		abort();        /* lines come in order, each once */
	if (trusted && s->untrusted)
		abort();        /* trust, once lost, does not come back */
	s->untrusted |= !trusted;
	s->trusted += trusted != 0;
	s->last_line = line;
	s->calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vd_ledger_result res;
	vd_ledger_record rec;
	struct seen s = { 0 };
	size_t lines = 1, i;
	char why[160];

	for (i = 0; i < size; i++)
		lines += data[i] == '\n';

	vd_ledger_verify(data, size, on_record, &s, &res);
	if (res.trusted > res.records || s.calls > res.records ||
	    s.trusted != res.trusted || res.break_line > lines ||
	    memchr(res.break_detail, '\0', sizeof(res.break_detail)) == NULL)
		abort();
	if (res.brk == VD_LEDGER_INTACT) {
		if (res.break_line != 0 || res.trusted != res.records ||
		    s.calls != res.records)
			abort();
	} else if (res.break_line == 0 || res.break_detail[0] == '\0') {
		abort();
	}
	(void)vd_ledger_break_name(res.brk);

	memset(why, 0, sizeof(why));
	if (vd_ledger_parse_record(data, size, &rec, why, sizeof(why)) == 0)
		check_record(&rec);
	else if (why[0] == '\0')
		abort();        /* a refusal must say why */
	return 0;
}
