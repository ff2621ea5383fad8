/*
 * The parts of GET /events that need no connection: reading the
 * Last-Event-ID a client sends, the frame of an event, and where a
 * resumed stream starts (and whether it must be told events were lost).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_events.h"

static void test_parse_id(void **state)
{
	(void)state;
	uint64_t id = 7;

	assert_int_equal(vd_events_parse_id("0", &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(vd_events_parse_id("42", &id), 0);
	assert_int_equal(id, 42);
	assert_int_equal(vd_events_parse_id("007", &id), 0);
	assert_int_equal(id, 7);
	assert_int_equal(vd_events_parse_id("18446744073709551615", &id), 0);
	assert_true(id == UINT64_MAX);
	/* Nothing but decimal digits, and nothing that overflows. */
	id = 5;
	assert_int_equal(vd_events_parse_id("18446744073709551616", &id), -1);
	assert_int_equal(vd_events_parse_id("99999999999999999999999", &id), -1);
	assert_int_equal(vd_events_parse_id("", &id), -1);
	assert_int_equal(vd_events_parse_id(NULL, &id), -1);
	assert_int_equal(vd_events_parse_id("-1", &id), -1);
	assert_int_equal(vd_events_parse_id("+1", &id), -1);
	assert_int_equal(vd_events_parse_id(" 1", &id), -1);
	assert_int_equal(vd_events_parse_id("1 ", &id), -1);
	assert_int_equal(vd_events_parse_id("0x10", &id), -1);
	assert_int_equal(vd_events_parse_id("1e3", &id), -1);
	assert_int_equal(vd_events_parse_id("abc", &id), -1);
	assert_true(id == 5);      /* untouched by a refusal */
}

static void test_frame(void **state)
{
	(void)state;
	vd_buf b;

	vd_buf_init(&b);
	assert_int_equal(vd_events_frame(&b, 12, "verdict", "{\"state\":\"verified\"}"), 0);
	assert_int_equal(vd_events_frame(&b, 13, "head", "{}"), 0);
	vd_buf_putc(&b, '\0');
	assert_string_equal((const char *)b.p,
	    "id: 12\nevent: verdict\ndata: {\"state\":\"verified\"}\n\n"
	    "id: 13\nevent: head\ndata: {}\n\n");
	/* A line break in the data would end the field and forge another. */
	b.len = 0;
	assert_int_equal(vd_events_frame(&b, 1, "alert", "{\"detail\":\"a\nid: 99\"}"), -1);
	assert_int_equal(vd_events_frame(&b, 1, "alert", "a\rb"), -1);
	assert_int_equal(vd_events_frame(&b, 1, "al\nert", "{}"), -1);
	assert_int_equal(b.len, 0);
	vd_buf_free(&b);
}

static void test_resume_point(void **state)
{
	(void)state;
	int lost = -1;

	/* Within the history: from the next one, nothing lost. */
	assert_int_equal(vd_events_resume_point(95, 100, 10, &lost), 95);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(90, 100, 10, &lost), 90);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(100, 100, 10, &lost), 100);
	assert_int_equal(lost, 0);
	/* Older than the history: what remains, and a loss. */
	assert_int_equal(vd_events_resume_point(89, 100, 10, &lost), 90);
	assert_int_equal(lost, 1);
	assert_int_equal(vd_events_resume_point(0, 100, 10, &lost), 90);
	assert_int_equal(lost, 1);
	/* Everything is still there: from the start, nothing lost. */
	assert_int_equal(vd_events_resume_point(0, 5, 10, &lost), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(0, 0, 10, &lost), 0);
	assert_int_equal(lost, 0);
	/* No history kept: only the future, anything earlier lost. */
	assert_int_equal(vd_events_resume_point(99, 100, 0, &lost), 100);
	assert_int_equal(lost, 1);
	assert_int_equal(vd_events_resume_point(100, 100, 0, &lost), 100);
	assert_int_equal(lost, 0);
	/* An id never published (the state was reset): from now, a loss. */
	assert_int_equal(vd_events_resume_point(500, 100, 10, &lost), 100);
	assert_int_equal(lost, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_id),
		cmocka_unit_test(test_frame),
		cmocka_unit_test(test_resume_point),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
