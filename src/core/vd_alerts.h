/*
 * The kinds of alert lineage raises, and the series of commitments it
 * counts: named here for the alerts' history, events, logs and /metrics.
 */
#ifndef VD_ALERTS_H
#define VD_ALERTS_H

typedef enum vd_alert_kind {
	VD_ALERT_ARTIFACT_FAILED,
	VD_ALERT_COMMITMENT_MISMATCH,
	VD_ALERT_LEDGER_BROKEN,
	VD_ALERT_FORK,
	VD_ALERT_EQUIVOCATION,
	VD_ALERT_CHAIN_BROKEN,
	VD_ALERT_LEDGER_REWRITTEN,
	VD_ALERT_OMS_MISMATCH,       /* a copy's model.sig disagrees with its files */
	VD_ALERT_COUNT
} vd_alert_kind;

const char *vd_alert_name(vd_alert_kind k);

/* The series of commitments{source,signed}. */
typedef enum vd_commit_series {
	VD_CS_SIGNED, VD_CS_LEDGER_SIGNED, VD_CS_LEDGER_UNSIGNED, VD_CS_ROUNDCLOSE,
	VD_CS_PINNED, VD_CS_OMS, VD_CS_COUNT
} vd_commit_series;

#endif
