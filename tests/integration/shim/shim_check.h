/* hc_shim_check: one rank of a job written against NCCL's C API only (the shim's nccl.h, or
 * rccl/rccl.h when built for librccl.so.1), with shared helpers for its cases. */
#ifndef HC_TESTS_INTEGRATION_SHIM_SHIM_CHECK_H_
#define HC_TESTS_INTEGRATION_SHIM_SHIM_CHECK_H_

#include <stddef.h>

#if defined(HC_SHIM_CHECK_RCCL)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

typedef struct {
  int rank;
  int nranks;
  ncclComm_t comm;
  int wrong; /* cases whose result differed, or whose call failed */
} Check;

/* Reports a failed call (its result and ncclGetLastError) and counts it; returns r == ok. */
int expectResult(Check* c, const char* what, ncclResult_t r, ncclResult_t want);
#define CHECK_OK(c, what, call) expectResult((c), (what), (call), ncclSuccess)

size_t dtypeSize(ncclDataType_t t);
void putValue(void* buf, ncclDataType_t t, size_t i, double v);
double getValue(const void* buf, ncclDataType_t t, size_t i);
/* Compares count elements of buf with want(i); prints the first difference and counts it. */
void expectValues(Check* c, const char* what, const void* buf, ncclDataType_t t, size_t count,
                  double (*want)(size_t i, const void* ctx), const void* ctx);

/* The cases, each in its own file. */
void runCollectiveGrid(Check* c, int quick);
void runGroupsAndP2p(Check* c);
void runSplit(Check* c);
/* Leaves the last rank out of a shrunk child: the last case that uses c->comm. */
void runShrink(Check* c);
void runBadArguments(Check* c);

/* One scenario instead of the case list (shim_check_modes.c): --mode NAME with its options. */
typedef struct {
  const char* mode;    /* nonblocking, group-init, timeout, abort-waiter, loop, init-all,
                          finalize-abort, disagree, sim */
  const char* syncDir; /* --sync: the folder where the job's ranks leave step files */
  const char* by;      /* --by: how a rank asks for non-blocking: config, env or group;
                          for disagree, what odd ranks change (count, op or dtype), with
                          +stream when the ranks issue on a stream handle */
  long configVersion;  /* --config-version: ncclConfig_t.version; 0 passes no config */
  int want;            /* --want: the ncclResult_t a timed-out operation must give */
} ModeArgs;
/* Creates the communicator itself, runs the mode, prints "#wrong <n>"; returns the exit code. */
int runMode(Check* c, const ModeArgs* m, ncclUniqueId id);
/* Modes whose ranks all live in this process (shim_check_init_all.c); the id is not used.
 * init-all: ncclCommInitAll of c->nranks ranks; finalize-abort: the finalize/abort race. */
void runInitAll(Check* c);
void runFinalizeAbort(Check* c);
/* sim: collectives on simulated device memory, on a sim stream and the NULL stream
 * (shim_check_sim.c). */
void runSim(Check* c, const ModeArgs* m, ncclUniqueId id);

#endif /* HC_TESTS_INTEGRATION_SHIM_SHIM_CHECK_H_ */
