/*
 * The memory of commitments (vd_memory.h) in the state database: a record
 * made durable, each with what goes in its transaction (a post's audit
 * entry and its statement's signatures), and the memory rebuilt at start
 * from the rows loaded, in the order of its records: posts,
 * equivocations, checkpoints, statements, withdrawals, ledgers, retained
 * artifacts.
 */
#ifndef VD_MEMSTATE_H
#define VD_MEMSTATE_H

#include "vd_memory.h"
#include "vd_state.h"

/* A vd_mem_persist_fn, arg the state database: 0, or -EIO when nothing
 * was written (-EEXIST: the database holds another hash for a post's
 * round, which the memory does not). Without a database (arg NULL) what must be durable before it
 * is answered (posts, equivocations, checkpoints, signatures, withdrawals)
 * is refused, the rest kept in memory only. */
int vd_memstate_persist(const vd_mem_record *rec, void *arg);

/* Restore every record st holds into m (empty): 0, or -EIO when a table
 * could not be read, with the sentence in err. */
int vd_memstate_load(vd_state *st, vd_memory *m, char *err, size_t errlen);

#endif
