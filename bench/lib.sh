# shellcheck shell=bash
# Shared by the daemon and cold-cache benchmarks in this directory; sourced,
# not run. The caller sets `bench` (its name, for messages) before sourcing,
# and calls bench_init with the build directory.
#
# What lives here is what every benchmark must get right the same way:
# a scratch directory that is always removed, daemons and background loops
# that are always stopped (by the process ids started here, never by name),
# a daemon that may be started as root (it then insists on `user`), and
# medians computed one way.

# EPOCHREALTIME and printf follow the locale's decimal separator; awk must
# be able to read what they print.
export LC_ALL=C

die() {
	printf '%s: %s\n' "${bench:-bench}" "$*" >&2
	exit 1
}

warn() {
	printf '%s: warning: %s\n' "${bench:-bench}" "$*" >&2
}

# Wall-clock seconds with microseconds; EPOCHREALTIME saves a fork per
# sample, which matters when polling every few milliseconds.
if [[ -n ${EPOCHREALTIME:-} ]]; then
	now() { printf '%s\n' "$EPOCHREALTIME"; }
else
	now() { date +%s.%N; }
fi

elapsed() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR == 0) { print "nan"; exit }
		      if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2]
		      else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B: A / B to three places.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f\n", a / b; else print "inf" }'
}

# ---- cleanup ---------------------------------------------------------------

scratch=
bg_pids=()
daemon_pid=

# shellcheck disable=SC2317 # reached through the EXIT trap
bench_cleanup() {
	local p
	for p in "${bg_pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${bg_pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [[ -n $daemon_pid ]]; then
		stop_daemon || true
	fi
	if [[ -n $scratch && -d $scratch ]]; then
		rm -rf -- "$scratch"
	fi
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bench_init BUILD_DIR: check the tools, make the scratch directory.
bench_init() {
	local tool
	[[ -d $1 ]] || die "no build directory '$1' (pass it as an argument or in BUILD)"
	build=$(cd "$1" && pwd)
	cli=$build/lensemble-verify
	daemon=$build/lensemble-verifyd
	mk=$build/tools/vd-mkartifact
	for tool in "$cli" "$daemon" "$mk"; do
		[[ -x $tool ]] || die "$tool not found or not executable; build it first (make -C '$build')"
	done
	for tool in awk sort stat cat curl df mktemp; do
		command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not on PATH"
	done
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/$bench.XXXXXX") ||
		die "cannot create a scratch directory under ${TMPDIR:-/tmp}"
	# Started as root, the daemon switches to nobody, who must be able to
	# reach the store through this directory.
	chmod 755 "$scratch"
	have_ss=
	if command -v ss >/dev/null 2>&1; then
		have_ss=1
	fi
	run_as=
	if [[ $(id -u) == 0 ]]; then
		run_as=nobody
		id nobody >/dev/null 2>&1 || die "running as root needs a 'nobody' account for the daemon"
	fi
}

# need_space BYTES: fail before spending minutes writing data that cannot fit.
need_space() {
	local avail
	avail=$(df -Pk "$scratch" | awk 'NR == 2 { print $4 }')
	if [[ $avail =~ ^[0-9]+$ ]] && ((avail * 1024 < $1)); then
		die "not enough space under ${TMPDIR:-/tmp}: need $1 bytes, have $((avail * 1024))"
	fi
}

space_avail() {
	local avail
	avail=$(df -Pk "$scratch" | awk 'NR == 2 { print $4 }')
	[[ $avail =~ ^[0-9]+$ ]] || avail=0
	printf '%s\n' $((avail * 1024))
}

machine_facts() {
	local cpu_model
	cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
	printf 'date:            %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'nproc:           %s\n' "$(nproc 2>/dev/null || echo unknown)"
	printf 'cpu:             %s\n' "${cpu_model:-unknown}"
	printf 'memory:          %s MiB total, %s MiB available\n' \
		"$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)" \
		"$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)"
	printf 'kernel:          %s\n' "$(uname -sr)"
	printf 'file system:     %s\n' "$(df -PT "$scratch" | awk 'NR == 2 { print $2 " on " $1 }')"
	printf 'load average:    %s\n' "$(loadavg)"
	sched_facts
	printf 'build:           %s\n' "$build"
}

loadavg() {
	cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown
}

# ---- artifacts -------------------------------------------------------------

# make_artifact DIR ARGS...: write an artifact, print its hash.
make_artifact() {
	local dir=$1
	shift
	mkdir -p -- "$(dirname -- "$dir")"
	"$mk" "$@" "$dir" || die "vd-mkartifact failed for $dir"
}

# readable DIR: let the daemon's user read the store. Only what lacks the
# bits is changed: chmod moves ctime, which the daemon takes for a change.
readable() {
	find "$1" -type d ! -perm -o=rx -exec chmod a+rx {} + 2>/dev/null || true
	find "$1" -type f ! -perm -o=r -exec chmod a+r {} + 2>/dev/null || true
}

# fresh_state DIR: an empty state directory the daemon's user can write.
fresh_state() {
	rm -rf -- "$1"
	mkdir -p "$1"
	if [[ -n $run_as ]]; then
		chown "$run_as" "$1"
	fi
}

# write_conf FILE STORE STATE [key = value lines...]
write_conf() {
	local conf=$1 store=$2 state=$3 line
	shift 3
	{
		printf 'store = %s\n' "$store"
		printf 'state_dir = %s\n' "$state"
		printf 'listen = 127.0.0.1:0\n'
		[[ -n $run_as ]] && printf 'user = %s\n' "$run_as"
		for line in "$@"; do printf '%s\n' "$line"; done
	} >"$conf"
	"$daemon" -t -c "$conf" >/dev/null || die "the daemon refuses the configuration $conf"
}

# ---- the daemon ------------------------------------------------------------

# start_daemon CONF LOG: start it in the foreground (its log to LOG), wait
# for the port it bound. Sets daemon_pid, port, url.
start_daemon() {
	local conf=$1 log=$2 deadline
	daemon_log=$log
	: >"$log"
	"$daemon" -f -c "$conf" 2>>"$log" >/dev/null &
	daemon_pid=$!
	deadline=$((SECONDS + 20))
	port=
	while [[ -z $port ]]; do
		port=$(sed -n 's/^info: listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
		[[ -n $port ]] && break
		# Below log_level info the line is not written; ask the kernel.
		if [[ -n $have_ss ]]; then
			port=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$daemon_pid," '
				index($0, p) { n = split($4, a, ":"); print a[n]; exit }')
			[[ -n $port ]] && break
		fi
		if ! kill -0 "$daemon_pid" 2>/dev/null; then
			wait "$daemon_pid" 2>/dev/null || true
			daemon_pid=
			die "the daemon exited at start; its log:$(printf '\n'; cat "$log")"
		fi
		((SECONDS < deadline)) || die "the daemon did not report its port within 20 s"
		sleep 0.005
	done
	url=http://127.0.0.1:$port
}

# stop_daemon: SIGTERM, wait for the exit; SIGKILL if it hangs.
stop_daemon() {
	local i
	[[ -n $daemon_pid ]] || return 0
	kill -TERM "$daemon_pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$daemon_pid" 2>/dev/null; then
		warn "the daemon (pid $daemon_pid) ignored SIGTERM for 15 s; killing it"
		kill -KILL "$daemon_pid" 2>/dev/null || true
	fi
	wait "$daemon_pid" 2>/dev/null || true
	daemon_pid=
}

# metric NAME: one sample's value from /metrics (NAME may carry labels);
# empty if the daemon does not answer. A failed request is retried and
# reported: once, right after a wrk run, the daemon reset the connection.
metric() {
	local out i
	for i in 1 2 3; do
		if out=$(curl -fsS --max-time 5 "$url/metrics" 2>&1); then
			awk -v n="$1" '$1 == n && !found { print $2; found = 1 }' <<<"$out"
			return 0
		fi
		warn "GET /metrics failed (attempt $i): $out"
		sleep 0.2
	done
	return 0
}

# ---- polling without forking ----------------------------------------------
# A poll every few milliseconds that starts curl, awk and sleep each time
# costs a good part of a core, taken from the workers being timed on a
# two-core machine. These use bash builtins only.

# nap SECONDS: sleep without starting a process (read times out on a pipe
# that never delivers).
nap_fd=
nap() {
	if [[ -z $nap_fd ]]; then
		exec {nap_fd}<> <(:)
	fi
	read -r -t "$1" -u "$nap_fd" _ || true
}

# http_get PATH: GET over bash's /dev/tcp; sets http_status and http_body
# (empty status when the connection fails).
http_get() {
	local fd line first=1 in_body=0
	http_status='' http_body=''
	# In a group: a redirection on exec itself would stay for the whole
	# script, and hide every later error.
	{ exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 0
	# shellcheck disable=SC2261 # fd is a fresh descriptor, never 2
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$1" >&"$fd" 2>/dev/null || true
	while IFS= read -r -u "$fd" line || [[ -n $line ]]; do
		line=${line%$'\r'}
		if ((first)); then
			# shellcheck disable=SC2034 # for callers
			[[ $line =~ ^HTTP/[0-9.]+\ ([0-9]+) ]] && http_status=${BASH_REMATCH[1]}
			first=0
		elif ((in_body)); then
			http_body+=$line$'\n'
		elif [[ -z $line ]]; then
			in_body=1
		fi
	done
	exec {fd}<&-
}

# gauge NAME: NAME's value in http_body (a /metrics answer), or empty.
gauge() {
	local l
	while IFS= read -r l; do
		if [[ ${l%% *} == "$1" ]]; then
			printf -v gauge_value '%s' "${l##* }"
			return 0
		fi
	done <<<"$http_body"
	gauge_value=''
}

# log_count PATTERN: lines of the daemon's log matching PATTERN (a bash
# regex), into log_n. mapfile reads the regular file in large blocks.
log_count() {
	local -a lines
	local l
	log_n=0
	mapfile -t lines <"$daemon_log"
	for l in "${lines[@]}"; do
		[[ $l =~ $1 ]] && log_n=$((log_n + 1))
	done
	return 0
}

# wait_verified N TIMEOUT_S: until /metrics shows N artifacts verified; fail
# on a failed one or on the timeout. The daemon's log is watched every 10 ms
# (a verdict's log line and its gauge change in the same loop callback) and
# /metrics is asked when the log shows N verdicts, or every half second when
# the log level hides them.
wait_verified() {
	local want=$1 limit=$2 deadline v f last=0 t
	deadline=$((SECONDS + limit))
	for (( ; ; )); do
		log_count '^info: (verified |verification of )'
		t=${EPOCHREALTIME:-$SECONDS.000000}
		t=${t/./}
		if ((log_n >= want || t - last >= 500000)); then
			last=$t
			http_get /metrics
			gauge 'lensemble_verifyd_artifacts{state="verified"}'
			v=$gauge_value
			gauge 'lensemble_verifyd_artifacts{state="failed"}'
			f=$gauge_value
			[[ ${f:-0} == 0 ]] || die "$f artifact(s) failed verification"
			[[ ${v:-0} -ge $want ]] && return 0
		fi
		((SECONDS < deadline)) || die "only ${v:-0} of $want artifacts verified after $limit s"
		nap 0.01
	done
}

# proc_status PID FIELD: a /proc/PID/status field in KiB (VmRSS, VmHWM, ...).
proc_status() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null
}

mib() {
	awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'
}

# proc_cpu PID: user + system CPU seconds the process has used so far. The
# command name in field 2 may hold spaces, so fields are counted after it.
proc_cpu() {
	local stat rest
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	rest=${stat##*) }
	awk -v t="$clk_tck" '{ printf "%.2f\n", ($12 + $13) / t }' <<<"$rest"
}
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)

# Load from other work is the usual reason a second core does not double
# throughput here, and with autogroup scheduling the share a benchmark gets
# depends on how many other process groups are busy, not only on nice values.
# ps's %cpu is over each process's lifetime: a hint of who is busy, no more.
sched_facts() {
	local ag=unknown
	[[ -r /proc/sys/kernel/sched_autogroup_enabled ]] &&
		ag=$(cat /proc/sys/kernel/sched_autogroup_enabled)
	printf 'autogroup:       %s\n' "$ag"
	printf 'busiest (ps):    %s\n' "$(ps -eo pcpu=,ni=,comm= --sort=-pcpu 2>/dev/null | head -n 3 |
		awk '{ printf "%s%s (%s%% cpu, nice %s)", (NR > 1 ? ", " : ""), $3, $1, $2 }')"
}
