#include "daemon/transport/ucx/ucx_worker.h"

#include <string>

#include "daemon/transport/ucx/socket_ifname.h"
#include "daemon/transport/ucx/ucx_status.h"

namespace hc::transport::ucx {
namespace {

// Owns a ucp_config_t for the span of create().
struct ConfigDeleter {
  void operator()(ucp_config_t* config) const { ucp_config_release(config); }
};
using ConfigPtr = std::unique_ptr<ucp_config_t, ConfigDeleter>;

Status modify(ucp_config_t* config, const char* name, const std::string& value) {
  // UCX 1.13 accepts names it does not know here and only warns at worker creation, so every
  // name passed is one of UCP's own (TLS, NET_DEVICES, KEEPALIVE_INTERVAL).
  HC_UCS_TRY(ucp_config_modify(config, name, value.c_str()),
             std::string("ucp_config_modify ") + name + "=" + value);
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(const UcxOptions& options) {
  if (options.keepaliveInterval.count() <= 0) {
    return invalidArgument("ucx: keepalive interval must be positive");
  }
  ucp_config_t* rawConfig = nullptr;
  HC_UCS_TRY(ucp_config_read(nullptr, nullptr, &rawConfig), "ucp_config_read");
  ConfigPtr config(rawConfig);
  if (!options.transports.empty()) {
    HC_RETURN_IF_ERROR(modify(config.get(), "TLS", options.transports));
  }
  if (!options.socketIfname.empty()) {
    Result<std::string> devices = netDevicesFor(options.socketIfname);
    if (!devices.isOk()) return devices.status();
    HC_RETURN_IF_ERROR(modify(config.get(), "NET_DEVICES", *devices));
  }
  HC_RETURN_IF_ERROR(modify(config.get(), "KEEPALIVE_INTERVAL",
                            std::to_string(options.keepaliveInterval.count()) + "ms"));

  std::unique_ptr<UcxWorker> self(new UcxWorker());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  HC_UCS_TRY(ucp_init(&params, config.get(), &self->context_),
             "ucp_init (UCX_TLS=" + options.transports + ")");

  ucp_worker_params_t workerParams{};
  workerParams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  workerParams.thread_mode = UCS_THREAD_MODE_SINGLE;  // the owning progress thread only
  HC_UCS_TRY(ucp_worker_create(self->context_, &workerParams, &self->worker_), "ucp_worker_create");
  HC_UCS_TRY(ucp_worker_get_efd(self->worker_, &self->eventFd_), "ucp_worker_get_efd");

  ucp_address_t* address = nullptr;
  size_t length = 0;
  HC_UCS_TRY(ucp_worker_get_address(self->worker_, &address, &length), "ucp_worker_get_address");
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  self->address_.assign(bytes, bytes + length);
  ucp_worker_release_address(self->worker_, address);

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  HC_UCS_TRY(ucp_context_query(self->context_, &attr), "ucp_context_query");
  self->memoryTypes_ = attr.memory_types;
  return self;
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace hc::transport::ucx
