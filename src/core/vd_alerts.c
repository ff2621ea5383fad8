#include "config.h"

#include "vd_alerts.h"

const char *vd_alert_name(vd_alert_kind k)
{
	static const char *const names[VD_ALERT_COUNT] = {
		"artifact_failed", "commitment_mismatch", "ledger_broken", "fork",
		"equivocation", "chain_broken", "ledger_rewritten", "oms_mismatch",
	};

	return k < VD_ALERT_COUNT ? names[k] : "unknown";
}
