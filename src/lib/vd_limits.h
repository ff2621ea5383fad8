/*
 * Every hard limit of the daemon and the library, named once. A limit an
 * operator may tune is a config key (vd_config.c) whose default is the
 * *_DEFAULT here; the rest are fixed by design, each with why.
 */
#ifndef VD_LIMITS_H
#define VD_LIMITS_H

#define VD_XSTR_(x) #x
#define VD_XSTR(x) VD_XSTR_(x)   /* a numeric limit as text, for defaults */

/* ---- one verification (library and daemon) ---------------------- */
/* Plain decimal literals: they are also the config table's default text. */
/* About 1.6 KiB of parse memory per tensor (its entry in the safetensors
 * header and in header.json's manifest): the default tensors fit the
 * default memory with room to spare. Raise both together. */
#define VD_MAX_TENSORS_DEFAULT 32768
#define VD_MAX_JOB_MEMORY_DEFAULT 67108864           /* 64 MiB */
#define VD_MAX_ARTIFACT_BYTES_DEFAULT 1099511627776  /* 1 TiB */
/* Fixed, whatever the bounds. */
#define VD_ARTIFACT_MAX_FILES 4096     /* weight files per artifact */
/* header.json is metadata; a larger one is refused before it is read.
 * The index (weights.index.json) is held to the same. */
#define VD_HEADER_MAX_BYTES (16u * 1024 * 1024)
/* Like the reference safetensors library: refuse larger headers. */
#define VD_ST_MAX_HEADER_DEFAULT 100000000ULL
#define VD_ST_MAX_RANK 64              /* dimensions of one tensor */
#define VD_JSON_MAX_DEPTH_DEFAULT 64   /* nesting; the parser recurses per level */
#define VD_DIGEST_STEP (1u << 20)      /* resident per hasher in a range digest */
/* The canonical pass hashes a mapped file in place while the page cache
 * maps it in large folios. Every VD_PAGE_PROBE_EVERY bytes of a file it
 * hashes the next VD_PAGE_PROBE in place, if cached, counting its minor
 * faults: above VD_SMALL_PAGE_FAULTS per MiB (4 KiB pages fault about 16
 * times per MiB, large folios 4 or fewer) it reads until the next probe,
 * into a buffer of VD_READ_BUFFER bytes per verification (hashed while in
 * L2). A probe costs a few percent of its bytes' hashing at worst. */
#define VD_PAGE_PROBE_EVERY (32u << 20)
#define VD_PAGE_PROBE (2u << 20)
#define VD_SMALL_PAGE_FAULTS 8u
#define VD_READ_BUFFER (256u * 1024)
#define VD_HASH_CHUNK (1u << 20)       /* bytes hashed between progress calls: the
                                        * granularity of cancellation */
#define VD_LOAD_READ_STEP (64u << 20)  /* bytes per read() when loading into memory:
                                        * below Linux's per-call limit of 2 GiB */
/* Loading into memory (vd_load_verified): the files are read on a thread
 * of their own while the hash runs, in pieces this large (each one
 * published to the hash as it arrives: small enough that the hash waits
 * little for one in flight and that a piece the hash reads itself is still
 * in L2 when hashed, large enough that the lock is taken rarely), when
 * there are this many bytes to read (a thread costs tens of
 * microseconds). */
#define VD_LOAD_READ_PIECE (256u * 1024)
#define VD_LOAD_THREAD_MIN (8u << 20)
/* How far the reader may run ahead of the hash: well inside the shared
 * cache (32 MiB of L3 here), so that the hash reads the copy from there
 * rather than from memory, 4 KiB page after 4 KiB page. */
#define VD_LOAD_READ_LEAD (16u << 20)
/* Parse memory: blocks this large and more are mapped on their own
 * (vd_mem_alloc), so that freeing them gives them back to the system;
 * glibc's initial mmap threshold. */
#define VD_MEM_MAP_MIN (128u * 1024)
/* An arena's chunks: the first from malloc (most documents are small),
 * the largest mapped, so that a big document grows in few steps without
 * one chunk holding much it does not use. */
#define VD_ARENA_FIRST_CHUNK (64u * 1024)
#define VD_ARENA_MAX_CHUNK (4u * 1024 * 1024)

/* ---- the hasher pool ---------------------------------------------- */
/* The automatic max_verify_seconds: this allowance (header.json, opening
 * and mapping the files, a busy machine) plus the bytes at the floor rate. */
#define VD_VERIFY_BASE_SECONDS 60
/* A canonical pass gives its hasher to a job ahead of it (explicit, or
 * one that has hashed less: a new or small artifact) after this much
 * hashing, and goes on later where it stopped (hash_slice_ms): the longest
 * a new round waits for a huge artifact before it is hashed itself. Long
 * enough that opening and parsing the artifact again between slices (well
 * under a millisecond for an artifact of a few files) costs no measurable
 * throughput; a job alone, or ahead of the rest, never stops at all. */
#define VD_HASH_SLICE_MS_DEFAULT 250
/* How often a running job looks whether its artifact is still there:
 * a removed or replaced artifact stops being hashed within this. */
#define VD_JOB_LOOK_SECONDS 0.25
/* A job that ran out of time is tried again after its time limit, doubled
 * for each time in a row, but never later than this. */
#define VD_RETRY_MAX_SECONDS 21600
/* Hasher threads beside `workers` that take explicit (participant) jobs
 * only; they sleep otherwise. */
#define VD_URGENT_THREADS 1
#define VD_WORKER_NICE 10         /* the loop gets ~90% of a core workers contend for */
/* Background jobs queued at once: enough to keep every worker busy for
 * a while on small artifacts even when the loop is slow to hand out
 * more (a busy HTTP load); the rest wait in the backlog as relpaths, not
 * as jobs (a job is over a kilobyte; a first scan can find thousands). */
#define VD_BACKGROUND_QUEUED 1024u
/* The sink: digests of a canonical pass's chunks, taken by idle workers. */
#define VD_SINK_FINISH_BYTES (64u << 20)   /* the owner digests a remainder this small */
/* An explicit job (someone waits for it) does not finish its map itself:
 * spare workers must digest every chunk while its pass hashes the same
 * bytes, which one spare core, hashing as fast as the pass, does not do
 * in time; its digests were then thrown away, and on a busy machine they
 * took the pass's CPU meanwhile. */
#define VD_SINK_EXPLICIT_MIN_IDLE 2u

/* ---- the store's scan and chunk maps ------------------------------ */
#define VD_SCAN_MAX_ARTIFACTS 100000
#define VD_SCAN_MAX_DIR_ENTRIES 10000   /* entries in one artifact directory */
#define VD_SCAN_MAX_WALK_ENTRIES (VD_SCAN_MAX_ARTIFACTS + 1000)  /* in a directory walked */
#define VD_SCAN_MAX_ENVELOPES 100000       /* envelope files in one scan */
#define VD_CHUNK_SIZE (16u << 20)      /* bytes per digest of a chunk map */

/* ---- ledgers, envelopes and keys ----------------------------------- */
#define VD_LEDGER_MAX_LINE (1u << 20)   /* bytes in one record line */
#define VD_LEDGER_MAX_BYTES (64u << 20)   /* a larger ledger is refused */
#define VD_DSSE_MAX_BYTES (64u << 10)   /* an envelope larger than this is refused */
#define VD_DSSE_MAX_SIGS 16             /* signatures in one envelope */
#define VD_DSSE_MAX_TYPE 128            /* bytes in payloadType */
#define VD_DSSE_MAX_DEPTH 8             /* JSON nesting in envelopes and payloads */
#define VD_RUN_MAX 1024                 /* bytes in a run name, with its NUL */
#define VD_KEY_FILE_MAX (16u << 10) /* a PEM key file larger than this is refused */
#define VD_KEYRING_MAX 256          /* keys in one trusted_keys directory */
#define VD_WITHDRAW_REASON_MAX 512  /* bytes of the reason given for a withdrawal */

/* ---- tar archives -------------------------------------------------- */
/* Members of every kind, directories included: twice the weight files an
 * artifact may have (VD_ARTIFACT_MAX_FILES), which leaves room for
 * header.json, the index and whatever else travels with them. */
#define VD_TAR_MAX_MEMBERS 8192
#define VD_TAR_MAX_NAME 4096              /* bytes of one member's path */
#define VD_TAR_MAX_NAME_BYTES (1u << 20)  /* bytes of all member paths together */
#define VD_TAR_MAX_EXT (64u * 1024)       /* bytes of one pax extended header: whole blocks */

/* ---- the configuration --------------------------------------------- */
#define VD_CONFIG_MAX_BYTES (1u << 20)   /* a config file larger than this is refused */
#define VD_CONFIG_PATH_MAX 1024
#define VD_CONFIG_VALUE_MAX 4096   /* one value; lists of pins are the longest */
#define VD_CONFIG_MAX_PINS 32      /* entries of genesis_hash, of anchor */
#define VD_CONFIG_MAX_RUN_TOKENS 16
#define VD_CONFIG_MAX_RUN_OMS 16   /* runs in run_oms_keys */
#define VD_PIN_RUN_MAX 256         /* a run named in a pin or a token entry */

/* ---- HTTP requests ------------------------------------------------- */
#define VD_REQ_PATH_MAX 1024
/* The query string, as libmicrohttpd splits and decodes it. */
#define VD_REQ_QUERY_MAX_ARGS 32                     /* parameters in one query at most */
#define VD_REQ_QUERY_KEY_MAX 64                      /* bytes in a parameter's name */
#define VD_REQ_QUERY_VALUE_MAX (VD_REQ_PATH_MAX - 1) /* bytes in its value, decoded */
/* Header fields in one request at most (431 beyond). */
#define VD_HTTP_MAX_FIELDS 100
/* libmicrohttpd keeps a request's line and headers in one memory pool per
 * connection and answers 431 or 414 itself, in HTML, when they outgrow it.
 * The pool is sized so that a request far over our own limits still fits
 * and gets our JSON error: the text several times over, plus the
 * bookkeeping of thousands of fields (about this much per field). */
#define VD_HTTP_POOL_TEXT_FACTOR 4
#define VD_HTTP_FIELD_COST 64
#define VD_HTTP_POOL_FIELDS 2048
#define VD_HTTP_POOL_SLACK 65536
/* A body refused while it arrives (413 sent at once): how long and how
 * much of the rest is read and dropped before the connection is cut, so
 * that the client reads the answer instead of a reset. */
#define VD_HTTP_LINGER_MS 2000
#define VD_HTTP_DISCARD_MAX (1u << 20)
/* How often "all connections in use" is logged at most. */
#define VD_HTTP_FULL_LOG_MS 10000
/* On stop, how long streams may take to send their last chunk before the
 * server is stopped under them. */
#define VD_HTTP_DRAIN_MS 1000
#define VD_TLS_FILE_MAX (1u << 20)   /* a PEM certificate or key file, bytes */
/* An error answer's sentence is cut to this; its JSON, every byte escaped
 * at worst, fits the second (written without allocating). */
#define VD_HTTP_DETAIL_MAX 512
#define VD_HTTP_ERROR_MAX (6 * VD_HTTP_DETAIL_MAX + 128)

#define VD_API_DEFAULT_WAIT 30     /* seconds, POST /verify?wait= */
/* The longest ?wait=, and the ceiling of max_wait (a plain literal: the
 * config table's range). */
#define VD_API_MAX_WAIT 300
#define VD_PAGE_MAX 10000          /* ?limit= of a paginated listing, at most */
#define VD_TOKEN_MAX 512           /* bytes in the operator token */
#define VD_TOKEN_MIN 16

/* ---- the event stream ---------------------------------------------- */
#define VD_EVENTS_RING_BYTES (1u << 20)       /* frames kept in memory at most */
#define VD_EVENTS_RING_MAX 8192               /* ... and events */
#define VD_EVENTS_STREAM_BUFFER (256u << 10)  /* bytes a stream may lag behind */
#define VD_EVENTS_PAGE 64                     /* events read from the database at once */
#define VD_EVENTS_TRIM_BATCH 1024             /* events past event_history before a trim */
/* Keepalive ticks per event_keepalive: a stream gets its comment when its
 * silence is within a tick of the interval, never later. */
#define VD_EVENTS_KEEPALIVE_TICKS 4
#define VD_EVENTS_CUT_LOG_MS 10000            /* "stream cut" is logged at most this often */
#define VD_EVENTS_NOTE_MAX 160                /* a lost event's frame: two 20-digit ids fit */

/* ---- logs, metrics and state --------------------------------------- */
#define VD_LOG_MSG_MAX 2048        /* a message longer than this is cut */
#define VD_LOG_LINE_MAX 8192       /* a JSON line or a journal entry, fields included */
/* A request's path as the access log writes it, escapes included: the
 * client chooses it, and one line must stay one readable line. */
#define VD_LOG_PATH_MAX 256
#define VD_METRICS_MAX_HTTP_SERIES 128
#define VD_CHAIN_MAX_BREAKS 16     /* breaks listed per chain; the rest counted */
#define VD_STATE_BUSY_MS 5000      /* SQLite waits this long for a lock */
#define VD_STATE_PRUNE_INTERVAL 3600   /* seconds between prunes of old cleared alerts */
/* The loop's batches (verdicts, events, alert episodes, remembered
 * artifacts) are committed every turn but synced to disk at most this
 * often, in seconds: a power loss costs at most this much of them, and
 * the loop no fsync a turn. */
#define VD_STATE_SYNC_INTERVAL 1.0
/* SQLite's page cache, in KiB (negative: a size, not pages): the
 * database is written far more than read back, and the operating system
 * caches its file anyway. */
#define VD_STATE_CACHE_KIB "-512"
/* Statements written once per artifact or event are prepared once. */
#define VD_STMT_CACHE_MAX 8

/* ---- the daemon's loop --------------------------------------------- */
#define VD_SCAN_SETTLE_MAX_MS 1000   /* a stream of events delays a scan at most this */
/* Changes noted between two scans; past this the whole store is scanned
 * instead of the places they name. */
#define VD_SCAN_CHANGES_MAX 256
/* A loop turn that has been busy this long starts no further slice of
 * sliced work (the merge, the lineage pass, remembering retained
 * artifacts, finished jobs): what is left waits for the next turn, so a
 * turn holds the loop for this plus one slice, not for every slice ready
 * in it (src/daemon/vd_turn.h). Half the 50 ms bench/scale holds a first
 * pass's turns to, so that one more slice (10 to 25 ms) stays under it. */
#define VD_TURN_BUDGET_MS 25
/* The scan result is merged a slice at a time, one slice a loop turn:
 * on a store of many thousand rounds, clients are answered meanwhile. */
#define VD_MERGE_SLICE 500
/* A slice ends sooner past this much loop time: a slice's cost varies with
 * what its artifacts bring (stored verdicts, headers), and with the share
 * of a core the daemon gets. */
#define VD_MERGE_SLICE_MS 10
/* Ledger records remembered (each a durable row and its audit row) a loop
 * turn: a ledger of many thousand records is taken in over several turns
 * (1,000 took 4 to 12 ms of CPU beside the verdicts of the same turn). */
#define VD_LEDGER_REMEMBER_SLICE 500
/* Directories of a scan looked at a loop turn, at the end of a merge, in
 * each of three steps: taken in, given an inotify watch where they have
 * none (a system call of 4 to 7 us, more when the kernel's inotify lock
 * is contended), given their own where a renamed one took theirs along;
 * then the stale watches are dropped in a turn. */
#define VD_WATCH_SLICE 500
/* Finished hashing jobs handed to the store a loop turn (about 10 us of
 * CPU each: the verdict's row, its event, the next jobs submitted); the
 * rest wait for the next turn. A first pass over tiny artifacts finishes
 * hundreds a turn. */
#define VD_QUEUE_DONE_SLICE 256
/* The first whole lineage pass over a scan computes this many groups'
 * chains a loop turn (4 to 6 ms of CPU in docs/PERFORMANCE.md; 16,000
 * rounds take four turns), then the head and the alerts in a turn of
 * their own: the turn that merges the commitment sources only rebuilds
 * the slots. Groups not reached yet read pending. */
#define VD_LINEAGE_PASS_SLICE 4000
/* Artifacts a whole lineage pass newly found committed, remembered (each a
 * durable row and its audit row) a loop turn: the first pass over a store
 * of many thousand rounds commits them all at once (2,000 took 13 to 27 ms
 * of CPU). */
#define VD_RETAIN_SLICE 500
/* The listings' indexes (src/core/vd_order.h) sort in what was added once
 * this much waits unsorted, or when a page is read. */
#define VD_ORDER_UNSORTED_MAX 1024
/* A change of ledgers alone (records appended, signed by a checkpoint)
 * rebuilds the slots of the records it touches, up to this many; past it,
 * every slot is built again (src/core/vd_lineage.c). */
#define VD_SLOTS_IN_PLACE_MAX 256
/* After a verdict, lineage catches up this long after, so that the
 * verdicts of one burst are looked at together. Readers and waiters catch
 * it up at once (vd_store_sync). */
#define VD_REFRESH_DELAY_MS 10
/* An alert the state database could not record is written again this
 * long after (and every time as long after, while writes fail). */
#define VD_ALERT_RETRY_MS 1000
/* While verdicts stream in, the hashers' short-lived buffers and the
 * store's long-lived records interleave in the heap: what is freed between
 * them stays resident unless handed back now and then. */
#define VD_TRIM_INTERVAL_MS 1000
/* Past this many marks (and a quarter of the groups), everything is
 * taken as changed: a whole pass costs no more, and a first scan of a
 * large store would otherwise copy every path and hash into the sets. */
#define VD_DIRTY_WHOLE_MIN 1024
#define VD_STATUS_INTERVAL_MS 10000   /* how often systemd's STATUS= line is renewed */
/* loop_stall_warn_ms: a turn busier than this is logged at warning. A
 * quarter second is a delay a client notices; shorter turns (a store
 * scan merged, a synced commit) are routine and only counted in
 * loop_stall_seconds. A plain literal: the config table's default. */
#define VD_LOOP_STALL_WARN_MS_DEFAULT 250
#define VD_STALL_LOG_GAP_NS (60 * 1000000000ull)  /* at most one such line a minute */

/* ---- the command-line verifier ------------------------------------- */
#define VD_PROGRESS_MIN_BYTES (256u << 20)   /* show progress above this size */
#define VD_ATTEST_JSON_MEMORY (4u << 20)   /* parse memory for an attestation read back */

/* OpenSSF Model Signing (vd_oms): bundles and the models they sign. */
#define VD_OMS_MAX_BYTES (16u << 20)      /* a bundle file larger than this is refused */
#define VD_OMS_MAX_DEPTH 16               /* JSON nesting in a bundle and its statement */
#define VD_OMS_MAX_RESOURCES 200000       /* resources in one statement */
#define VD_OMS_MAX_NAME 4096              /* bytes of one resource name or ignore path */
#define VD_OMS_MAX_IGNORE 1024            /* ignore paths, the bundle's and the caller's */
#define VD_OMS_MAX_CERTS 8                /* certificates in a chain */
#define VD_OMS_MAX_CERT_BYTES (16u << 10) /* one DER certificate */
#define VD_OMS_MAX_SIG_BYTES 512          /* a decoded DSSE signature */
#define VD_OMS_MAX_FILES 200000           /* regular files in one model */
#define VD_OMS_MAX_DIR_DEPTH 64           /* directory levels below the model root */
#define VD_OMS_MAX_DIFFS 16               /* differences listed; the rest counted */
#define VD_OMS_RUN_CAS_MAX 64             /* CA certificate files in one run_oms_keys directory */
#define VD_OMS_SHARD_DEFAULT 1000000000ULL
#define VD_OMS_READ_STEP (1u << 20)       /* bytes one hashing thread reads at a time */
#define VD_OMS_MAP_MIN (1u << 20)         /* ranges this large are hashed from a mapping */
#define VD_OMS_HASH_OPEN_MAX 64           /* files held open while their digests are under way */
#define VD_OMS_JOBS_MAX 256               /* threads hashing one model */

#endif
