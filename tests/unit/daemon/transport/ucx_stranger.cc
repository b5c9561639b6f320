#include "tests/unit/daemon/transport/ucx_stranger.h"

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "daemon/transport/ucx/ucx_wire.h"

namespace hc::transport::testing {
namespace {

Status ucsError(ucs_status_t status, const std::string& what) {
  return Status(Code::TransportError, what + ": " + ucs_status_string(status));
}

ucp_request_param_t contiguous() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  return param;
}

// The endpoint fails when the transport goes first; nothing to do, but UCX wants a handler for
// error mode PEER (without it, a failure is fatal to the process).
void ignoreError(void*, ucp_ep_h, ucs_status_t) {}

}  // namespace

Result<std::unique_ptr<Stranger>> Stranger::create(const PeerAddress& target, Protocol protocol) {
  std::optional<ucx::EndpointAddress> address = ucx::decodeAddress(target.bytes);
  if (!address) return invalidArgument("not a UCX endpoint address");
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return ucsError(status, "ucp_config_read");
  std::vector<std::pair<const char*, const char*>> settings = {{"TLS", "tcp,self"},
                                                               {"NET_DEVICES", "lo"}};
  if (protocol == Protocol::Eager) settings.emplace_back("RNDV_THRESH", "inf");
  if (protocol == Protocol::Rendezvous) settings.emplace_back("RNDV_THRESH", "0");
  for (const auto& [name, value] : settings) {
    status = ucp_config_modify(config, name, value);
    if (status != UCS_OK) {
      ucp_config_release(config);
      return ucsError(status, std::string("ucp_config_modify ") + name);
    }
  }
  std::unique_ptr<Stranger> self(new Stranger());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  status = ucp_init(&params, config, &self->context_);
  ucp_config_release(config);
  if (status != UCS_OK) return ucsError(status, "ucp_init");

  ucp_worker_params_t workerParams{};
  workerParams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  workerParams.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(self->context_, &workerParams, &self->worker_);
  if (status != UCS_OK) return ucsError(status, "ucp_worker_create");

  ucp_ep_params_t epParams{};
  epParams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
  epParams.address = reinterpret_cast<const ucp_address_t*>(address->worker.data());
  epParams.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  epParams.err_handler.cb = &ignoreError;
  status = ucp_ep_create(self->worker_, &epParams, &self->ep_);
  if (status != UCS_OK) return ucsError(status, "ucp_ep_create");
  return self;
}

Stranger::~Stranger() {
  for (Send& send : sends_) ucp_request_cancel(worker_, send.ucx);
  if (ep_ != nullptr) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t closing = ucp_ep_close_nbx(ep_, &param);
    if (closing != nullptr && !UCS_PTR_IS_ERR(closing)) ucp_request_free(closing);
  }
  // As UcxTransportImpl's teardown: no progress after a force-close (UCX 1.13).
  for (Send& send : sends_) ucp_request_free(send.ucx);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

bool Stranger::post(uint64_t ucxTag, const void* buf, size_t bytes) {
  ucp_request_param_t param = contiguous();
  ucs_status_ptr_t result = ucp_tag_send_nbx(ep_, buf, bytes, ucxTag, &param);
  if (UCS_PTR_IS_ERR(result)) return false;
  if (result != nullptr) sends_.push_back(Send{result, {}});
  return true;
}

bool Stranger::post(uint64_t ucxTag, std::vector<uint8_t> bytes) {
  ucp_request_param_t param = contiguous();
  ucs_status_ptr_t result = ucp_tag_send_nbx(ep_, bytes.data(), bytes.size(), ucxTag, &param);
  if (UCS_PTR_IS_ERR(result)) return false;
  // Moving the vector keeps its heap buffer where UCX reads it.
  if (result != nullptr) sends_.push_back(Send{result, std::move(bytes)});
  return true;
}

unsigned Stranger::progress() {
  const unsigned events = ucp_worker_progress(worker_);
  std::erase_if(sends_, [](const Send& send) {
    if (ucp_request_check_status(send.ucx) == UCS_INPROGRESS) return false;
    ucp_request_free(send.ucx);
    return true;
  });
  return events;
}

std::vector<uint8_t> helloBytes(uint64_t uuid, PeerId stamp, const ucx::Secret& secret) {
  ucx::HelloMessage hello;
  hello.stamp = stamp;
  hello.uuid = uuid;
  hello.secret = secret;
  std::vector<uint8_t> bytes(sizeof(hello));
  std::memcpy(bytes.data(), &hello, sizeof(hello));
  return bytes;
}

std::vector<uint8_t> inlineBytes(const Tag& tag, std::span<const uint8_t> payload,
                                 const ucx::Secret& secret) {
  const ucx::MessageHeader header =
      ucx::makeHeader(ucx::ControlKind::Inline, tag, payload.size(), secret);
  std::vector<uint8_t> bytes(sizeof(header) + payload.size());
  std::memcpy(bytes.data(), &header, sizeof(header));
  if (!payload.empty()) std::memcpy(bytes.data() + sizeof(header), payload.data(), payload.size());
  return bytes;
}

}  // namespace hc::transport::testing
