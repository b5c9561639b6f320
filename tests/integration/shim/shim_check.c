/* hc_shim_check: one rank of a job that uses the shim exactly as an NCCL program would.
 *
 *   hc_shim_check --new-id                         prints a fresh ncclGetUniqueId as hex
 *   hc_shim_check --rank R --nranks N --id HEX [--quick]
 *   hc_shim_check --rank R --nranks N --id HEX --mode NAME [--sync DIR] [--by config|env|group]
 *                 [--config-version V] [--want RESULT]   one scenario (shim_check_modes.c)
 *
 * Runs every case (collectives x dtypes x ops x counts, groups and send/recv, split, bad
 * arguments), prints "WRONG ..." or "ERROR ..." for each failure and "#wrong <n>" at the end, and
 * exits 0 only when n is 0. Expected values are computed here from the inputs, not by the shim.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/shim/shim_check.h"

int expectResult(Check* c, const char* what, ncclResult_t r, ncclResult_t want) {
  if (r == want) return 1;
  printf("ERROR %s returned %d (%s), want %d: %s\n", what, (int)r, ncclGetErrorString(r), (int)want,
         ncclGetLastError(c->comm));
  c->wrong++;
  return 0;
}

size_t dtypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclUint8:
    case ncclInt8:
      return 1;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

void putValue(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)v;
      break;
    case ncclInt8:
      ((int8_t*)buf)[i] = (int8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)v;
      break;
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    default:
      ((double*)buf)[i] = v;
      break;
  }
}

double getValue(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclUint8:
      return ((const uint8_t*)buf)[i];
    case ncclInt8:
      return ((const int8_t*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclUint32:
      return ((const uint32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclUint64:
      return (double)((const uint64_t*)buf)[i];
    case ncclFloat32:
      return ((const float*)buf)[i];
    default:
      return ((const double*)buf)[i];
  }
}

void expectValues(Check* c, const char* what, const void* buf, ncclDataType_t t, size_t count,
                  double (*want)(size_t i, const void* ctx), const void* ctx) {
  for (size_t i = 0; i < count; ++i) {
    const double got = getValue(buf, t, i);
    const double w = want(i, ctx);
    if (got != w) {
      printf("WRONG %s: element %zu of %zu is %g, want %g\n", what, i, count, got, w);
      c->wrong++;
      return;
    }
  }
}

static int parseHex(const char* hex, ncclUniqueId* id) {
  if (strlen(hex) != 2 * sizeof(id->internal)) return 0;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
    id->internal[i] = (char)v;
  }
  return 1;
}

static int newId(void) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    return 1;
  }
  for (size_t i = 0; i < sizeof(id.internal); ++i) printf("%02x", (unsigned char)id.internal[i]);
  printf("\n");
  return 0;
}

int main(int argc, char** argv) {
  Check c = {-1, 0, NULL, 0};
  ModeArgs mode = {NULL, ".", "config", NCCL_VERSION_CODE, ncclSuccess};
  const char* hex = NULL;
  int quick = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--new-id") == 0) return newId();
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    if (i + 1 < argc && strcmp(argv[i], "--rank") == 0)
      c.rank = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--nranks") == 0)
      c.nranks = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--id") == 0)
      hex = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--mode") == 0)
      mode.mode = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--sync") == 0)
      mode.syncDir = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--by") == 0)
      mode.by = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--config-version") == 0)
      mode.configVersion = atol(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--want") == 0)
      mode.want = atoi(argv[++i]);
  }
  ncclUniqueId id;
  if (c.rank < 0 || c.nranks < 1 || hex == NULL || !parseHex(hex, &id)) {
    fprintf(stderr,
            "usage: %s --new-id | --rank R --nranks N --id HEX [--quick | --mode NAME ...]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (mode.mode != NULL) return runMode(&c, &mode, id);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "hc_shim_check";
  if (!CHECK_OK(&c, "ncclCommInitRankConfig",
                ncclCommInitRankConfig(&c.comm, c.nranks, id, c.rank, &config))) {
    printf("#wrong %d\n", c.wrong);
    return 1;
  }
  runBadArguments(&c);
  runCollectiveGrid(&c, quick);
  runGroupsAndP2p(&c);
  runSplit(&c);
  runShrink(&c);
  CHECK_OK(&c, "ncclCommFinalize", ncclCommFinalize(c.comm));
  CHECK_OK(&c, "ncclCommDestroy", ncclCommDestroy(c.comm));
  printf("#wrong %d\n", c.wrong);
  return c.wrong == 0 ? 0 : 1;
}
