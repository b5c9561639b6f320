// Version, unique ids and the creation of communicators: init (plain, with a config, scalable,
// inside a group, all ranks of a process at once), split and shrink, each recorded in the side
// table;
// and the queries. Their end
// (finalize, destroy, abort) is in comm_lifecycle.cc.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

using hc::shim::asHc;
using hc::shim::asNccl;
using hc::shim::fail;
using hc::shim::fromHc;

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(hc_unique_id_t), "the ids carry each other");

// The first version whose ncclConfig_t callers may pass (configs arrived in NCCL 2.14).
constexpr unsigned kFirstConfigVersion = NCCL_VERSION(2, 14, 0);

// True when a caller's config of config->size bytes holds the int field at offset.
bool has(const ncclConfig_t* config, size_t offset, size_t bytes) {
  return config->size >= offset + bytes;
}

// What a communicator keeps of its caller's config (the side table's entry).
struct Settings {
  bool blocking = true;
  unsigned configVersion = 0;
};

hc::shim::CommInfoPtr newInfo(const Settings& settings) {
  auto info = std::make_shared<hc::shim::CommInfo>();
  info->blocking = settings.blocking;
  info->configVersion = settings.configVersion;
  info->library = hc::shim::thisLibrary();
  return info;
}

// Converts the fields of a caller's ncclConfig_t that hc knows (blocking, commName) into *out and
// *settings, reading only the fields the caller's size covers, so an older, shorter struct works
// and a newer, longer one is not misread. A NULL config inherits parent's settings (a split, as
// NCCL does), or with no parent takes NCCL_COMM_BLOCKING from the environment; so does an
// undefined blocking field.
ncclResult_t readConfig(const ncclConfig_t* config, const Settings* parent, hc_config_t* out,
                        Settings* settings) {
  *out = HC_CONFIG_INITIALIZER;
  if (config == nullptr && parent != nullptr) {
    *settings = *parent;
    out->blocking = parent->blocking ? 1 : 0;
    return ncclSuccess;
  }
  *settings = Settings{};
  int blocking = NCCL_CONFIG_UNDEF_INT;
  if (config != nullptr) {
    if (config->magic != NCCL_API_MAGIC ||
        !has(config, offsetof(ncclConfig_t, blocking), sizeof(int))) {
      return fail(ncclInvalidArgument,
                  "ncclConfig_t was not initialized with NCCL_CONFIG_INITIALIZER (bad size or "
                  "magic)");
    }
    if (config->version < kFirstConfigVersion) {
      return fail(ncclInvalidArgument, "ncclConfig_t version " + std::to_string(config->version) +
                                           " predates configs (2.14)");
    }
    settings->configVersion = config->version;
    blocking = config->blocking;
    if (has(config, offsetof(ncclConfig_t, commName), sizeof(const char*))) {
      out->comm_name = config->commName;
    }
  }
  if (blocking == NCCL_CONFIG_UNDEF_INT) {
    const char* env = std::getenv("NCCL_COMM_BLOCKING");
    if (env != nullptr && *env != '\0') blocking = std::atoi(env) != 0 ? 1 : 0;
  }
  if (blocking != NCCL_CONFIG_UNDEF_INT) settings->blocking = blocking != 0;
  out->blocking = settings->blocking ? 1 : 0;
  return ncclSuccess;
}

// readConfig for a communicator made from `comm` (split, shrink): a NULL config inherits comm's
// settings, as NCCL does.
ncclResult_t childConfig(ncclComm_t comm, const ncclConfig_t* config, hc_config_t* out,
                         Settings* settings) {
  Settings parent;
  if (hc::shim::CommInfoPtr p = hc::shim::findComm(comm)) {
    parent = Settings{p->blocking, p->configVersion};
  }
  return readConfig(config, &parent, out, settings);
}

std::string initText(ncclComm_t comm, int rank, int nranks) {
  return "comm " + hc::shim::pointerText(comm) + " rank " + std::to_string(rank) + " nRanks " +
         std::to_string(nranks);
}

// What NCCL_DEBUG=INFO adds to a started init: how host memory reaches the daemon and how
// operations are ordered. Built only at INFO (asking for the memory path may probe the daemon).
std::string pathsText() {
  if (hc::shim::debugLevel() < hc::shim::DebugLevel::Info) return "";
  const char* memory = nullptr;
  std::string text = "; host memory: ";
  text += hc_get_memory_path(&memory) == HC_OK && memory != nullptr ? memory : "unknown";
  text += hc::shim::streamsOrdered()
              ? "; operations ordered on the given stream (NULL: the legacy default stream)"
              : "; no GPU runtime loaded: a NULL-stream operation completes before the call returns";
  return text;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  hc::shim::printBannerOnce();
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  if (std::getenv("NCCL_COMM_ID") != nullptr) {
    return hc::shim::unsupported("ncclGetUniqueId with NCCL_COMM_ID set",
                                 "a fixed root address; unset NCCL_COMM_ID");
  }
  hc_unique_id_t id;
  const hc_status_t s = hc_get_unique_id(&id);
  if (s != HC_OK) return hc::shim::fromHcConnecting(s, "ncclGetUniqueId");
  std::memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  hc::shim::printBannerOnce();
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = nullptr;
  hc_config_t cfg;
  Settings settings;
  const ncclResult_t r = readConfig(config, nullptr, &cfg, &settings);
  if (r != ncclSuccess) return r;
  // Inside a group nothing may block before the outermost ncclGroupEnd (every rank of a job may
  // be inside one, as PyTorch and nccl-tests are): hc runs the init non-blocking and that end
  // waits for it.
  const bool inGroup = hc::shim::groupDepth() > 0;
  if (inGroup) cfg.blocking = 0;
  hc_unique_id_t id;
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  hc_comm_t c = nullptr;
  const hc_status_t s = hc_comm_init_rank_config(&c, nranks, id, rank, &cfg);
  *comm = asNccl(c);
  if (s != HC_OK && s != HC_IN_PROGRESS) return hc::shim::fromHcConnecting(s, "ncclCommInitRank");
  hc::shim::rememberComm(*comm, newInfo(settings));
  hc::shim::orderOnStreams(*comm);
  if (inGroup) {
    hc::shim::deferInit(*comm, settings.blocking);
    hc::shim::info(initText(*comm, rank, nranks) + " - Init started inside a group" + pathsText());
    return ncclSuccess;
  }
  hc::shim::info(initText(*comm, rank, nranks) +
                 (s == HC_OK ? " - Init COMPLETE (hetero-commd)" : " - Init started, non-blocking") +
                 pathsText());
  return fromHc(s, nullptr);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  // Every rank passes the same ids; one root daemon serves the whole job, so the first suffices.
  if (nId < 1 || commIds == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: needs nId >= 1 unique ids");
  }
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

// Every rank of the communicator in this process (hc_comm_init_all), each made as init makes a
// communicator: in the side table, ordered on streams. It blocks until all are ready, inside a
// group too: every rank joins within this call, so nothing waits for a call yet to come.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  hc::shim::printBannerOnce();
  if (comm == nullptr || ndev <= 0) {
    return fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL or ndev < 1");
  }
  std::fill_n(comm, ndev, nullptr);
  if (devlist != nullptr) {
    // NCCL's answer to two ranks on one device (hc's is HC_INVALID_ARGUMENT, as for a bad one).
    std::unordered_set<int> seen;
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] >= 0 && !seen.insert(devlist[i]).second) {
        return fail(ncclInvalidUsage, "ncclCommInitAll: device " + std::to_string(devlist[i]) +
                                          " is listed twice; each rank needs a device of its own");
      }
    }
  }
  // No config: NCCL_COMM_BLOCKING decides the mode of the later calls (finalize), as in NCCL.
  hc_config_t cfg;
  Settings settings;
  const ncclResult_t r = readConfig(nullptr, nullptr, &cfg, &settings);
  if (r != ncclSuccess) return r;
  std::vector<hc_comm_t> made(static_cast<size_t>(ndev), nullptr);
  const hc_status_t s = hc_comm_init_all(made.data(), ndev, devlist);
  if (s != HC_OK) return hc::shim::fromHcConnecting(s, "ncclCommInitAll");
  for (int i = 0; i < ndev; ++i) {
    comm[i] = asNccl(made[static_cast<size_t>(i)]);
    hc::shim::rememberComm(comm[i], newInfo(settings));
    hc::shim::orderOnStreams(comm[i]);
    hc::shim::info(initText(comm[i], i, ndev) + " device " +
                   std::to_string(devlist != nullptr ? devlist[i] : i) +
                   " - Init COMPLETE (hetero-commd, ncclCommInitAll)" + pathsText());
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  }
  *newcomm = nullptr;
  hc_config_t cfg;
  Settings settings;
  const ncclResult_t r = childConfig(comm, config, &cfg, &settings);
  if (r != ncclSuccess) return r;
  hc_comm_t c = nullptr;
  const hc_status_t s = hc_comm_split(asHc(comm), color, key, &c, &cfg);
  *newcomm = asNccl(c);
  if (s == HC_OK || s == HC_IN_PROGRESS) {
    if (*newcomm != nullptr) {
      hc::shim::rememberComm(*newcomm, newInfo(settings));
      hc::shim::orderOnStreams(*newcomm);
    }
    hc::shim::info("comm " + hc::shim::pointerText(comm) + " split color " + std::to_string(color) +
                   " key " + std::to_string(key) + " -> comm " + hc::shim::pointerText(*newcomm) +
                   (s == HC_IN_PROGRESS ? " (started, non-blocking)" : ""));
  }
  return fromHc(s, comm);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (comm == nullptr || newcomm == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommShrink: comm or newcomm is NULL");
  }
  *newcomm = nullptr;
  hc_config_t cfg;
  Settings settings;
  const ncclResult_t r = childConfig(comm, config, &cfg, &settings);
  if (r != ncclSuccess) return r;
  static_assert(NCCL_SHRINK_DEFAULT == HC_SHRINK_DEFAULT && NCCL_SHRINK_ABORT == HC_SHRINK_ABORT);
  hc_comm_t c = nullptr;
  const hc_status_t s =
      hc_comm_shrink(asHc(comm), excludeRanksList, excludeRanksCount, &c, &cfg, shrinkFlags);
  *newcomm = asNccl(c);
  if ((s == HC_OK || s == HC_IN_PROGRESS) && *newcomm != nullptr) {
    hc::shim::rememberComm(*newcomm, newInfo(settings));
    hc::shim::orderOnStreams(*newcomm);
    hc::shim::info("comm " + hc::shim::pointerText(comm) + " shrunk by " +
                   std::to_string(excludeRanksCount) + " ranks -> comm " +
                   hc::shim::pointerText(*newcomm) +
                   (s == HC_IN_PROGRESS ? " (started, non-blocking)" : ""));
  }
  return fromHc(s, comm);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: comm is NULL");
  return fromHc(hc_comm_count(asHc(comm), count), comm);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: comm is NULL");
  return fromHc(hc_comm_device(asHc(comm), device), comm);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: comm is NULL");
  return fromHc(hc_comm_user_rank(asHc(comm), rank), comm);
}

}  // extern "C"

HC_NCCL_TWIN(ncclGetVersion)
HC_NCCL_TWIN(ncclGetUniqueId)
HC_NCCL_TWIN(ncclCommInitRankConfig)
HC_NCCL_TWIN(ncclCommInitRank)
HC_NCCL_TWIN(ncclCommInitRankScalable)
HC_NCCL_TWIN(ncclCommInitAll)
HC_NCCL_TWIN(ncclCommSplit)
HC_NCCL_TWIN(ncclCommShrink)
HC_NCCL_TWIN(ncclCommCount)
HC_NCCL_TWIN(ncclCommCuDevice)
HC_NCCL_TWIN(ncclCommUserRank)
